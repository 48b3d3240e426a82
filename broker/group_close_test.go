package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestCloseTakesSnapshot: a clean Close snapshots what was applied, so a
// cold restart of the whole group starts every member from that snapshot
// (nothing after it to read back or re-apply) with every acknowledged
// message in place.
func TestCloseTakesSnapshot(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, disk: true, sync: true})
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

// TestSnapshotBySize: with Raft's own snapshot triggers off (the harness
// sets them to never), no member snapshots while its log is below
// SnapshotBytes, and every member snapshots by itself once it has grown past
// it (the snapshot covers what its FSM had applied, which may lag the log
// end a little).
func TestSnapshotBySize(t *testing.T) {
	const limit = 256 << 10
	c := newTestCluster(t, clusterOpts{sync: true, tune: func(g *GroupConfig) { g.SnapshotBytes = limit }})
	c.createTopic("T", 4)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := c.sendRetrying(testMessage("T", int32(i%4), fmt.Sprintf("k%d", i), "", 0, 4<<10), time.Now().Add(10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		c.waitCaughtUp()
	}
	send(0, 20) // ~85 KiB
	for _, n := range c.nodes {
		if s := n.g().lastSnapshotIndex(); s != 0 {
			t.Fatalf("%s: snapshot at %d with %d bytes of log, below the %d-byte trigger", n.id, s, n.g().logs.NextPosition(), limit)
		}
	}
	send(20, 100) // ~430 KiB in all: one snapshot's worth, not two
	for _, n := range c.nodes {
		g := n.g()
		testutil.WaitFor(t, 10*time.Second, n.id+" snapshots by log size", func() bool {
			s := g.lastSnapshotIndex()
			end, err := g.logs.EndOf(s)
			return s > 0 && err == nil && g.logs.NextPosition()-end < limit
		})
	}
}

// TestSnapshotBySizeStopsOnRemoval: a member that learns it was removed
// shuts its Raft member down for good and closes its Raft port, so no
// snapshot can succeed again in this process: its size-triggered snapshot loop returns instead of
// waking to try, while the members left keep theirs.
func TestSnapshotBySizeStopsOnRemoval(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{sync: true, disk: true, tune: func(g *GroupConfig) { g.SnapshotBytes = 256 << 10 }})
	l := c.leader()
	gone := c.nodes[c.followerOf(l)]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The quorum guard waits for the other follower's first heartbeat
	// acknowledgment after the election.
	var err error
	testutil.WaitFor(t, 10*time.Second, gone.id+" removed", func() bool {
		_, err = l.g().RemoveMember(ctx, gone.id, false)
		return !errors.Is(err, ErrQuorumAtRisk)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The removal watch (a Controller's) stops the member this way once
	// the routed leader confirms the removal.
	gone.g().stopAsRemoved(fmt.Errorf("%w: removed by the test", ErrRemovedMember))
	waitRaftPortClosed(t, gone.g())
	loopDone := func(g *Group) bool {
		select {
		case <-g.snapLoopDone:
			return true
		default:
			return false
		}
	}
	testutil.WaitFor(t, 15*time.Second, gone.id+"'s snapshot loop returns once its raft is shut down", func() bool {
		return loopDone(gone.g())
	})
	for _, n := range c.nodes {
		if n != gone && loopDone(n.g()) {
			t.Fatalf("%s, still a member, stopped its snapshot loop", n.id)
		}
	}
}

// waitRaftPortClosed waits until g's Raft port refuses connections: a
// member that stopped its Raft closes its transport, so its peers' RPCs
// fail at once instead of waiting out their I/O timeout.
func waitRaftPortClosed(t *testing.T, g *Group) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, g.cfg.Raft.DLegerSelfID+"'s Raft port closed", func() bool {
		conn, err := net.DialTimeout("tcp", string(g.trans.LocalAddr()), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
}
