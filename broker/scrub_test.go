package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// TestGroupScrubFindsDamageBelowAnchor: one bit of a follower's old closed
// segment, below its checkpoint anchor, is flipped while it is stopped. It
// restarts (Open does not look there); its scrub finds the damage, names
// the file and the frame's offset, and stops the member (Raft shut down,
// DAMAGED recorded). Reads of the damaged range from it are refused
// (pull: ErrCorruptMessage naming the file; CATCHUP_READ: SYSTEM_ERROR
// naming the file and offset), a restart refuses too, nothing
// acknowledged is lost on the others, and after the operator's wipe it
// catches up and holds every acknowledged message again.
func TestGroupScrubFindsDamageBelowAnchor(t *testing.T) {
	const seg = 1 << 20
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
		g.ScrubBytesPerSecond = 256 << 20
	}})
	c.createTopic("T", 2)
	l := c.leader()
	acks := c.sendConcurrently(4, 3000, 512, 2, nil)
	c.waitCaughtUp()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	// Snapshot and anchor the follower's whole log: the flip below is then
	// where neither Open nor Raft's start reads.
	if err := f.g().raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.g().LogStore().Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// A clean stop: after a kill the store's crash recovery would check
	// the queue units after its checkpoint and cut the damaged message's
	// queue there, so the pull below would find no unit to read.
	c.stop(fi)

	// A message in the second segment (closed: the log is ~6 segments).
	var a ack
	for _, x := range acks {
		if x.PhysicalOffset > seg+seg/2 && x.PhysicalOffset < 2*seg-4096 {
			a = x
			break
		}
	}
	if a.key == "" {
		t.Fatal("no acknowledged message in the second segment")
	}
	path := filepath.Join(f.cfg.Store.StorePathRootDir, "commitlog", storage.FileName(seg))
	off := a.PhysicalOffset - seg + 200 // inside its body
	flipByte(t, path, off, 0x04)

	c.startWithScrub(fi, &scrubTiming{startDelay: 0, passGap: time.Hour})
	g := f.g()
	testutil.WaitFor(t, 30*time.Second, "the scrub finds the damage", func() bool { return g.LogDamaged() != nil })
	var de *raftlog.DamageError
	if err := g.LogDamaged(); !errors.As(err, &de) {
		t.Fatalf("LogDamaged: %v, want a raftlog.DamageError", err)
	}
	if de.Path != path || de.FileOffset > off || off-de.FileOffset > seg {
		t.Fatalf("damage reported in %s at %d, flipped %s at %d", de.Path, de.FileOffset, path, off)
	}
	if pos, _, err := l.g().LogStore().Locate(de.AfterIndex + 1); err != nil || pos != de.Position {
		t.Fatalf("damage at position %d after index %d; the leader has index %d at %d (%v)", de.Position, de.AfterIndex, de.AfterIndex+1, pos, err)
	}
	t.Logf("scrub: %v", de)
	testutil.WaitFor(t, 10*time.Second, "the damaged member's Raft stops", func() bool { return g.raftStopped() })
	if _, err := os.Stat(g.damagedMarkerPath()); err != nil {
		t.Fatalf("DAMAGED marker: %v", err)
	}

	// Reads of the range are refused, naming file and offset.
	if r, err := g.Store().GetMessage("c", "T", a.QueueID, a.QueueOffset, 32, nil); !errors.Is(err, store.ErrCorruptMessage) || !strings.Contains(err.Error(), path) {
		t.Fatalf("pull of the damaged message: %d messages, %v (status %v, min %d max %d, offset %d phy %d)", len(r.Messages), err, r.Status, r.MinOffset, r.MaxOffset, a.QueueOffset, a.PhysicalOffset)
	}
	resp := serveCatchupRead(g, remoting.NewRequest(remoting.RequestCatchupRead,
		&wire.CatchupReadRequestHeader{Op: "log", Pos: de.Position, N: 1 << 20}, nil))
	if resp.Code != remoting.ResponseSystemError || len(resp.Body) != 0 || !strings.Contains(resp.Remark, path) ||
		!strings.Contains(resp.Remark, "offset "+strconv.FormatInt(de.FileOffset, 10)) {
		t.Fatalf("CATCHUP_READ of the damaged range: code %d, %d bytes, remark %q", resp.Code, len(resp.Body), resp.Remark)
	}

	// A restart refuses.
	c.kill(fi)
	if err := c.tryStart(fi); !errors.Is(err, raftlog.ErrDamagedLog) || !strings.Contains(err.Error(), path) {
		t.Fatalf("restart of the damaged member: %v", err)
	}

	// The group serves on; nothing acknowledged is lost on the others.
	acks = append(acks, c.sendConcurrently(4, 300, 512, 2, nil)...)
	c.waitCaughtUp()
	for _, n := range c.nodes {
		if n.g() != nil {
			checkAcked(t, n, acks)
		}
	}

	// The operator's repair: wipe, restart empty, catch up.
	if err := os.RemoveAll(f.cfg.Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	c.start(fi)
	c.waitCaughtUp()
	testutil.WaitFor(t, 60*time.Second, "the repaired member holds everything", func() bool {
		return !f.g().catchupBlocksVoting()
	})
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
	if f.g().LogDamaged() != nil {
		t.Fatal("the repaired member reports damage")
	}
}

// flipByte xors one byte of the file at path with mask.
func flipByte(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var b [1]byte
	if _, err := file.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := file.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// startWithScrub starts member i like start, with the scrub's schedule t.
func (c *testCluster) startWithScrub(i int, t *scrubTiming) {
	n := c.nodes[i]
	n.fs = &killableFS{FS: n.base}
	cfg := n.cfg
	cfg.Store.FS = n.fs
	parts, err := openDiskParts(cfg, nil, func(s raft.StreamLayer) raft.StreamLayer {
		n.stream = &faultStream{StreamLayer: s, conns: map[*trackedConn]struct{}{}}
		return n.stream
	})
	if err != nil {
		c.t.Fatalf("start %s: %v", n.id, err)
	}
	g, err := newGroup(cfg, parts, n.remoting, nil, groupOptions{scrub: t})
	if err != nil {
		c.t.Fatalf("start %s: %v", n.id, err)
	}
	g.startCatchup(c.catchupSource)
	n.grp.Store(g)
}

// TestGroupStartRefusesDamageRaftReads: damage below the anchor but after
// the last snapshot is read by Raft's start (its configuration scan), which
// panics on an unreadable entry; the member's start fails instead, with
// the file and offset.
func TestGroupStartRefusesDamageRaftReads(t *testing.T) {
	const seg = 1 << 20
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
		g.ScrubBytesPerSecond = 0
	}})
	c.createTopic("T", 2)
	l := c.leader()
	acks := c.sendConcurrently(2, 2500, 512, 2, nil)
	c.waitCaughtUp()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	// Anchored, then killed (a clean stop would snapshot everything).
	if err := f.g().LogStore().Checkpoint(); err != nil {
		t.Fatal(err)
	}
	c.kill(fi)
	path := filepath.Join(f.cfg.Store.StorePathRootDir, "commitlog", storage.FileName(0))
	flipByte(t, path, seg/2, 0x01)
	err := c.tryStart(fi)
	if !errors.Is(err, raftlog.ErrDamagedLog) || !strings.Contains(err.Error(), path) {
		t.Fatalf("start with a damaged entry after the snapshot: %v", err)
	}
	t.Logf("start refused: %v", err)
	for _, n := range c.nodes {
		if n.g() != nil {
			checkAcked(t, n, acks)
		}
	}
}

// TestGroupDamagedLeaderHandsOver: a pull on the leader finds a message of
// an old segment damaged; the segment check confirms it, the leader hands
// leadership to a follower (a transfer, not an election after a timeout)
// and shuts its Raft member down; the group goes on without losing an
// acknowledged message or the offset commits it flushed before the
// transfer.
func TestGroupDamagedLeaderHandsOver(t *testing.T) {
	const seg = 1 << 20
	c := newTestCluster(t, clusterOpts{sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) { g.ScrubBytesPerSecond = 0 }})
	c.createTopic("T", 2)
	l := c.leader()
	acks := c.sendConcurrently(4, 2500, 512, 2, nil)
	c.waitCaughtUp()
	var a ack
	for _, x := range acks {
		if x.PhysicalOffset > seg/2 && x.PhysicalOffset < seg-4096 {
			a = x
			break
		}
	}
	path := filepath.Join(l.cfg.Store.StorePathRootDir, "commitlog", storage.FileName(0))
	flipByte(t, path, a.PhysicalOffset+200, 0x08) // the mapping sees it
	g := l.g()
	_, err := g.Store().GetMessage("c", "T", a.QueueID, a.QueueOffset, 32, nil)
	if !errors.Is(err, store.ErrCorruptMessage) {
		t.Fatalf("pull of the damaged message on the leader: %v", err)
	}
	term := g.raft.CurrentTerm()
	has := flushOnTransfer(t, g)
	g.noteReadDamage(a.PhysicalOffset, err) // what processPull does
	testutil.WaitFor(t, 15*time.Second, "the damaged leader stops", func() bool {
		return g.LogDamaged() != nil && g.raftStopped()
	})
	var de *raftlog.DamageError
	if !errors.As(g.LogDamaged(), &de) || de.Path != path {
		t.Fatalf("damage: %v", g.LogDamaged())
	}
	waitRaftPortClosed(t, g)
	l2 := c.leader()
	if l2 == l {
		t.Fatal("the damaged member still leads")
	}
	if nt := l2.g().raft.CurrentTerm(); nt != term+1 {
		t.Logf("new leader in term %d (damaged leader's %d): an election, not only the transfer", nt, term)
	}
	testutil.WaitFor(t, 5*time.Second, "the new leader "+l2.id+" holds the flushed offset", func() bool { return has(l2.g()) })
	acks = append(acks, c.sendConcurrently(2, 200, 512, 2, nil)...)
	for _, n := range c.nodes {
		if n != l && n.g() != nil {
			testutil.WaitFor(t, 10*time.Second, "caught up", func() bool { return n.g().fsm.applied.Load() >= l2.g().fsm.applied.Load() })
			checkAcked(t, n, acks)
		}
	}
}
