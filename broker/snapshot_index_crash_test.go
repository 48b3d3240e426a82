package broker

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestGroupSnapshotKeepsIndexAcrossCrash: a member takes a snapshot (Raft
// then re-applies only the entries after it) and is killed before its
// store's periodic checkpoint runs. The restart's crash recovery drops
// index files newer than the checkpoint's index time; Raft re-applies only
// the entries after the snapshot, so the member indexes those below it
// again from the log, in the background: it is up and acknowledges sends
// while that rebuild is held, a crash during the rebuild resumes it at the
// next start, and afterwards every acknowledged message is found by key
// exactly once.
func TestGroupSnapshotKeepsIndexAcrossCrash(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: 1 << 20, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
		g.Store.MessageIndexEnable = true
		g.Store.FlushIntervalConsumeQueue = time.Hour // no periodic checkpoint in the test's time
	}})
	c.createTopic("T", 2)
	l := c.leader()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	acks := c.sendConcurrently(4, 500, 256, 2, nil)
	c.waitCaughtUp()
	if err := f.g().Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	// Entries after the snapshot land in the same index file, so its end
	// time passes the checkpoint's and the crash recovery drops it whole.
	acks = append(acks, c.sendConcurrently(2, 50, 256, 2, nil)...)
	c.waitCaughtUp()

	var held atomic.Bool
	reached := make(chan struct{}, 1)
	hook := func(ctx context.Context, g *Group, index uint64) error {
		if !held.Load() {
			return nil
		}
		select {
		case reached <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	indexRebuildEntryHook.Store(&hook)
	t.Cleanup(func() { indexRebuildEntryHook.Store(nil) })
	held.Store(true)
	c.kill(fi)
	c.start(fi)
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("the restarted member never started its index rebuild")
	}
	// Up while the rebuild is held: it follows, the group acknowledges.
	acks = append(acks, c.sendConcurrently(2, 50, 256, 2, nil)...)
	c.waitCaughtUp()
	if why, _ := readMarkerFile(f.g().storeFS(), f.g().indexRebuildMarkerPath()); why == "" {
		t.Fatal("no index rebuild marker while the rebuild is pending")
	}
	// A crash during the rebuild: the next start resumes it.
	c.kill(fi)
	held.Store(false)
	c.start(fi)
	g := f.g()
	testutil.WaitFor(t, 60*time.Second, "the index rebuild finishes", func() bool {
		why, _ := readMarkerFile(g.storeFS(), g.indexRebuildMarkerPath())
		return why == ""
	})
	c.waitCaughtUp()
	missing := 0
	for _, a := range acks {
		r, err := g.Store().QueryMessage("T", a.key, 8, 0, math.MaxInt64)
		if err != nil || len(r.Messages) != 1 || r.Messages[0].PhysicalOffset != a.PhysicalOffset {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("after a snapshot and two crashes, %d of %d acknowledged messages are not found by key exactly once", missing, len(acks))
	}
}
