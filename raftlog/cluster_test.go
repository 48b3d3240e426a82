package raftlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
)

// countFSM counts applied commands; its snapshot is the log position
// record (snapshot.go) followed by the count.
type countFSM struct {
	logs     *LogStore
	mu       sync.Mutex
	commands int
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.Type == raft.LogCommand {
		f.commands++
	}
	return f.commands
}

func (f *countFSM) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commands
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	return countSnap{n: f.count(), logs: f.logs}, nil
}

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	p, err := ReadSnapshotPosition(rc)
	if err != nil {
		return err
	}
	if err := f.logs.RestoreFrom(p); err != nil {
		return err
	}
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	f.commands = int(binary.BigEndian.Uint64(b[:]))
	f.mu.Unlock()
	return nil
}

type countSnap struct {
	n    int
	logs *LogStore
}

func (s countSnap) Persist(sink raft.SnapshotSink) error {
	if err := s.logs.WritePositionFor(sink); err != nil {
		sink.Cancel()
		return err
	}
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(s.n))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countSnap) Release() {}

type testNode struct {
	id     string
	logs   *LogStore
	stable *StableStore
	trans  *raft.NetworkTransport
	r      *raft.Raft
	fsm    *countFSM
	down   bool
	cfg    Config
	dir    string
}

func (n *testNode) shutdown(t *testing.T) {
	if n.down {
		return
	}
	n.down = true
	if err := n.r.Shutdown().Error(); err != nil {
		t.Errorf("%s shutdown: %v", n.id, err)
	}
	// Close pooled outbound connections too: the peers' inbound handlers
	// only return when their connection closes (NetworkTransport.Close
	// closes just the listener).
	n.trans.CloseStreams()
	n.trans.Close()
	n.stable.Close()
}

// startCluster starts three raft.Raft nodes over TCP on 127.0.0.1, each with
// a LogStore on real files with sync on, bootstrapped with the same
// configuration from a Config (dLegerPeers).
func startCluster(t *testing.T) []*testNode {
	ids := []string{"n0", "n1", "n2"}
	var peers []string
	for _, id := range ids {
		peers = append(peers, fmt.Sprintf("%s-127.0.0.1:%d", id, testutil.FreePort(t)))
	}
	base := t.TempDir()
	var nodes []*testNode
	for _, id := range ids {
		cfg := DefaultConfig()
		cfg.EnableDLegerCommitLog = true
		cfg.DLegerGroup = "broker-a"
		cfg.DLegerPeers = strings.Join(peers, ";")
		cfg.DLegerSelfID = id
		cfg.SnapshotInterval = time.Hour // no snapshots: the whole log stays comparable
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, startNode(t, cfg, filepath.Join(base, id), true))
	}
	return nodes
}

// startNode opens the stores in dir and starts Raft; bootstrap only on a
// fresh dir.
func startNode(t *testing.T, cfg Config, dir string, bootstrap bool) *testNode {
	rc, err := cfg.RaftConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := cfg.SelfAddr()
	n := &testNode{id: cfg.DLegerSelfID, fsm: &countFSM{}}
	if n.logs, err = Open(filepath.Join(dir, "log"), Options{SegmentSize: 32 << 10, Sync: true}); err != nil {
		t.Fatal(err)
	}
	n.fsm.logs = n.logs
	t.Cleanup(func() { n.logs.Close() })
	if n.stable, err = OpenStableStore(filepath.Join(dir, "stable.db")); err != nil {
		t.Fatal(err)
	}
	snaps, err := OpenSnapshotStore(filepath.Join(dir, "snap"), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.trans, err = raft.NewTCPTransportWithLogger(addr, nil, cfg.TransportMaxPool, cfg.TransportTimeout, rc.Logger); err != nil {
		t.Fatal(err)
	}
	if bootstrap {
		conf, _ := cfg.Configuration()
		if err := raft.BootstrapCluster(rc, n.logs, n.stable, snaps, n.trans, conf); err != nil {
			t.Fatal(err)
		}
	}
	if n.r, err = raft.NewRaft(rc, n.fsm, n.logs, n.stable, snaps, n.trans); err != nil {
		t.Fatal(err)
	}
	n.cfg, n.dir = cfg, dir
	t.Cleanup(func() { n.shutdown(t) })
	return n
}

func waitLeader(t *testing.T, nodes []*testNode) *testNode {
	var leader *testNode
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if !n.down && n.r.State() == raft.Leader {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

func applyN(t *testing.T, r *raft.Raft, from, n int) { applySized(t, r, from, n, 0) }

// applySized applies n commands padded to size bytes.
func applySized(t *testing.T, r *raft.Raft, from, n, size int) {
	futures := make([]raft.ApplyFuture, 0, n)
	for i := from; i < from+n; i++ {
		cmd := []byte(fmt.Sprintf("cmd-%06d", i))
		if len(cmd) < size {
			cmd = append(cmd, bytes.Repeat([]byte{'.'}, size-len(cmd))...)
		}
		futures = append(futures, r.Apply(cmd, 5*time.Second))
	}
	for i, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatalf("apply %d: %v", from+i, err)
		}
	}
}

// sameFrames checks that two stores hold byte-identical frames at identical
// positions for [1, upTo].
func sameFrames(t *testing.T, a, b *testNode, upTo uint64) {
	t.Helper()
	for i := uint64(1); i <= upTo; i++ {
		pa, fa, err := a.logs.ReadFrame(i)
		if err != nil {
			t.Fatalf("%s index %d: %v", a.id, i, err)
		}
		pb, fb, err := b.logs.ReadFrame(i)
		if err != nil {
			t.Fatalf("%s index %d: %v", b.id, i, err)
		}
		if pa != pb || !bytes.Equal(fa, fb) {
			t.Fatalf("index %d: %s has %d bytes at %d, %s has %d bytes at %d (equal bytes: %v)",
				i, a.id, len(fa), pa, b.id, len(fb), pb, bytes.Equal(fa, fb))
		}
	}
}

// TestThreeNodeSmoke: a real 3-node group on loopback TCP over LogStore
// (real files, sync on): elect, apply 1,000 commands, kill the leader, a new
// leader applies more, and the logs of all members hold byte-identical
// frames at identical positions up to the commit index. The old leader then
// restarts from its files, catches up, and matches too.
func TestThreeNodeSmoke(t *testing.T) {
	nodes := startCluster(t)
	leader := waitLeader(t, nodes)
	applyN(t, leader.r, 0, 1000)
	oldApplied := leader.r.AppliedIndex()
	killed := time.Now()
	leader.shutdown(t)

	next := waitLeader(t, nodes)
	if next == leader {
		t.Fatal("shut-down node still leader")
	}
	elected := time.Since(killed)
	applyN(t, next.r, 1000, 1)
	t.Logf("leader kill → new leader %v, → first applied write %v", elected, time.Since(killed))
	applyN(t, next.r, 1001, 199)
	if err := next.r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	commit := next.r.CommitIndex()
	var survivors []*testNode
	for _, n := range nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	for _, n := range survivors {
		testutil.WaitFor(t, 10*time.Second, n.id+" applies everything", func() bool {
			return n.r.AppliedIndex() >= commit && n.fsm.count() == 1200
		})
	}
	sameFrames(t, survivors[0], survivors[1], commit)
	sameFrames(t, survivors[0], leader, oldApplied)
	if p, _, _ := survivors[0].logs.Locate(commit); p < 32<<10 {
		t.Fatalf("log never rolled a segment (last frame at %d); the test should cross segments", p)
	}

	// Restart the old leader on its files: it rejoins as a follower,
	// replays its log into a fresh FSM, and catches up.
	if err := leader.logs.Close(); err != nil {
		t.Fatal(err)
	}
	back := startNode(t, leader.cfg, leader.dir, false)
	if r := back.logs.Recovery(); r.Frames != 0 {
		t.Fatalf("restart after a clean close rescanned %d frames", r.Frames)
	}
	applyN(t, next.r, 1200, 50)
	commit = next.r.CommitIndex()
	testutil.WaitFor(t, 10*time.Second, "restarted node catches up", func() bool {
		return back.r.AppliedIndex() >= commit && back.fsm.count() == 1250
	})
	sameFrames(t, next, back, commit)
}

// TestSnapshotInstallKeepsPositions: a follower that is down while the
// leader snapshots and retention deletes the segments it would need gets
// InstallSnapshot on restart; the FSM's Restore hands the snapshot's log
// position to RestoreFrom, and the follower's log continues at exactly the
// leader's positions with byte-identical frames.
func TestSnapshotInstallKeepsPositions(t *testing.T) {
	nodes := startCluster(t)
	leader := waitLeader(t, nodes)
	applyN(t, leader.r, 0, 100)
	var lagger *testNode
	for _, n := range nodes {
		if n != leader {
			lagger = n
			break
		}
	}
	testutil.WaitFor(t, 10*time.Second, "lagger applies the first 100", func() bool { return lagger.fsm.count() == 100 })
	lagger.shutdown(t)
	if err := lagger.logs.Close(); err != nil {
		t.Fatal(err)
	}
	lagLast, _ := lagger.logs.LastIndex()

	applySized(t, leader.r, 100, 600, 300)
	snap := leader.r.Snapshot()
	if err := snap.Error(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := snap.Open()
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	first, err := leader.logs.DeleteSegmentsBefore(meta.Index)
	if err != nil {
		t.Fatal(err)
	}
	if first <= lagLast+1 {
		t.Fatalf("retention kept index %d the lagger needs (first %d)", lagLast+1, first)
	}

	back := startNode(t, lagger.cfg, lagger.dir, false)
	applyN(t, leader.r, 700, 50)
	commit := leader.r.CommitIndex()
	testutil.WaitFor(t, 10*time.Second, "lagger catches up through a snapshot", func() bool {
		return back.r.AppliedIndex() >= commit && back.fsm.count() == 750
	})
	bFirst, _ := back.logs.FirstIndex()
	if bFirst != meta.Index+1 {
		t.Fatalf("lagger's log starts at %d, want snapshot index %d + 1", bFirst, meta.Index)
	}
	for i := meta.Index + 1; i <= commit; i++ {
		pa, fa, err := leader.logs.ReadFrame(i)
		if err != nil {
			t.Fatal(err)
		}
		pb, fb, err := back.logs.ReadFrame(i)
		if err != nil {
			t.Fatal(err)
		}
		if pa != pb || !bytes.Equal(fa, fb) {
			t.Fatalf("index %d: leader has it at %d, lagger at %d (equal bytes %v)", i, pa, pb, bytes.Equal(fa, fb))
		}
	}
}
