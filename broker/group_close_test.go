package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestCloseTakesSnapshot: a clean Close snapshots what was applied, so a
// cold restart of the whole group starts every member from that snapshot
// (nothing after it to read back or re-apply) with every acknowledged
// message in place.
func TestCloseTakesSnapshot(t *testing.T) {
	c := newTestCluster(t, clusterOpts{sync: true})
	c.createTopic("T", 4)
	var acks []ack
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("k%d", i)
		res, err := c.sendRetrying(testMessage("T", int32(i%4), key, "", 0, 512), time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ack{key: key, PutResult: res})
	}
	c.waitCaughtUp()
	applied := make([]uint64, len(c.nodes))
	for i, n := range c.nodes {
		applied[i] = n.g().Raft().AppliedIndex()
		if s := n.g().lastSnapshotIndex(); s >= applied[i] {
			t.Fatalf("%s: snapshot %d already covers applied %d; the test needs entries after it", n.id, s, applied[i])
		}
	}
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	for i, n := range c.nodes {
		// Read right after NewRaft: restored from the snapshot Close took.
		snap, _ := strconv.ParseUint(n.g().Raft().Stats()["last_snapshot_index"], 10, 64)
		if snap < applied[i] {
			t.Errorf("%s: restarted from snapshot %d, applied %d before Close", n.id, snap, applied[i])
		}
	}
	c.leader()
	c.waitCaughtUp()
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
}
