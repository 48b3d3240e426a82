package broker

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestGroupCatchupIndexResumesAfterRestart: a wiped member's catch-up is
// stopped halfway through indexing the backfilled range (after some index
// files were completed) by a restart. It stays pending across the restart,
// resumes, indexes only what the completed files lack, and then every
// retained acknowledged message is found by its key on it exactly once.
func TestGroupCatchupIndexResumesAfterRestart(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: 1 << 20, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
		g.Store.MessageIndexEnable = true
		g.Store.MaxHashSlotNum, g.Store.MaxIndexNum = 512, 301 // 300 keys per file
	}})
	c.createTopic("T", 2)
	l := c.leader()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	acks := c.sendConcurrently(4, 4000, 1024, 2, nil)
	c.waitCaughtUp()
	c.stop(fi)
	if err := os.RemoveAll(f.cfg.Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	acks = append(acks, c.sendConcurrently(4, 200, 1024, 2, nil)...)
	for _, n := range c.nodes {
		if n == f {
			continue
		}
		if err := n.g().Raft().Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		idx, err := n.g().LogStore().FirstIndexFrom(n.g().LogStore().MinPosition() + 1<<20)
		if err != nil || idx == 0 {
			t.Fatalf("%s: first index: %d, %v", n.id, idx, err)
		}
		if _, err := n.g().LogStore().DeleteSegmentsBefore(idx); err != nil {
			t.Fatal(err)
		}
	}
	leaderMin := l.g().LogStore().MinPosition()

	// Halfway through the range the index phase waits until the member
	// is stopped.
	halfway := make(chan struct{}, 1)
	hook := func(ctx context.Context, g *Group, index uint64) error {
		if g.cfg.Store.StorePathRootDir != f.cfg.Store.StorePathRootDir {
			return nil
		}
		st, _, ok := g.logs.Backfill()
		if !ok || index-st.StartIndex < (st.NextIndex-st.StartIndex)/2 {
			return nil
		}
		select {
		case halfway <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	catchupIndexEntryHook.Store(&hook)
	t.Cleanup(func() { catchupIndexEntryHook.Store(nil) })
	c.start(fi)
	select {
	case <-halfway:
	case <-time.After(60 * time.Second):
		t.Fatal("the catch-up never reached the middle of the index phase")
	}
	files := f.g().Store().Index().Files()
	c.stop(fi)
	catchupIndexEntryHook.Store(nil)
	t.Logf("stopped halfway through the index phase with %d index files", files)

	c.start(fi)
	g := f.g()
	if !g.catchupBlocksVoting() && g.catchup.completed.Load() == 0 {
		t.Fatal("the restarted member does not report the unfinished catch-up")
	}
	testutil.WaitFor(t, 60*time.Second, "the restarted member finishes its catch-up", func() bool {
		return g.catchup.completed.Load() > 0 && !g.catchupBlocksVoting()
	})
	c.waitCaughtUp()
	var retained int
	for _, a := range acks {
		if a.PhysicalOffset < leaderMin {
			continue
		}
		retained++
		r, err := g.Store().QueryMessage("T", a.key, 8, 0, math.MaxInt64)
		if err != nil || len(r.Messages) != 1 || r.Messages[0].PhysicalOffset != a.PhysicalOffset {
			t.Fatalf("key %s (at %d) on the rebuilt member: %d messages, %v", a.key, a.PhysicalOffset, len(r.Messages), err)
		}
	}
	cs := g.CatchupStatus()
	t.Logf("resumed: indexed %d more messages; %d retained acknowledged messages found by key once each", cs.Indexed, retained)
	if cs.Indexed == 0 || cs.Indexed >= int64(retained) {
		t.Fatalf("the resumed index phase indexed %d messages of %d retained: it did not resume after the completed files", cs.Indexed, retained)
	}
}
