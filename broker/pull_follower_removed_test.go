package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// followerWithoutHead starts a group, stores 100 messages on topic's queue
// 0 and has a follower snapshot and truncate its log past them (small
// segments), so it no longer holds the queue's head the leader serves. It
// returns the cluster, that follower's index and the leader's address.
func followerWithoutHead(t *testing.T, topic string) (pc *procCluster, f int, leaderAddr string) {
	t.Helper()
	pc = startRealCluster(t, func(cfg *BrokerConfig) {
		cfg.Store.MappedFileSizeCommitLog = 64 << 10
		cfg.Store.MaxMessageSize = 16 << 10
	})
	l := pc.createTopicOnLeader(topic, 1)
	leaderAddr = pc.nodes[l].Addr()
	body := bytes.Repeat([]byte("x"), 2000)
	for range 100 {
		pc.sendAt(leaderAddr, topic, body)
	}
	f = (l + 1) % 3
	testutil.WaitFor(t, 10*time.Second, "the follower applied every message", func() bool {
		return pc.groups[f].Store().GetMaxOffsetInQueue(topic, 0) == 100
	})
	if _, err := pc.groups[f].SnapshotAndTruncate(); err != nil {
		t.Fatal(err)
	}
	return pc, f, leaderAddr
}

// TestFollowerDoesNotSkipMessagesItDropped: a follower that no longer
// holds a range the leader retains (its own retention went further, or a
// snapshot install reset its log and its catch-up is not done) answers a
// pull there as removed. A follower does not move a consumer's offset (only
// the leader does): the pull must leave the offset where it was, or the
// consumer skips messages the leader still serves.
func TestFollowerDoesNotSkipMessagesItDropped(t *testing.T) {
	pc, f, leaderAddr := followerWithoutHead(t, "FR")
	if pc.groups[f].Store().CommitLog().MinOffset() == 0 {
		t.Fatal("the follower's retention removed nothing")
	}
	r := pc.call(pc.nodes[f].Addr(), remoting.RequestPullMessage, pullExt("G", "FR", 0, 0, 0), nil)
	var h wire.PullMessageResponseHeader
	if err := r.DecodeHeader(&h); err != nil {
		t.Fatal(err)
	}
	if r.Code != remoting.ResponsePullNotFound || h.NextBeginOffset != 0 {
		t.Fatalf("pull at 0 from the follower without it: code %d, next begin offset %d; want PULL_NOT_FOUND at 0", r.Code, h.NextBeginOffset)
	}
	// The leader still serves them.
	lr := pc.call(leaderAddr, remoting.RequestPullMessage, pullExt("G", "FR", 0, 0, 0), nil)
	if lr.Code != remoting.ResponseSuccess {
		t.Fatalf("pull at 0 from the leader: %d %s", lr.Code, lr.Remark)
	}
}

// TestFollowerHoldsPullAtDroppedRange: a long poll at an offset a
// follower no longer holds (answered PULL_NOT_FOUND there, offset kept)
// is held a moment (notServedHold), not answered at once: its offset is
// below the queue's end, which made the hold wake it at once, and the
// consumer (a RocketMQ client pulls again at once after PULL_NOT_FOUND)
// then pulled as fast as the follower answered, for as long as it read
// there. Nor is it held for its whole suspend: the answer names the
// leader, where the SDK reads next.
func TestFollowerHoldsPullAtDroppedRange(t *testing.T) {
	pc, f, _ := followerWithoutHead(t, "FS")
	const suspend = 30 * time.Second
	start := time.Now()
	r := pc.call(pc.nodes[f].Addr(), remoting.RequestPullMessage, pullExt("G", "FS", 0, 0, suspend.Milliseconds()), nil)
	took := time.Since(start)
	var h wire.PullMessageResponseHeader
	if err := r.DecodeHeader(&h); err != nil {
		t.Fatal(err)
	}
	if r.Code != remoting.ResponsePullNotFound || h.NextBeginOffset != 0 {
		t.Fatalf("long poll at 0 from the follower without it: code %d, next begin offset %d; want PULL_NOT_FOUND at 0", r.Code, h.NextBeginOffset)
	}
	if took < notServedHold/2 || took > suspend/3 {
		t.Fatalf("long poll at 0 from the follower without it answered after %v; want about %v (its suspend: %v)", took, notServedHold, suspend)
	}
}
