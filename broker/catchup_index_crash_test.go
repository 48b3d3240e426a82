package broker

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestGroupCatchupIndexSurvivesCrashAfterFinish: a wiped member finishes
// its catch-up (index phase included) and is killed before its store's
// periodic checkpoint runs. The restart's crash recovery drops index files
// newer than the checkpoint's index time; the backfilled files must not be
// among them, since the finished catch-up never indexes that range again.
func TestGroupCatchupIndexSurvivesCrashAfterFinish(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: 1 << 20, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
		g.Store.MessageIndexEnable = true
		g.Store.MaxHashSlotNum, g.Store.MaxIndexNum = 512, 301
		g.Store.FlushIntervalConsumeQueue = time.Hour // no periodic checkpoint in the test's time
	}})
	c.createTopic("T", 2)
	l := c.leader()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	acks := c.sendConcurrently(4, 3000, 1024, 2, nil)
	c.waitCaughtUp()
	c.stop(fi)
	if err := os.RemoveAll(f.cfg.Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		if n != f {
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
	}
	leaderMin := l.g().LogStore().MinPosition()
	c.start(fi)
	g := f.g()
	testutil.WaitFor(t, 60*time.Second, "the wiped member finishes its catch-up", func() bool {
		return g.catchup.completed.Load() > 0 && !g.catchupBlocksVoting()
	})
	c.waitCaughtUp()
	// The backfilled head (its first segment starts with zeros before the
	// fetched range) scrubs clean.
	scrubbed := 0
	for pos := int64(0); ; scrubbed++ {
		next, ok, err := g.LogStore().ScrubSegment(pos, func(int) error { return nil })
		if err != nil {
			t.Fatalf("scrub of the caught-up member at %d: %v", pos, err)
		}
		if !ok {
			break
		}
		pos = next
	}
	if scrubbed == 0 {
		t.Fatal("the scrub verified no segment of the caught-up member")
	}
	c.kill(fi)
	c.start(fi)
	g = f.g()
	c.waitCaughtUp()
	missing, retained := 0, 0
	for _, a := range acks {
		if a.PhysicalOffset < leaderMin {
			continue
		}
		retained++
		r, err := g.Store().QueryMessage("T", a.key, 8, 0, math.MaxInt64)
		if err != nil || len(r.Messages) != 1 || r.Messages[0].PhysicalOffset != a.PhysicalOffset {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("after a crash following the catch-up, %d of %d retained acknowledged messages are not found by key", missing, retained)
	}
}
