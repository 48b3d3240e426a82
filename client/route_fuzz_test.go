package client

import (
	"slices"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// FuzzRouteQueues: a name server's route answer of any bytes either fails
// to decode or builds publish and subscribe queues, never a panic; the
// queues built are bounded by wire.MaxRouteQueues whatever the counts in
// the route, and each one is a queue the route lists.
func FuzzRouteQueues(f *testing.F) {
	rd := &wire.TopicRouteData{
		QueueDatas: []wire.QueueData{{BrokerName: "a", ReadQueueNums: 4, WriteQueueNums: 2, Perm: 6}, {BrokerName: "b", ReadQueueNums: 1, WriteQueueNums: 8, Perm: 2}},
		BrokerDatas: []wire.BrokerData{{Cluster: "C", BrokerName: "a", BrokerAddrs: map[int64]string{0: "h:1", 1: "h:2"}},
			{Cluster: "C", BrokerName: "b", BrokerAddrs: map[int64]string{2: "h:3"}}},
	}
	f.Add(wire.EncodeTopicRouteData(rd, false))
	f.Add(wire.EncodeTopicRouteData(rd, true))
	rd.OrderTopicConf = "a:4;b:2;c:x;:1"
	f.Add(wire.EncodeTopicRouteData(rd, true))
	f.Add([]byte(`{"queueDatas":[{"brokerName":"b","readQueueNums":2000000000,"writeQueueNums":1,"perm":6}]}`))
	f.Add([]byte(`{"orderTopicConf":"b:99999999999"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rd, err := wire.DecodeTopicRouteData(body)
		if err != nil {
			return
		}
		pub := newPublishInfo("T", rd)
		sub := subscribeQueues("T", rd)
		if len(pub.Queues) > wire.MaxRouteQueues || len(sub) > wire.MaxRouteQueues {
			t.Fatalf("%d publish and %d subscribe queues from a route of %d bytes", len(pub.Queues), len(sub), len(body))
		}
		if !slices.IsSortedFunc(sub, CompareQueues) {
			t.Fatal("subscribe queues are not sorted")
		}
		for _, q := range sub {
			if q.Topic != "T" || !slices.ContainsFunc(rd.QueueDatas, func(d wire.QueueData) bool {
				return d.BrokerName == q.BrokerName && d.Perm&wire.PermRead != 0 && q.QueueID < d.ReadQueueNums
			}) {
				t.Fatalf("subscribe queue %+v is not a readable queue of the route", q)
			}
		}
		if pub.OrderTopic {
			return
		}
		for _, q := range pub.Queues {
			if q.Topic != "T" || !slices.ContainsFunc(rd.QueueDatas, func(d wire.QueueData) bool {
				return d.BrokerName == q.BrokerName && d.Perm&wire.PermWrite != 0 && q.QueueID < d.WriteQueueNums
			}) {
				t.Fatalf("publish queue %+v is not a writable queue of the route", q)
			}
		}
	})
}
