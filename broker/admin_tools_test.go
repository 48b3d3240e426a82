package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// TestCleanUnusedTopicKeepsQueueOffsets: CLEAN_UNUSED_TOPIC runs on the
// member it is sent to only. Queue offsets are assigned by every member's
// FSM and must stay identical, so after a topic is deleted, cleaned on the
// leader and created again, a message sent to it is at the same queue
// offset on every member: a follower that becomes leader serves it there.
// The cleaned topic's old messages can still be viewed by offset.
func TestCleanUnusedTopicKeepsQueueOffsets(t *testing.T) {
	tc := startRealCluster(t, nil)
	li := tc.createTopicOnLeader("CU", 1)
	leader := tc.nodes[li]
	var oldOff int64
	for range 3 {
		oldOff = sentOffset(t, "old", tc.call(leader.Addr(), remoting.RequestSendMessage, sendExt("CU", 0, ""), []byte("old")))
	}
	if r := tc.call(leader.Addr(), remoting.RequestDeleteTopicInBroker, map[string]string{"topic": "CU"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(leader.Addr(), remoting.RequestCleanUnusedTopic, nil, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("clean unused topic: %d %s", r.Code, r.Remark)
	}
	// The deleted topic's queue is gone, its messages are still in the
	// CommitLog: viewed by offset, one is still shown.
	if v := tc.call(leader.Addr(), remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(oldOff, 10)}, nil); v.Code != remoting.ResponseSuccess {
		t.Fatalf("view of a message of the cleaned topic: %d %s", v.Code, v.Remark)
	}
	tc.createTopic(leader.Addr(), "CU", 1)
	r := tc.call(leader.Addr(), remoting.RequestSendMessage, sendExt("CU", 0, ""), []byte("new"))
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("send after re-creation: %d %s", r.Code, r.Remark)
	}
	qo, err := strconv.ParseInt(r.ExtFields["queueOffset"], 10, 64)
	if err != nil {
		t.Fatalf("send answer's queueOffset %q: %v", r.ExtFields["queueOffset"], err)
	}
	applied := tc.groups[li].FSMAppliedIndex()
	for i, g := range tc.groups {
		testutil.WaitFor(t, 10*time.Second, "member applied the send", func() bool { return g.FSMAppliedIndex() >= applied })
		res, err := g.Store().GetMessage("G", "CU", 0, qo, 1, nil)
		if err != nil || res.Status != store.Found {
			t.Fatalf("member %d: queue offset %d acknowledged by the leader: %v %v (queue [%d, %d))", i, qo, res.Status, err, res.MinOffset, res.MaxOffset)
		}
		if body := string(decodeAll(t, res.Body)[0].Body); body != "new" {
			t.Errorf("member %d serves %q at acknowledged queue offset %d, not the message sent", i, body, qo)
		}
	}
}
