package broker

import (
	"math"
	"testing"
	"time"
)

// TestGroupSnapshotKeepsIndexAcrossCrash: a member takes a snapshot (Raft
// then re-applies only the entries after it) and is killed before its
// store's periodic checkpoint runs. The restart's crash recovery drops
// index files newer than the checkpoint's index time; Raft re-applies only
// the entries after the snapshot, so the start indexes those below it
// again from the log, and every acknowledged message is found by key.
func TestGroupSnapshotKeepsIndexAcrossCrash(t *testing.T) {
	c := newTestCluster(t, clusterOpts{sync: true, disk: true, segmentSize: 1 << 20, tune: func(g *GroupConfig) {
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
	c.kill(fi)
	c.start(fi)
	g := f.g()
	c.waitCaughtUp()
	missing := 0
	for _, a := range acks {
		r, err := g.Store().QueryMessage("T", a.key, 8, 0, math.MaxInt64)
		if err != nil || len(r.Messages) != 1 || r.Messages[0].PhysicalOffset != a.PhysicalOffset {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("after a snapshot and a crash, %d of %d acknowledged messages are not found by key", missing, len(acks))
	}
}
