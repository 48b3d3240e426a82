package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// Offset writes that must win over commits acknowledged before them: an
// admin reset or clone over the leader's queued commits, and over the
// commits a deposed leader hands to its successor (RocketMQ: a reset wins
// over the commits a consumer made before it; a clone replaces the
// destination group's offsets).

func hourCoalescer(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour }

func commitExt(group, topic string, queueID int, off int64) map[string]string {
	return map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queueID),
		"commitOffset": strconv.FormatInt(off, 10)}
}

func mustSucceed(t *testing.T, what string, r *remoting.RemotingCommand) {
	t.Helper()
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("%s: %d %s", what, r.Code, r.Remark)
	}
}

// TestResetAndCloneWinOverQueuedCommits: a reset or a clone replicated
// while the leader still queues an older commit of the same queue is not
// undone by the flush that follows.
func TestResetAndCloneWinOverQueuedCommits(t *testing.T) {
	pc, rep := startFakeProc(t, hourCoalescer)
	c, addr := pc.nodes[0], pc.nodes[0].Addr()
	pc.createTopic(addr, "TT", 1)
	for range 3 {
		mustSucceed(t, "send", pc.call(addr, remoting.RequestSendMessage, sendExt("TT", 0, ""), []byte("m")))
	}
	for _, g := range []string{"RG", "SG", "CG"} {
		mustSucceed(t, "create group "+g, pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)))
	}
	mustSucceed(t, "commit SG", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("SG", "TT", 0, 1), nil))
	c.offsets.flush()
	mustSucceed(t, "commit RG", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("RG", "TT", 0, 3), nil))
	mustSucceed(t, "commit CG", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("CG", "TT", 0, 3), nil))

	mustSucceed(t, "reset RG", pc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "TT", "group": "RG", "timestamp": "0", "isForce": "true"}, nil))
	mustSucceed(t, "clone SG to CG", pc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{
		"srcGroup": "SG", "destGroup": "CG", "topic": "TT", "offline": "true"}, nil))
	c.offsets.flush()
	for _, want := range []struct {
		group string
		off   int64
	}{{"RG", 0}, {"CG", 1}} {
		if got, _ := rep.State().ConsumerOffset(want.group, "TT", 0); got != want.off {
			t.Errorf("%s after its queued commit of 3 and a flush: %d, want %d (the reset's, the clone's)", want.group, got, want.off)
		}
	}
}
