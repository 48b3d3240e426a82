package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"testing"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestQueryConsumeQueueOutsideRange: QUERY_CONSUME_QUEUE (321) at an index
// below the queue's minimum (its head retired, or negative) or at its end
// answers as RocketMQ's AdminBrokerProcessor, whose ConsumeQueue.iterateFrom
// has nothing there: success, no units, "Index N of Q@T is not exist!".
// Units from the minimum would be taken as the index's (the body gives a
// unit no offset). The body still names the queue's bounds.
func TestQueryConsumeQueueOutsideRange(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T", 1)
	var msgs []*store.Message
	for i := range 35 {
		msgs = append(msgs, &store.Message{Topic: "T", QueueID: 0, Body: []byte(fmt.Sprint("m", i)), BornTimestamp: 1,
			BornHost: netip.MustParseAddrPort("10.0.0.1:1000"), Properties: map[string]string{}})
	}
	if _, err := rep.PutMessages(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	cq := rep.st.ConsumeQueues().Get("T", 0)
	at10, err := cq.Get(10)
	if err != nil {
		t.Fatal(err)
	}
	// Retention's step: the CommitLog below unit 10's message is gone.
	if err := cq.CorrectMinOffset(at10.PhyOffset); err != nil {
		t.Fatal(err)
	}
	if cq.MinOffset() != 10 || cq.MaxOffset() != 35 {
		t.Fatalf("queue [%d, %d), want [10, 35)", cq.MinOffset(), cq.MaxOffset())
	}
	query := func(index int64, count int) (wire.QueryConsumeQueueResponseBody, string) {
		t.Helper()
		return tc.queryConsumeQueue(addr, "T", 0, index, count)
	}
	for _, index := range []int64{5, 9, -1, 35, 40} {
		body, remark := query(index, 20)
		if want := fmt.Sprintf("Index %d of 0@T is not exist!", index); remark != want || len(body.QueueData) != 0 {
			t.Fatalf("query from %d: %d units, remark %q; want none and %q", index, len(body.QueueData), remark, want)
		}
		if body.MinQueueIndex != 10 || body.MaxQueueIndex != 35 {
			t.Fatalf("query from %d: bounds [%d, %d), want [10, 35)", index, body.MinQueueIndex, body.MaxQueueIndex)
		}
	}
	// From the minimum on, the units are the index's.
	body, remark := query(10, 3)
	if remark != "" || len(body.QueueData) != 3 {
		t.Fatalf("query from 10: %d units, remark %q; want 3 and none", len(body.QueueData), remark)
	}
	for i, d := range body.QueueData {
		u, err := cq.Get(10 + int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if d.PhysicOffset != u.PhyOffset || d.PhysicSize != u.Size || d.TagsCode != u.TagsCode {
			t.Fatalf("unit %d answered %+v, want the queue's %+v", 10+i, d, u)
		}
	}
	// Every unit retired: the queue is empty at its end.
	if err := cq.CorrectMinOffset(math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	body, remark = query(34, 1)
	if remark != "Index 34 of 0@T is not exist!" || len(body.QueueData) != 0 || body.MinQueueIndex != 35 || body.MaxQueueIndex != 35 {
		t.Fatalf("query from 34 of a retired queue: %d units, bounds [%d, %d), remark %q", len(body.QueueData), body.MinQueueIndex, body.MaxQueueIndex, remark)
	}
}

// TestQueryConsumeQueueMissingQueueAndOfflineGroup: RocketMQ's answers for a
// queue the broker has no ConsumeQueue for (SYSTEM_ERROR, "Q@T is not
// exist!") and for a consumerGroup with no online consumer of the topic
// (filterData "G@T is not online!").
func TestQueryConsumeQueueMissingQueueAndOfflineGroup(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T", 1)
	if _, err := rep.PutMessages(context.Background(), []*store.Message{{Topic: "T", QueueID: 0, Body: []byte("m"),
		BornTimestamp: 1, BornHost: netip.MustParseAddrPort("10.0.0.1:1000"), Properties: map[string]string{}}}); err != nil {
		t.Fatal(err)
	}
	r := tc.call(addr, remoting.RequestQueryConsumeQueue, map[string]string{
		"topic": "T", "queueId": "3", "index": "0", "count": "1"}, nil)
	if r.Code != remoting.ResponseSystemError || r.Remark != "3@T is not exist!" {
		t.Fatalf("missing queue: code %d %q, want %d %q", r.Code, r.Remark, remoting.ResponseSystemError, "3@T is not exist!")
	}
	r = tc.call(addr, remoting.RequestQueryConsumeQueue, map[string]string{
		"topic": "T", "queueId": "0", "index": "0", "count": "1", "consumerGroup": "G"}, nil)
	var body wire.QueryConsumeQueueResponseBody
	if err := json.Unmarshal(r.Body, &body); err != nil || r.Code != remoting.ResponseSuccess {
		t.Fatalf("offline group: code %d %s, body %s (%v)", r.Code, r.Remark, r.Body, err)
	}
	if body.FilterData != "G@T is not online!" || body.SubscriptionData != nil || len(body.QueueData) != 1 {
		t.Fatalf("offline group: filterData %q, subscription %v, %d units; want RocketMQ's not-online note and the unit",
			body.FilterData, body.SubscriptionData, len(body.QueueData))
	}
}

// queryConsumeQueue asks addr for QUERY_CONSUME_QUEUE of topic's queue
// from index, failing the test unless it succeeds with a body; it returns
// the body and the remark.
func (tc *procCluster) queryConsumeQueue(addr, topic string, queueID int, index int64, count int) (wire.QueryConsumeQueueResponseBody, string) {
	tc.t.Helper()
	r := tc.call(addr, remoting.RequestQueryConsumeQueue, map[string]string{
		"topic": topic, "queueId": fmt.Sprint(queueID), "index": fmt.Sprint(index), "count": fmt.Sprint(count), "consumerGroup": ""}, nil)
	if r.Code != remoting.ResponseSuccess {
		tc.t.Fatalf("query %s/%d [%d, +%d): code %d %s, want success", topic, queueID, index, count, r.Code, r.Remark)
	}
	var body wire.QueryConsumeQueueResponseBody
	if err := json.Unmarshal(r.Body, &body); err != nil {
		tc.t.Fatalf("query %s/%d [%d, +%d): %v in %s", topic, queueID, index, count, err, r.Body)
	}
	return body, r.Remark
}
