package broker

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// A commit the leader acknowledged but had not replicated yet is answered
// while it leads; once deposed, it answers the replicated offset (the one
// the new leader has), never its unreplicated pending one.
func TestOffsetLookupDropsPendingWhenDeposed(t *testing.T) {
	rep := newFakeReplica(t, "127.0.0.1:1")
	c, err := New(testBrokerConfig(t, "127.0.0.1:1", 1), rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Shutdown(context.Background()) }()
	if err := rep.CommitOffsets(context.Background(), []OffsetCommit{{Group: "G", Topic: "T", QueueID: 0, Offset: 10}}); err != nil {
		t.Fatal(err)
	}
	c.offsets.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 11})
	if off, ok := c.offsets.lookup("G", "T", 0); !ok || off != 11 {
		t.Fatalf("leader: lookup = %d %v, want the pending 11", off, ok)
	}
	rep.setLeader(false, "127.0.0.1:2")
	if off, ok := c.offsets.lookup("G", "T", 0); !ok || off != 10 {
		t.Fatalf("deposed: lookup = %d %v, want the replicated 10", off, ok)
	}
}

// TestFollowerAnswersOffsetCommitNotLeader: a follower answers an offset
// commit not-leader, naming the leader, before it judges the commit by
// its own tables: a member still catching up (restarted, or just added)
// may not have applied the topic yet, and an answer of TOPIC_NOT_EXIST
// from it would fail the consumer's commit instead of sending it on.
func TestFollowerAnswersOffsetCommitNotLeader(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	rep.setLeader(false, "127.0.0.1:1")
	r := tc.call(tc.nodes[0].Addr(), remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "G", "topic": "NOT_APPLIED_YET", "queueId": "0", "commitOffset": "7"}, nil)
	if r.Code != remoting.ResponseServiceNotAvailable || r.ExtFields[wire.ExtLeaderAddr] != "127.0.0.1:1" {
		t.Fatalf("follower's answer to a commit of a topic it lacks: %d %q %v, want not-leader naming 127.0.0.1:1", r.Code, r.Remark, r.ExtFields)
	}
}
