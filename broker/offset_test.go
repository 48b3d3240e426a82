package broker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
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

// flakyOffsetsReplica is a fakeReplica whose CommitOffsets fails while
// failing is set, as a leader's Raft write does when it cannot enqueue the
// entry within ApplyTimeout under load.
type flakyOffsetsReplica struct {
	*fakeReplica
	failing atomic.Bool
	calls   atomic.Int32
}

func (r *flakyOffsetsReplica) CommitOffsets(ctx context.Context, commits []OffsetCommit) error {
	r.calls.Add(1)
	if r.failing.Load() {
		return fmt.Errorf("%w after 5s: timed out enqueuing operation", ErrApplyTimeout)
	}
	return r.fakeReplica.CommitOffsets(ctx, commits)
}

func newFlakyOffsetsController(t *testing.T) (*Controller, *flakyOffsetsReplica) {
	t.Helper()
	rep := &flakyOffsetsReplica{fakeReplica: newFakeReplica(t, "127.0.0.1:1")}
	return controllerOver(t, rep), rep
}

// controllerOver is a Controller of one member over rep, shut down when
// the test ends.
func controllerOver(t *testing.T, rep Replica) *Controller {
	t.Helper()
	c, err := New(testBrokerConfig(t, "127.0.0.1:1", 1), rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c
}

func replicatedOffset(rep *flakyOffsetsReplica, group, topic string, queueID int32) (int64, bool) {
	return rep.State().ConsumerOffset(group, topic, queueID)
}

// TestOffsetFlushKeepsCommitsWhileLeading: a commit the leader
// acknowledged is not lost when the flush that proposes it fails while the
// node still leads: the next flush proposes it again. A consumer that
// committed once (a lite consumer's Close) never sends it again.
func TestOffsetFlushKeepsCommitsWhileLeading(t *testing.T) {
	c, rep := newFlakyOffsetsController(t)
	c.offsets.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 7})
	rep.failing.Store(true)
	c.offsets.flush()
	if off, ok := c.offsets.lookup("G", "T", 0); !ok || off != 7 {
		t.Fatalf("after a failed flush the leader answers %d %v, want its acknowledged 7", off, ok)
	}
	rep.failing.Store(false)
	c.offsets.flush()
	if off, ok := replicatedOffset(rep, "G", "T", 0); !ok || off != 7 {
		t.Fatalf("after a failed flush and a good one the replicated offset is %d %v, want 7", off, ok)
	}
	if n := rep.calls.Load(); n != 2 {
		t.Fatalf("CommitOffsets called %d times, want 2 (the failed flush, its retry)", n)
	}
}

// TestOffsetFlushGivesUpAfterBoundedAttempts: a batch whose every flush
// fails while the node leads is dropped after offsetFlushAttempts, so a
// write Raft always refuses is not retried forever; a newer commit of a key
// starts its own count.
func TestOffsetFlushGivesUpAfterBoundedAttempts(t *testing.T) {
	c, rep := newFlakyOffsetsController(t)
	rep.failing.Store(true)
	c.offsets.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 7})
	c.offsets.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 3})
	for range offsetFlushAttempts - 1 {
		c.offsets.flush()
	}
	c.offsets.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 4}) // newer: a count of its own
	c.offsets.flush()
	if _, ok := c.offsets.lookup("G", "T", 0); ok {
		t.Fatalf("a commit whose %d flushes failed is still pending", offsetFlushAttempts)
	}
	if off, ok := c.offsets.lookup("G", "T", 1); !ok || off != 4 {
		t.Fatalf("the newer commit of queue 1 after one failed flush: lookup = %d %v, want 4 still pending", off, ok)
	}
	if n := rep.calls.Load(); n != int32(offsetFlushAttempts) {
		t.Fatalf("CommitOffsets called %d times, want %d", n, offsetFlushAttempts)
	}
}

// TestOffsetPendingDroppedWhenDeposed: commits acknowledged in one term are
// never proposed in a later one. Between the two, another leader may have
// taken a newer commit or a reset of the same queue (the state machine
// takes the last write, so an offset may move back), and proposing the old
// commit would overwrite it. Here the node loses leadership before its
// flush, the other leader's commit of 20 is applied, and the node leads
// again by its next flush.
func TestOffsetPendingDroppedWhenDeposed(t *testing.T) {
	c, rep := newFlakyOffsetsController(t)
	c.offsets.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 11})
	rep.setLeader(false, "127.0.0.1:2")
	rep.mu.Lock() // the entry of the other leader, applied here
	rep.offsets[topicGroupKey("T", "G")] = map[int32]int64{0: 20}
	rep.mu.Unlock()
	rep.setLeader(true, "127.0.0.1:1")
	c.offsets.flush()
	if off, ok := replicatedOffset(rep, "G", "T", 0); !ok || off != 20 {
		t.Fatalf("replicated offset %d %v, want the newer leader's 20, not the commit of 11 from an older term", off, ok)
	}
}

// stoppedReplica is a fakeReplica whose FSM stopped applying (Group's
// ApplyStopped) while it still leads.
type stoppedReplica struct {
	*fakeReplica
	stopped atomic.Bool
}

func (r *stoppedReplica) ApplyStopped() error {
	if r.stopped.Load() {
		return &ApplyStoppedError{Index: 7, Err: errors.New("consumequeue write: input/output error")}
	}
	return nil
}

// A leader whose FSM stopped may lack commits the group made after the
// stop: it does not answer QUERY_NOT_FOUND for an offset it has no record
// of (a consumer told so starts at the queue's end and skips), it refuses.
func TestApplyStoppedLeaderRefusesOffsetNotFound(t *testing.T) {
	rep := &stoppedReplica{fakeReplica: newFakeReplica(t, "127.0.0.1:1")}
	c, err := New(testBrokerConfig(t, "127.0.0.1:1", 1), rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Shutdown(context.Background()) }()
	query := func() *remoting.RemotingCommand {
		t.Helper()
		req := remoting.NewRequest(remoting.RequestQueryConsumerOffset,
			&wire.QueryConsumerOffsetRequestHeader{ConsumerGroup: "G", Topic: "T", QueueID: 0}, nil)
		r, err := c.processQueryConsumerOffset(context.Background(), nil, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := query(); r.Code != remoting.ResponseSuccess || r.ExtFields["offset"] != "0" {
		t.Fatalf("applying leader without the offset, queue never written: %d %q %v, want 0", r.Code, r.Remark, r.ExtFields)
	}
	rep.stopped.Store(true)
	if r := query(); r.Code != remoting.ResponseServiceNotAvailable || !strings.Contains(r.Remark, "apply stopped") {
		t.Fatalf("apply-stopped leader without the offset: %d %q, want SERVICE_NOT_AVAILABLE saying apply stopped", r.Code, r.Remark)
	}
	if err := rep.CommitOffsets(context.Background(), []OffsetCommit{{Group: "G", Topic: "T", QueueID: 0, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	if r := query(); r.Code != remoting.ResponseSuccess || r.ExtFields["offset"] != "5" {
		t.Fatalf("apply-stopped leader with an offset: %d %q %v, want it", r.Code, r.Remark, r.ExtFields)
	}
}

// TestQueryOffsetOfQueueStartingRecently: a group with no offset for a
// queue that still starts at 0, empty or with recent messages, is told 0,
// as RocketMQ's broker tells it (checkInDiskByConsumeOffset), so a group
// consuming from the last offset reads a queue added to its topic, or a
// young topic, from the start; told "none" it skipped those messages. A
// queue whose first message is older (here: accessMessageInMemoryMaxRatio
// 0) is still QUERY_NOT_FOUND.
func TestQueryOffsetOfQueueStartingRecently(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ratio int
		want  string // offset, or "" for QUERY_NOT_FOUND
	}{
		{"recent", 40, "0"},
		{"old", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := newFakeReplica(t, "127.0.0.1:1", func(c *store.Config) { c.AccessMessageInMemoryMaxRatio = tc.ratio })
			c, err := New(testBrokerConfig(t, "127.0.0.1:1", 1), rep, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Shutdown(context.Background()) }()
			query := func(queue int32) *remoting.RemotingCommand {
				t.Helper()
				req := remoting.NewRequest(remoting.RequestQueryConsumerOffset,
					&wire.QueryConsumerOffsetRequestHeader{ConsumerGroup: "G", Topic: "T", QueueID: queue}, nil)
				r, err := c.processQueryConsumerOffset(context.Background(), nil, req)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			var msgs []*store.Message
			for i := range 3 {
				msgs = append(msgs, &store.Message{Topic: "T", QueueID: 0, Body: []byte(strconv.Itoa(i)), BornTimestamp: 1,
					BornHost: netip.MustParseAddrPort("10.0.0.1:1000"), Properties: map[string]string{}})
			}
			msgs = append(msgs, &store.Message{Topic: "Other", QueueID: 0, Body: []byte("x"), BornTimestamp: 1,
				BornHost: netip.MustParseAddrPort("10.0.0.1:1000"), Properties: map[string]string{}})
			if _, err := rep.PutMessages(context.Background(), msgs); err != nil {
				t.Fatal(err)
			}
			r := query(0)
			switch {
			case tc.want == "" && r.Code != remoting.ResponseQueryNotFound:
				t.Fatalf("queue whose first message is old: %d %q %v, want QUERY_NOT_FOUND", r.Code, r.Remark, r.ExtFields)
			case tc.want != "" && (r.Code != remoting.ResponseSuccess || r.ExtFields["offset"] != tc.want):
				t.Fatalf("queue whose first message is recent: %d %q %v, want offset %s", r.Code, r.Remark, r.ExtFields, tc.want)
			}
			if r := query(1); r.Code != remoting.ResponseSuccess || r.ExtFields["offset"] != "0" {
				t.Fatalf("empty queue: %d %q %v, want offset 0", r.Code, r.Remark, r.ExtFields)
			}
			if err := rep.CommitOffsets(context.Background(), []OffsetCommit{{Group: "G", Topic: "T", QueueID: 0, Offset: 2}}); err != nil {
				t.Fatal(err)
			}
			if r := query(0); r.Code != remoting.ResponseSuccess || r.ExtFields["offset"] != "2" {
				t.Fatalf("committed offset: %d %q %v, want 2", r.Code, r.Remark, r.ExtFields)
			}
		})
	}
}

// committedStoppedReplica is a fakeReplica leading with a stopped FSM:
// its offset entries commit (the other members apply them) and it answers
// each with the ApplyStoppedError.
type committedStoppedReplica struct {
	*fakeReplica
	calls atomic.Int32
}

func (r *committedStoppedReplica) CommitOffsets(ctx context.Context, commits []OffsetCommit) error {
	r.calls.Add(1)
	if err := r.fakeReplica.CommitOffsets(ctx, commits); err != nil {
		return err
	}
	return &ApplyStoppedError{Index: 7, Err: errors.New("consumequeue write: input/output error")}
}

// TestOffsetFlushOfApplyStoppedLeaderProposesOnce: a leader whose FSM
// stopped still commits its offset entries, so a flush answered with the
// stop is done, not retried (each retry would append the same commits to
// the log again).
func TestOffsetFlushOfApplyStoppedLeaderProposesOnce(t *testing.T) {
	rep := &committedStoppedReplica{fakeReplica: newFakeReplica(t, "127.0.0.1:1")}
	c, err := New(testBrokerConfig(t, "127.0.0.1:1", 1), rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Shutdown(context.Background()) }()
	c.offsets.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 7})
	for range offsetFlushAttempts {
		c.offsets.flush()
	}
	if n := rep.calls.Load(); n != 1 {
		t.Fatalf("CommitOffsets called %d times for one commit, want 1", n)
	}
}
