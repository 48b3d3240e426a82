package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"testing"
)

func TestEncodeTopicRouteDataMatchesFastjsonShape(t *testing.T) {
	rd := &TopicRouteData{
		QueueDatas: []QueueData{{BrokerName: "b", ReadQueueNums: 8, WriteQueueNums: 4, Perm: 6}},
		BrokerDatas: []BrokerData{{Cluster: "C", BrokerName: "b",
			BrokerAddrs: map[int64]string{1: "h:2", 0: "h:1"}}},
		FilterServerTable: map[string][]string{},
	}
	const legacy = `{"brokerDatas":[{"brokerAddrs":{0:"h:1",1:"h:2"},"brokerName":"b","cluster":"C","enableActingMaster":false}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":4}]}`
	if got := string(EncodeTopicRouteData(rd, false)); got != legacy {
		t.Fatalf("legacy:\n got %s\nwant %s", got, legacy)
	}
	std := EncodeTopicRouteData(rd, true)
	var back TopicRouteData
	if err := json.Unmarshal(std, &back); err != nil {
		t.Fatalf("standard form is not JSON: %v: %s", err, std)
	}
	if !reflect.DeepEqual(&back, rd) {
		t.Fatalf("standard round trip %+v", back)
	}
}

func TestEncodeClusterInfoForms(t *testing.T) {
	ci := &ClusterInfo{
		BrokerAddrTable: map[string]BrokerData{
			"b": {Cluster: "C", BrokerName: "b", BrokerAddrs: map[int64]string{1: "h:2", 0: "h:1"}, ZoneName: "z"},
		},
		ClusterAddrTable: map[string][]string{"C": {"b"}},
	}
	const legacy = `{"brokerAddrTable":{"b":{"brokerAddrs":{0:"h:1",1:"h:2"},"brokerName":"b","cluster":"C","enableActingMaster":false,"zoneName":"z"}},` +
		`"clusterAddrTable":{"C":["b"]}}`
	if got := string(EncodeClusterInfo(ci, false)); got != legacy {
		t.Fatalf("legacy:\n got %s\nwant %s", got, legacy)
	}
	for _, standard := range []bool{false, true} {
		back, err := DecodeClusterInfo(EncodeClusterInfo(ci, standard))
		if err != nil {
			t.Fatalf("standard=%v: %v", standard, err)
		}
		if !reflect.DeepEqual(back, ci) {
			t.Fatalf("standard=%v: round trip %+v", standard, back)
		}
	}
	if _, err := DecodeClusterInfo([]byte(`{"brokerAddrTable":[`)); !errors.Is(err, ErrBadBody) {
		t.Fatalf("truncated: want ErrBadBody, got %v", err)
	}
}

func TestDecodeTopicRouteDataForms(t *testing.T) {
	rd := &TopicRouteData{
		OrderTopicConf:    "b:4",
		QueueDatas:        []QueueData{{BrokerName: "b", ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRead | PermWrite}},
		BrokerDatas:       []BrokerData{{Cluster: "C", BrokerName: "b", BrokerAddrs: map[int64]string{MasterID: "h:1"}}},
		FilterServerTable: map[string][]string{"h:1": {"f:1"}},
	}
	for _, standard := range []bool{false, true} {
		back, err := DecodeTopicRouteData(EncodeTopicRouteData(rd, standard))
		if err != nil {
			t.Fatalf("standard=%v: %v", standard, err)
		}
		if !reflect.DeepEqual(back, rd) {
			t.Fatalf("standard=%v: round trip %+v", standard, back)
		}
	}
	if _, err := DecodeTopicRouteData([]byte(`not json`)); !errors.Is(err, ErrBadBody) {
		t.Fatalf("not json: want ErrBadBody, got %v", err)
	}
}

// FuzzDecodeTopicRouteData checks that no input panics the route decoder
// and that whatever decodes re-encodes (standard form) to a route that
// decodes equal; go test runs only the seeds.
func FuzzDecodeTopicRouteData(f *testing.F) {
	rd := &TopicRouteData{
		QueueDatas:        []QueueData{{BrokerName: "b", ReadQueueNums: 8, WriteQueueNums: 4, Perm: 6}},
		BrokerDatas:       []BrokerData{{Cluster: "C", BrokerName: "b", BrokerAddrs: map[int64]string{1: "h:2", 0: "h:1"}}},
		FilterServerTable: map[string][]string{},
	}
	f.Add(EncodeTopicRouteData(rd, false))
	f.Add(EncodeTopicRouteData(rd, true))
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{-1:"x"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeTopicRouteData(data)
		if err != nil {
			return
		}
		again, err := DecodeTopicRouteData(EncodeTopicRouteData(got, true))
		if err != nil {
			t.Fatalf("re-encoded route does not decode: %v", err)
		}
		if !bytes.Equal(EncodeTopicRouteData(again, true), EncodeTopicRouteData(got, true)) {
			t.Fatalf("route encoding is not stable")
		}
	})
}

// FuzzDecodeClusterInfo checks that no input panics the cluster-info
// decoder and that whatever decodes re-encodes stably.
func FuzzDecodeClusterInfo(f *testing.F) {
	ci := &ClusterInfo{
		BrokerAddrTable:  map[string]BrokerData{"b": {Cluster: "C", BrokerName: "b", BrokerAddrs: map[int64]string{0: "h:1"}}},
		ClusterAddrTable: map[string][]string{"C": {"b"}},
	}
	f.Add(EncodeClusterInfo(ci, false))
	f.Add(EncodeClusterInfo(ci, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeClusterInfo(data)
		if err != nil {
			return
		}
		again, err := DecodeClusterInfo(EncodeClusterInfo(got, true))
		if err != nil {
			t.Fatalf("re-encoded cluster info does not decode: %v", err)
		}
		if !bytes.Equal(EncodeClusterInfo(again, true), EncodeClusterInfo(got, true)) {
			t.Fatalf("cluster info encoding is not stable")
		}
	})
}

// A client builds one queue object per routed queue: a route of a few
// bytes naming billions of queues is refused, not handed on to allocate.
func TestDecodeTopicRouteDataBoundsQueues(t *testing.T) {
	for _, body := range []string{
		`{"queueDatas":[{"brokerName":"b","readQueueNums":2000000000,"writeQueueNums":1,"perm":6}]}`,
		`{"queueDatas":[{"brokerName":"b","readQueueNums":1,"writeQueueNums":9223372036854775807,"perm":6}]}`,
		`{"queueDatas":[{"brokerName":"a","readQueueNums":600000,"writeQueueNums":600000,"perm":6},{"brokerName":"b","readQueueNums":600000,"writeQueueNums":1,"perm":6}]}`,
		`{"orderTopicConf":"a:8;b:99999999999","queueDatas":[]}`,
	} {
		if rd, err := DecodeTopicRouteData([]byte(body)); !errors.Is(err, ErrBadBody) {
			t.Fatalf("%s: decoded %+v, %v; want ErrBadBody", body, rd, err)
		}
	}
	ok := `{"orderTopicConf":"a:8;b:x;c:-1","queueDatas":[{"brokerName":"a","readQueueNums":1024,"writeQueueNums":16,"perm":6},{"brokerName":"b","readQueueNums":-5,"writeQueueNums":0,"perm":6}]}`
	if _, err := DecodeTopicRouteData([]byte(ok)); err != nil {
		t.Fatalf("%s: %v", ok, err)
	}
}

// A route the name server itself builds for a large cluster is decoded:
// brokers accept up to 1024 queues per topic each, so a topic on 80 broker
// groups at that count (RocketMQ sets no limit at all) routes 81920 queues.
func TestDecodeTopicRouteDataLargeCluster(t *testing.T) {
	rd := &TopicRouteData{FilterServerTable: map[string][]string{}}
	for i := range 80 {
		name := "broker-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		rd.QueueDatas = append(rd.QueueDatas, QueueData{BrokerName: name, ReadQueueNums: 1024, WriteQueueNums: 1024, Perm: 6})
		rd.BrokerDatas = append(rd.BrokerDatas, BrokerData{Cluster: "C", BrokerName: name, BrokerAddrs: map[int64]string{0: "h:1"}})
	}
	for _, standard := range []bool{false, true} {
		if _, err := DecodeTopicRouteData(EncodeTopicRouteData(rd, standard)); err != nil {
			t.Fatalf("standard=%v: %v", standard, err)
		}
	}
}

// An orderTopicConf of separators alone is counted without a string per
// item: REGISTER_TOPIC_IN_NAMESRV decodes such a body on the name server,
// and clients decode the conf the name server's KV table puts in routes.
func TestDecodeTopicRouteDataOrderConfBounded(t *testing.T) {
	const size = 8 << 20
	body := append(append([]byte(`{"orderTopicConf":"`), bytes.Repeat([]byte{';'}, size)...), `"}`...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeTopicRouteData(body)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*size {
		t.Fatalf("decoding an orderTopicConf of %d separators allocated %d MiB", size, got>>20)
	}
}
