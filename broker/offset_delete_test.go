package broker

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestDeleteDropsPendingOffsets: deleting a topic, or a subscription group
// with cleanOffset (mqadmin deleteSubGroup -r true), takes its consumer
// offsets with it, including commits the leader still
// holds in its coalescer (a live consumer's commit, or the offsets of a
// skipAccumulatedMessage / resetOffsetByTime run just before). Flushed after
// the delete they would bring the offsets back: the deleted group would stay
// listed by brokerConsumeStats and topicList -c, and a group created again
// under the name would resume from them.
func TestDeleteDropsPendingOffsets(t *testing.T) {
	tc := startRealCluster(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	l := tc.createTopicOnLeader("DT", 2)
	if tc.createTopicOnLeader("DT2", 2) != l {
		t.Fatal("leadership moved while creating the topics")
	}
	node := tc.nodes[l]
	addr := node.Addr()
	for _, topic := range []string{"DT", "DT2"} {
		for q := range 2 {
			if r := tc.call(addr, remoting.RequestSendMessage, sendExt(topic, q, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
		}
	}
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("DG"))
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group DG: %d %s", r.Code, r.Remark)
	}
	commit := func(topic string, q int) {
		t.Helper()
		ext := map[string]string{"consumerGroup": "DG", "topic": topic, "queueId": strconv.Itoa(q), "commitOffset": "1"}
		if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, ext, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit offset: %d %s", r.Code, r.Remark)
		}
	}
	offsets := func() []string {
		var keys []string
		for k := range tc.groups[l].State().ConsumerOffsets() {
			keys = append(keys, k)
		}
		return keys
	}

	// A group: one queue committed by a consumer, the topic reset by an admin.
	commit("DT", 0)
	if r := tc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "DT", "group": "DG", "timestamp": "-1", "isForce": "true"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("skip accumulated: %d %s", r.Code, r.Remark)
	}
	commit("DT", 1)
	if r := tc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "DG", "cleanOffset": "true"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	node.offsets.flush() // the coalescer's next tick
	if keys := offsets(); len(keys) != 0 {
		t.Fatalf("after deleteSubGroup -r true DG and a coalescer flush the broker holds offsets %v; want none", keys)
	}
	if _, ok := node.offsets.lookup("DG", "DT", 1); ok {
		t.Fatal("a pending offset of the deleted group DG is still served")
	}

	// A topic: its offsets go, another topic's stay.
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group DG again: %d %s", r.Code, r.Remark)
	}
	commit("DT", 0)
	commit("DT2", 0)
	if r := tc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": "DT"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	node.offsets.flush()
	if keys := offsets(); len(keys) != 1 || keys[0] != "DT2@DG" {
		t.Fatalf("after deleteTopic DT and a coalescer flush the broker holds offsets %v; want DT2@DG only", keys)
	}
}
