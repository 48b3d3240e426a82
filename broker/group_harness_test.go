package broker

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// faultStream wraps the Raft stream layer so a test can cut a node off the
// network (real TCP still: dials fail, accepted connections are closed,
// open ones are torn down).
type faultStream struct {
	raft.StreamLayer
	mu    sync.Mutex
	cut   bool
	conns map[*trackedConn]struct{}
}

type trackedConn struct {
	net.Conn
	s *faultStream
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// track adds c to the open connections unless the node is cut, in which
// case it closes c: the check and the add are one step under mu, or a
// connection dialed or accepted while setCut ran would outlive the cut
// (a leader heartbeating through it is never replaced).
func (s *faultStream) track(c net.Conn) (net.Conn, bool) {
	s.mu.Lock()
	if s.cut {
		s.mu.Unlock()
		c.Close()
		return nil, false
	}
	tc := &trackedConn{Conn: c, s: s}
	s.conns[tc] = struct{}{}
	s.mu.Unlock()
	return tc, true
}

func (s *faultStream) Accept() (net.Conn, error) {
	for {
		c, err := s.StreamLayer.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := s.track(c); ok {
			return tc, nil
		}
	}
}

func (s *faultStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	errCut := errors.New("faultStream: partitioned")
	s.mu.Lock()
	cut := s.cut
	s.mu.Unlock()
	if cut {
		return nil, errCut
	}
	c, err := s.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := s.track(c); ok {
		return tc, nil
	}
	return nil, errCut
}

func (s *faultStream) setCut(cut bool) {
	s.mu.Lock()
	s.cut = cut
	var open []*trackedConn
	if cut {
		for c := range s.conns {
			open = append(open, c)
		}
	}
	s.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

type testNode struct {
	id       string
	cfg      GroupConfig
	remoting string
	// grp is the running member (nil while stopped); senders read it while
	// the nemesis swaps it.
	grp atomic.Pointer[Group]
	// base is the member's file system: the OS's (disk clusters) or its
	// in-memory one, kept across restarts like a disk.
	base storage.FS
	// parts are an in-memory member's parts (stable store and snapshots
	// kept across restarts); unused on disk. started: they were used once.
	parts   Parts
	started bool
	// stream and fs belong to the running member; set by start before grp.
	// stream is nil in in-memory clusters.
	stream *faultStream
	fs     *killableFS
}

// g returns the running member or nil.
func (n *testNode) g() *Group { return n.grp.Load() }

type testCluster struct {
	t     testing.TB
	nodes []*testNode
	// net connects the members of an in-memory cluster (nil on disk).
	net *InmemNetwork
	// onStart, if set, sees every member started (before it is published).
	onStart func(n *testNode, g *Group)
	// firstTerm is the Raft term the first leader() saw (0: none yet),
	// for the cleanup's log of term moves.
	firstTerm atomic.Uint64
}

// clusterOpts tune the test cluster.
type clusterOpts struct {
	segmentSize int
	sync        bool
	// disk runs the members on real files and TCP (durability, restarts
	// from disk, partitions through the TCP stream layer). Otherwise they
	// run on in-memory parts (NewInmemParts): no fsync, no ports.
	disk bool
	// onStart sees every member started (tests hook observers there).
	onStart func(n *testNode, g *Group)
	// prodTimings runs Raft on production's timings instead of the test
	// clusters' longer ones (testRaftTimings): tests about failover,
	// elections, leases or transfers, and benchmarks.
	prodTimings bool
	// tune adjusts every member's config after the defaults.
	tune func(*GroupConfig)
}

// testRaftTimings gives test clusters longer Raft timeouts than
// production's LAN ones (raftlog.DefaultConfig: 300 ms, 250 ms lease).
// Under -race on a loaded 2-core machine a goroutine can stall past 250 ms;
// a leader that loses its lease that way answers "not leader" in a test
// that is not about failover. Tests whose point is a leader change take
// production's timings (prodRaftTimings, clusterOpts.prodTimings), which
// keeps their meaning and keeps them from waiting out 1 s timeouts.
func testRaftTimings(c *raftlog.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, time.Second
}

// electNow makes a random member of a freshly started group campaign at
// once, through the TimeoutNow RPC another member's transport sends it
// (the path a leadership transfer takes). With testRaftTimings the first
// election would otherwise wait a heartbeat timeout, 1-2 s, in every
// test. It does nothing once a member campaigns or knows a leader (the
// kick would depose it), nor in a group with a joining member (raftJoin:
// it holds no configuration to campaign with).
func electNow(t testing.TB, groups []*Group) {
	t.Helper()
	for _, g := range groups {
		if g == nil || g.cfg.RaftJoin || g.raft.State() != raft.Follower {
			return
		}
		if addr, _ := g.raft.LeaderWithID(); addr != "" {
			return
		}
	}
	k := rand.IntN(len(groups))
	from, to := groups[(k+1)%len(groups)], groups[k]
	addr, err := to.cfg.Raft.SelfAddr()
	if err != nil {
		t.Fatal(err)
	}
	fromID := raft.ServerID(from.cfg.Raft.DLegerSelfID)
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax,
		ID: []byte(fromID), Addr: from.trans.EncodePeer(fromID, from.trans.LocalAddr())}}
	if err := from.trans.TimeoutNow(raft.ServerID(to.cfg.Raft.DLegerSelfID), raft.ServerAddress(addr), req,
		&raft.TimeoutNowResponse{}); err != nil {
		t.Logf("electNow: %v; the heartbeat timeout will elect", err)
	}
}

// prodRaftTimings sets production's Raft timings (raftlog.DefaultConfig).
func prodRaftTimings(c *raftlog.Config) {
	d := raftlog.DefaultConfig()
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = d.HeartbeatTimeout, d.ElectionTimeout, d.LeaderLeaseTimeout
}

func newTestCluster(t testing.TB, o clusterOpts) *testCluster {
	if o.segmentSize == 0 {
		o.segmentSize = 4 << 20
	}
	base := t.TempDir()
	ids := []string{"n0", "n1", "n2"}
	c := &testCluster{t: t, onStart: o.onStart}
	// In memory the addresses are only names: nothing listens.
	raftAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", 20910+i) }
	remotingAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", 10910+i) }
	if o.disk {
		raftAddr = func(int) string { return fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)) }
		remotingAddr = raftAddr
	} else {
		c.net = NewInmemNetwork()
	}
	var peers []string
	for i, id := range ids {
		peers = append(peers, id+"-"+raftAddr(i))
	}
	for i, id := range ids {
		cfg := DefaultGroupConfig()
		cfg.Store.StorePathRootDir = filepath.Join(base, id)
		cfg.Store.MappedFileSizeCommitLog = o.segmentSize
		cfg.Store.MaxMessageSize = 128 << 10
		cfg.Store.MappedFileSizeConsumeQueue = 20_000 * store.CQUnitSize
		cfg.Store.MessageIndexEnable = false
		if !o.sync {
			cfg.Store.FlushDiskType = store.AsyncFlush
			cfg.RaftAcksBeforeFsync = true
		}
		cfg.RaftBatchMaxBytes = 256 << 10
		cfg.Raft.DLegerGroup = "broker-a"
		cfg.Raft.DLegerPeers = strings.Join(peers, ";")
		cfg.Raft.DLegerSelfID = id
		cfg.Raft.SnapshotInterval = time.Hour // snapshots only when a test asks
		cfg.Raft.SnapshotThreshold = 1 << 40
		if !o.prodTimings {
			testRaftTimings(&cfg.Raft)
		}
		remoting := remotingAddr(i)
		cfg.Store.StoreHost = netip.MustParseAddrPort(remoting)
		if o.tune != nil {
			o.tune(&cfg)
		}
		n := &testNode{id: id, cfg: cfg, remoting: remoting, base: storage.OSFS()}
		if c.net != nil {
			var err error
			if n.parts, err = NewInmemParts(cfg, c.net); err != nil {
				t.Fatal(err)
			}
			n.base = n.parts.FS
		}
		c.nodes = append(c.nodes, n)
	}
	var groups []*Group
	for i, n := range c.nodes {
		c.start(i)
		groups = append(groups, n.g())
	}
	electNow(t, groups)
	t.Cleanup(func() {
		// A moved term in a test that is not about failover is a
		// spurious election, the first thing to rule out when it fails.
		if first, end := c.firstTerm.Load(), c.term(); first != 0 && end != first {
			t.Logf("raft term moved after the first leader: %d -> %d", first, end)
		}
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

// term is the highest Raft term among the running members.
func (c *testCluster) term() uint64 {
	var gs []*Group
	for _, n := range c.nodes {
		gs = append(gs, n.g())
	}
	return maxTerm(gs)
}

// maxTerm is the highest Raft term among groups (nil entries: members
// not running).
func maxTerm(groups []*Group) uint64 {
	var t uint64
	for _, g := range groups {
		if g != nil {
			t = max(t, g.Raft().CurrentTerm())
		}
	}
	return t
}

// start starts member i on its file system.
func (c *testCluster) start(i int) { c.startOn(i, nil, nil) }

// startOn starts member i. wrap, if set, wraps the member's file system
// (disk-full tests); sd, if set, replaces the disk-full step-down timing.
func (c *testCluster) startOn(i int, wrap func(storage.FS) storage.FS, sd *diskStepDownConfig) {
	n := c.nodes[i]
	fsys := n.base
	if wrap != nil {
		fsys = wrap(fsys)
	}
	n.fs = &killableFS{FS: fsys}
	cfg := n.cfg
	var parts Parts
	if c.net == nil {
		cfg.Store.FS = n.fs
		var err error
		parts, err = openDiskParts(cfg, nil, func(s raft.StreamLayer) raft.StreamLayer {
			n.stream = &faultStream{StreamLayer: s, conns: map[*trackedConn]struct{}{}}
			return n.stream
		})
		if err != nil {
			c.t.Fatalf("start %s: %v", n.id, err)
		}
	} else {
		if n.started {
			// Close closed the previous run's transport.
			n.parts = c.net.Reopen(n.parts)
		}
		n.started = true
		parts = n.parts
		parts.FS = n.fs
	}
	g, err := newGroup(cfg, parts, n.remoting, nil, groupOptions{diskStepDown: sd})
	if err != nil {
		c.t.Fatalf("start %s: %v", n.id, err)
	}
	if c.onStart != nil {
		c.onStart(n, g)
	}
	g.startCatchup(c.catchupSource)
	g.setLearnerProbe(c.learnerCatchup) // member_promote_test.go
	n.grp.Store(g)
}

// catchupSource reads the member whose remoting address is addr directly
// (the test cluster has no remoting servers).
func (c *testCluster) catchupSource(addr string) catchupSource {
	for _, n := range c.nodes {
		if g := n.g(); g != nil && n.remoting == addr {
			return groupSource{r: g}
		}
	}
	return groupSource{r: noCatchupPeer{}}
}

// noCatchupPeer answers every read with an error (the peer is down).
type noCatchupPeer struct{}

func (noCatchupPeer) catchupLogStart() (uint64, int64, error)   { return 0, 0, errors.New("peer down") }
func (noCatchupPeer) catchupReadLog(int64, int) ([]byte, error) { return nil, errors.New("peer down") }
func (noCatchupPeer) catchupPace() int64                        { return 0 }
func (noCatchupPeer) catchupReadUnits(string, int32, int64, int) (int64, []store.CQUnit, error) {
	return 0, nil, errors.New("peer down")
}

// stop shuts member i down cleanly (checkpoints, flushes).
func (c *testCluster) stop(i int) {
	n := c.nodes[i]
	g := n.grp.Swap(nil)
	if g == nil {
		return
	}
	if err := g.Close(); err != nil {
		c.t.Errorf("close %s: %v", n.id, err)
	}
}

// setCut cuts member n off the network (true) or reconnects it.
func (c *testCluster) setCut(n *testNode, cut bool) {
	if c.net != nil {
		c.net.SetPartitioned(n.parts.Transport.LocalAddr(), cut)
		return
	}
	n.stream.setCut(cut)
}

// kill stops member i like a killed process: it drops off the network at
// once, then nothing more reaches its files durably (no msync, fsync,
// checkpoint, meta or abort-file update; bytes already in the page cache
// stay, as after SIGKILL), then its goroutines and mappings are released.
// Close's errors are expected and ignored.
func (c *testCluster) kill(i int) {
	n := c.nodes[i]
	g := n.grp.Swap(nil)
	if g == nil {
		return
	}
	c.setCut(n, true)
	n.fs.kill()
	_ = g.Close()
}

// leader waits for a node that serves writes.
func (c *testCluster) leader() *testNode {
	var l *testNode
	testutil.WaitFor(c.t, 15*time.Second, "a serving leader", func() bool {
		for _, n := range c.nodes {
			if g := n.g(); g != nil && g.IsLeader() {
				l = n
				c.firstTerm.CompareAndSwap(0, g.Raft().CurrentTerm())
				return true
			}
		}
		return false
	})
	return l
}

// currentLeader returns the serving leader or nil, without waiting.
func (c *testCluster) currentLeader() *testNode {
	n, _ := c.currentLeaderGroup()
	return n
}

// currentLeaderGroup is currentLeader with the Group it saw leading. Callers
// that send must use this Group rather than reload n.g(): a concurrent kill
// swaps the node's Group to nil between the two loads.
func (c *testCluster) currentLeaderGroup() (*testNode, *Group) {
	for _, n := range c.nodes {
		if g := n.g(); g != nil && g.IsLeader() {
			return n, g
		}
	}
	return nil, nil
}

// followerOf returns the index of the first node that is not l.
func (c *testCluster) followerOf(l *testNode) int {
	return slices.IndexFunc(c.nodes, func(n *testNode) bool { return n != l })
}

// sendSeq sends message k of a test's single idempotent producer "p"
// (queue k%2, key "k<k>") through sendRetrying and fails the test if it is
// not acknowledged within 15 s.
func (c *testCluster) sendSeq(k, bodySize int) ack {
	c.t.Helper()
	m := testMessage("T", int32(k%2), fmt.Sprintf("k%d", k), "p", int64(k), bodySize)
	res, err := c.sendRetrying(m, time.Now().Add(15*time.Second))
	if err != nil {
		c.t.Fatalf("send %d: %v", k, err)
	}
	return ack{key: m.UniqKey(), PutResult: res}
}

// createTopic creates topic on the leader, on the next one if leadership
// moved meanwhile (a leader can lose its lease on a loaded machine).
func (c *testCluster) createTopic(topic string, queues int) {
	testutil.WaitFor(c.t, 30*time.Second, "a leader that creates "+topic, func() bool {
		_, g := c.currentLeaderGroup()
		if g == nil {
			return false
		}
		err := g.UpdateTopic(context.Background(), wire.TopicConfig{TopicName: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6})
		if err != nil && !errors.Is(err, ErrNotLeader) {
			c.t.Fatal(err)
		}
		return err == nil
	})
}

// ack is an acknowledged message.
type ack struct {
	key string
	PutResult
}

func testMessage(topic string, queue int32, key, pid string, seq int64, bodySize int) *store.Message {
	body := make([]byte, bodySize)
	copy(body, key)
	return &store.Message{
		Topic: topic, QueueID: queue, Body: body, BornTimestamp: time.Now().UnixMilli(),
		BornHost:   netip.MustParseAddrPort("127.0.0.1:50000"),
		Properties: map[string]string{wire.PropertyUniqKey: key, wire.PropertyProducerID: pid, wire.PropertySequence: strconv.FormatInt(seq, 10)},
	}
}

// sendRetrying sends one message like the SDK: to the current leader,
// retrying on not-leader / closed / timeout (the idempotent producer makes
// retries safe). Any other error is returned.
func (c *testCluster) sendRetrying(m *store.Message, deadline time.Time) (PutResult, error) {
	for {
		if time.Now().After(deadline) {
			return PutResult{}, fmt.Errorf("no leader accepted %s before the deadline", m.UniqKey())
		}
		_, g := c.currentLeaderGroup()
		if g == nil {
			waitBriefly()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := g.PutMessages(ctx, []*store.Message{m})
		cancel()
		if err == nil {
			return res[0], nil
		}
		if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrGroupClosed) || errors.Is(err, ErrApplyTimeout) ||
			errors.Is(err, context.DeadlineExceeded) {
			waitBriefly()
			continue
		}
		return PutResult{}, err
	}
}

// waitBriefly backs off a retry loop (a client's retry delay, not a wait
// for a condition).
func waitBriefly() { <-time.After(10 * time.Millisecond) }

// checkAcked verifies every acknowledged message on node n: its queue
// offset's unit points at its physical offset and the message there has its
// key.
func checkAcked(t *testing.T, n *testNode, acks []ack) {
	t.Helper()
	ms := n.g().Store()
	for _, a := range acks {
		cq := ms.ConsumeQueues().Get("T", a.QueueID)
		if cq == nil {
			t.Fatalf("%s: queue %d missing", n.id, a.QueueID)
		}
		u, err := cq.Get(a.QueueOffset)
		if err != nil {
			t.Fatalf("%s: %s at queue %d offset %d: %v", n.id, a.key, a.QueueID, a.QueueOffset, err)
		}
		if u.PhyOffset != a.PhysicalOffset {
			t.Fatalf("%s: %s: unit at offset %d points at %d, acked %d", n.id, a.key, a.QueueOffset, u.PhyOffset, a.PhysicalOffset)
		}
		s, err := ms.CommitLog().ReadMessage(a.PhysicalOffset)
		if err != nil {
			t.Fatalf("%s: read %s at %d: %v", n.id, a.key, a.PhysicalOffset, err)
		}
		m, _, err := wire.DecodeMessage(s.B, false)
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		if m.UniqKey() != a.key || m.PhysicalOffset != a.PhysicalOffset || m.MsgID() != a.MsgID {
			t.Fatalf("%s: at %d found %s (phy %d, id %s), acked %s (id %s)", n.id, a.PhysicalOffset, m.UniqKey(),
				m.PhysicalOffset, m.MsgID(), a.key, a.MsgID)
		}
	}
}

// waitCaughtUp waits until every running node applied the leader's commit
// index.
func (c *testCluster) waitCaughtUp() uint64 {
	l := c.leader()
	commit := l.g().Raft().CommitIndex()
	// The leader's FSM has applied every acknowledged entry (acks follow
	// Apply); a member is caught up once its own FSM has applied as far.
	// raft's AppliedIndex alone is not enough: it moves when a batch is
	// handed to the FSM goroutine, before Apply ran.
	target := l.g().FSMAppliedIndex()
	testutil.WaitFor(c.t, 30*time.Second, "followers catch up", func() bool {
		for _, n := range c.nodes {
			if g := n.g(); g != nil && (g.Raft().AppliedIndex() < commit || g.FSMAppliedIndex() < target) {
				return false
			}
		}
		return true
	})
	return commit
}

// logDigest hashes the CommitLog bytes [from, end of entry index) of n.
func logDigest(t testing.TB, n *testNode, from int64, index uint64) ([32]byte, int64) {
	t.Helper()
	end, err := n.g().LogStore().EndOf(index)
	if err != nil {
		t.Fatalf("%s: end of %d: %v", n.id, index, err)
	}
	h := sha256.New()
	q := n.g().Store().CommitLog().Queue()
	for pos := from; pos < end; {
		mf := q.FindByOffset(pos)
		if mf == nil {
			t.Fatalf("%s: no segment at %d", n.id, pos)
		}
		segEnd := min(end, mf.FileFromOffset()+int64(mf.Size()))
		s, err := mf.Read(int(pos-mf.FileFromOffset()), int(segEnd-pos))
		if err != nil {
			// The tail of a closed segment may be a filler past the
			// written position: read what is written.
			s, err = mf.Read(int(pos-mf.FileFromOffset()), mf.WrotePosition()-int(pos-mf.FileFromOffset()))
			if err != nil {
				t.Fatalf("%s: read [%d,%d): %v", n.id, pos, segEnd, err)
			}
		}
		h.Write(s.B)
		s.Release()
		pos = segEnd
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d, end
}

// checkIdentical compares the nodes' CommitLogs from `from` up to index and
// their ConsumeQueues.
func (c *testCluster) checkIdentical(from int64, index uint64, queues int) {
	c.t.Helper()
	var ref [32]byte
	var refNode *testNode
	for _, n := range c.nodes {
		if n.g() == nil {
			continue
		}
		d, end := logDigest(c.t, n, from, index)
		if refNode == nil {
			ref, refNode = d, n
			c.t.Logf("CommitLog [%d, %d) up to index %d compared", from, end, index)
			continue
		}
		if d != ref {
			c.t.Fatalf("CommitLog of %s differs from %s in [%d, end of %d)", n.id, refNode.id, from, index)
		}
	}
	for q := int32(0); q < int32(queues); q++ {
		var want int64 = -1
		for _, n := range c.nodes {
			if n.g() == nil {
				continue
			}
			cq := n.g().Store().ConsumeQueues().Get("T", q)
			got := int64(0)
			if cq != nil {
				got = cq.MaxOffset()
			}
			if want < 0 {
				want = got
			} else if got != want {
				c.t.Fatalf("queue %d: %s has max offset %d, another node %d", q, n.id, got, want)
			}
		}
	}
}

// errKilled is what a killed node's file operations return.
var errKilled = errors.New("killableFS: process killed")

// killableFS is the real file system until kill; afterwards every operation
// that could make something durable or change the namespace fails (reads,
// Close and Munmap still work), like a process that died: what it wrote
// into page cache or mappings stays, nothing more is synced.
type killableFS struct {
	storage.FS
	dead atomic.Bool
}

func (f *killableFS) kill() { f.dead.Store(true) }

func (f *killableFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	if f.dead.Load() {
		return nil, errKilled
	}
	fl, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &killableFile{File: fl, fs: f}, nil
}

func (f *killableFS) Remove(name string) error {
	if f.dead.Load() {
		return errKilled
	}
	return f.FS.Remove(name)
}

func (f *killableFS) Rename(oldname, newname string) error {
	if f.dead.Load() {
		return errKilled
	}
	return f.FS.Rename(oldname, newname)
}

func (f *killableFS) MkdirAll(path string, perm os.FileMode) error {
	if f.dead.Load() {
		return errKilled
	}
	return f.FS.MkdirAll(path, perm)
}

func (f *killableFS) SyncDir(path string) error {
	if f.dead.Load() {
		return errKilled
	}
	return f.FS.SyncDir(path)
}

type killableFile struct {
	storage.File
	fs *killableFS
}

func (k *killableFile) WriteAt(p []byte, off int64) (int, error) {
	if k.fs.dead.Load() {
		return 0, errKilled
	}
	return k.File.WriteAt(p, off)
}

func (k *killableFile) Fallocate(size int64) error {
	if k.fs.dead.Load() {
		return errKilled
	}
	return k.File.Fallocate(size)
}

func (k *killableFile) Truncate(size int64) error {
	if k.fs.dead.Load() {
		return errKilled
	}
	return k.File.Truncate(size)
}

func (k *killableFile) Sync() error {
	if k.fs.dead.Load() {
		return errKilled
	}
	return k.File.Sync()
}

func (k *killableFile) Msync(b []byte) error {
	if k.fs.dead.Load() {
		return errKilled
	}
	return k.File.Msync(b)
}

func (k *killableFile) Mmap(size int) ([]byte, error) {
	if k.fs.dead.Load() {
		return nil, errKilled
	}
	return k.File.Mmap(size)
}
