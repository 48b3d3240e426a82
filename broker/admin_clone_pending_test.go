package broker

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// TestCloneGroupOffsetTakesPendingCommits: cloneGroupOffset copies the
// source group's offsets as every read answers them, an acknowledged
// commit still waiting for the coalescer's flush included. Copying the
// replicated offsets only answered success and cloned nothing for a
// group whose commits had not been flushed yet.
func TestCloneGroupOffsetTakesPendingCommits(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "CT", 1)
	for range 2 {
		if r := tc.call(addr, remoting.RequestSendMessage, sendExt("CT", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	for _, g := range []string{"SRC", "DST"} {
		if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("create group %s: %d %s", g, r.Code, r.Remark)
		}
	}
	if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "SRC", "topic": "CT", "queueId": "0", "commitOffset": "2"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{"srcGroup": "SRC", "destGroup": "DST", "topic": "CT", "offline": "false"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("clone: %d %s", r.Code, r.Remark)
	}
	q := tc.call(addr, remoting.RequestQueryConsumerOffset, map[string]string{"consumerGroup": "DST", "topic": "CT", "queueId": "0"}, nil)
	if q.Code != remoting.ResponseSuccess || q.ExtFields["offset"] != "2" {
		t.Fatalf("DST's offset after cloning SRC (at 2, not flushed yet): %d %v %s; want 2", q.Code, q.ExtFields, q.Remark)
	}
}
