package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/storage"
)

// catchupBytes is how much retained data TestGroupCatchupAfterWipe puts
// in the group: RAFTMQ_CATCHUP_BYTES (2 GiB for the long profile), else a
// few MiB.
func catchupBytes(t *testing.T) int64 {
	if v := os.Getenv("RAFTMQ_CATCHUP_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("RAFTMQ_CATCHUP_BYTES=%q: %v", v, err)
		}
		return n
	}
	return 6 << 20
}

// TestGroupCatchupAfterWipe replaces a member: a follower's data is wiped
// while the leader has snapshotted and removed its oldest segments, so the
// follower comes back through InstallSnapshot with nothing before the
// snapshot. While producers keep sending, it fetches the retained CommitLog
// and the queue units before the snapshot from the leader, and does not
// stand for election until it holds them. Afterwards all three members hold
// the same bytes and the same queue units over the whole retained range,
// every acknowledged retained message is readable at its offsets on each,
// and the rebuilt member, made leader, serves the oldest offsets.
func TestGroupCatchupAfterWipe(t *testing.T) {
	total := catchupBytes(t)
	const body = 1024
	seg := 1 << 20
	if total >= 256<<20 {
		seg = 64 << 20
	}
	rate := int64(4 << 20) // slow enough that producers overlap the catch-up
	if v := os.Getenv("RAFTMQ_CATCHUP_RATE"); v != "" {
		rate, _ = strconv.ParseInt(v, 10, 64)
	}
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) {
		g.CatchupBytesPerSecond = rate
		g.SnapshotBytes = 0
		if total >= 256<<20 {
			// The large profile shares the disk with whatever else runs:
			// the store's disk guard must not delete the retained data
			// the test is about.
			g.Store.CleanResourceInterval = time.Hour
		}
	}})
	c.createTopic("T", 4)
	l := c.leader()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	msgs := int(total / (body + 200))
	var old []ack
	for sent := 0; sent < msgs; sent += 20_000 { // sendConcurrently gives each call 2 minutes
		old = append(old, c.sendConcurrently(8, min(20_000, msgs-sent), body, 4, nil)...)
	}
	c.waitCaughtUp()

	// The follower's disk dies; meanwhile the group moves on, snapshots and
	// drops its oldest segments (not all: the rest is retained and unread).
	c.stop(fi)
	if err := os.RemoveAll(f.cfg.Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	old = append(old, c.sendConcurrently(8, 200, body, 4, nil)...)
	// Both survivors snapshot and drop their oldest segments, so whichever
	// leads when the wiped member returns sends it a snapshot.
	for _, n := range c.nodes {
		if n == f {
			continue
		}
		if err := n.g().Raft().Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		cut := n.g().LogStore().MinPosition() + 2*int64(seg)
		idx, err := n.g().LogStore().FirstIndexFrom(cut)
		if err != nil || idx == 0 {
			t.Fatalf("%s: first index from %d: %d, %v", n.id, cut, idx, err)
		}
		if _, err := n.g().LogStore().DeleteSegmentsBefore(idx); err != nil {
			t.Fatal(err)
		}
	}
	leaderMin := l.g().LogStore().MinPosition()
	leaderFirst, _ := l.g().LogStore().FirstIndex()
	retained := l.g().LogStore().NextPosition() - leaderMin
	t.Logf("leader retains %d bytes from position %d (first index %d)", retained, leaderMin, leaderFirst)

	// Baseline producer latency, then the replacement under the same load.
	base := sendFor(t, c, 4, body, 2*time.Second)
	start := time.Now()
	c.start(fi)
	var during []time.Duration
	var duringMu sync.Mutex
	stop := make(chan struct{})
	var prodDone sync.WaitGroup
	prodDone.Add(1)
	var late []ack
	go func() {
		defer prodDone.Done()
		lat, acks := sendUntil(c, 4, body, stop)
		duringMu.Lock()
		during, late = lat, acks
		duringMu.Unlock()
	}()
	// It must not lead while it lacks the retained data.
	sawPending := false
	testutil.WaitFor(t, 10*time.Minute, "the rebuilt member completes its catch-up", func() bool {
		g := f.g()
		if g.catchupBlocksVoting() {
			sawPending = true
			if g.IsLeader() {
				t.Fatal("a member catching up became leader")
			}
		}
		return g.catchup.completed.Load() > 0 && !g.catchupBlocksVoting()
	})
	redundant := time.Since(start)
	close(stop)
	prodDone.Wait()
	if !sawPending {
		t.Fatal("the rebuilt member never reported a pending catch-up: it did not install a snapshot")
	}
	cs := f.g().CatchupStatus()
	t.Logf("full redundancy %v after the restart: %d log bytes, %d queue units, catch-up %d ms at a %d B/s pace",
		redundant.Round(time.Millisecond), cs.BytesDone, cs.Units, cs.TookMillis, rate)
	t.Logf("producer p50/p99 before %v / %v, during the catch-up %v / %v (%d sends)",
		pct(base, 50), pct(base, 99), pct(during, 50), pct(during, 99), len(during))
	if cs.BytesDone == 0 || cs.Units == 0 {
		t.Fatalf("nothing was fetched: %+v", cs)
	}

	commit := c.waitCaughtUp()
	// Each member's own retention (the disk guard on a shared, busy disk)
	// may have removed more since: compare what all of them still hold.
	from := leaderMin
	for _, n := range c.nodes {
		if n != f {
			from = max(from, n.g().LogStore().MinPosition())
		}
	}
	if rb := f.g().LogStore().MinPosition(); rb > from {
		t.Fatalf("the rebuilt member's log starts at %d, its peers hold data from %d", rb, from)
	}
	c.checkIdentical(from, commit, 4)
	checkRetainedUnits(t, c, f, from, 4)
	var keep []ack
	for _, a := range append(old, late...) {
		if a.PhysicalOffset >= from {
			keep = append(keep, a)
		}
	}
	for _, n := range c.nodes {
		checkAcked(t, n, keep)
	}

	// The rebuilt member leads and serves the oldest retained offsets.
	// (Leadership may have moved under load since: ask whoever leads.)
	testutil.WaitFor(t, 30*time.Second, "the rebuilt member leads", func() bool {
		if f.g().IsLeader() {
			return true
		}
		if cur := c.leader(); cur != f {
			if err := cur.g().TransferLeadership(f.id); err != nil {
				t.Logf("transfer to %s: %v (retrying)", f.id, err)
			}
		}
		return f.g().IsLeader()
	})
	for q := int32(0); q < 4; q++ {
		cq := f.g().Store().ConsumeQueues().Get("T", q)
		r, err := f.g().Store().GetMessage("g", "T", q, cq.MinOffset(), 32, nil)
		if err != nil || len(r.Messages) == 0 {
			t.Fatalf("queue %d: read from the oldest offset %d on the rebuilt leader: %d messages, %v (%+v)", q, cq.MinOffset(), len(r.Messages), err, r.Status)
		}
	}
}

// checkRetainedUnits compares every queue's units on the running members
// over their common range, and checks that the rebuilt member's queues
// start no later than the first unit whose message the leader retains
// (from minPos on).
func checkRetainedUnits(t *testing.T, c *testCluster, rebuilt *testNode, minPos int64, queues int32) {
	t.Helper()
	for q := int32(0); q < queues; q++ {
		type view struct {
			min   int64
			units []store.CQUnit
		}
		views := map[string]view{}
		firstRetained := int64(-1)
		for _, n := range c.nodes {
			cq := n.g().Store().ConsumeQueues().Get("T", q)
			v := view{min: cq.MinOffset()}
			for o := cq.MinOffset(); o < cq.MaxOffset(); o++ {
				u, err := cq.Get(o)
				if err != nil {
					t.Fatalf("%s queue %d offset %d: %v", n.id, q, o, err)
				}
				if n != rebuilt && firstRetained < 0 && u.PhyOffset >= minPos {
					firstRetained = o
				}
				v.units = append(v.units, u)
			}
			views[n.id] = v
		}
		rb := views[rebuilt.id]
		if firstRetained >= 0 && rb.min > firstRetained {
			t.Fatalf("queue %d: the rebuilt member starts at offset %d, the first retained message is at %d", q, rb.min, firstRetained)
		}
		for id, v := range views {
			lo := max(rb.min, v.min)
			a, b := rb.units[lo-rb.min:], v.units[lo-v.min:]
			if !slices.Equal(a, b) {
				t.Fatalf("queue %d: %s and %s hold different units from offset %d (%d vs %d units)", q, rebuilt.id, id, lo, len(a), len(b))
			}
		}
		t.Logf("queue %d: rebuilt member holds offsets [%d, %d), identical to its peers", q, rb.min, rb.min+int64(len(rb.units)))
	}
}

var latencyRound atomic.Int64

// sendFor sends from senders goroutines for d and returns the latencies.
func sendFor(t *testing.T, c *testCluster, senders, body int, d time.Duration) []time.Duration {
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	lat, _ := sendUntil(c, senders, body, stop)
	return lat
}

// sendUntil sends idempotent messages to queues 0..3 until stop closes and
// returns each send's latency and the acks.
func sendUntil(c *testCluster, senders, body int, stop <-chan struct{}) ([]time.Duration, []ack) {
	lat, _, acks := sendUntilAt(c, senders, body, stop)
	return lat, acks
}

// sendUntilAt is sendUntil that also returns when each send began.
func sendUntilAt(c *testCluster, senders, body int, stop <-chan struct{}) ([]time.Duration, []time.Time, []ack) {
	round := latencyRound.Add(1)
	var mu sync.Mutex
	var lat []time.Duration
	var at []time.Time
	var acks []ack
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pid := fmt.Sprintf("lat%dp%d", round, s)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("lat%d-%d-%d", round, s, i)
				m := testMessage("T", int32(i%4), key, pid, int64(i), body)
				t0 := time.Now()
				res, err := c.sendRetrying(m, time.Now().Add(30*time.Second))
				if err != nil {
					continue
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				at = append(at, t0)
				acks = append(acks, ack{key: key, PutResult: res})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, at, acks
}

// pct returns the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// TestGroupBitFlipMidLog: a follower is killed, one bit of an acknowledged
// frame in the middle of its unanchored log is flipped, and it restarts.
// It refuses to start, naming the segment file and the offset, instead of
// cutting the acknowledged frames after it; the group keeps serving on the
// two others without losing an acknowledged message. Wiped, the member
// comes back and holds every acknowledged message again.
func TestGroupBitFlipMidLog(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: 1 << 20, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
	}})
	c.createTopic("T", 2)
	l := c.leader()
	acks := c.sendConcurrently(4, 3000, 512, 2, nil)
	commit := c.waitCaughtUp()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	c.kill(fi)

	// A frame a few hundred entries before the end: many acknowledged
	// batches follow it.
	bad := commit - 200
	pos, _, err := l.g().LogStore().Locate(bad)
	if err != nil {
		t.Fatal(err)
	}
	seg := int64(1 << 20)
	path := filepath.Join(f.cfg.Store.StorePathRootDir, "commitlog", storage.FileName(pos/seg*seg))
	off := pos%seg + 60 // inside the frame's data
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := file.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := file.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	file.Close()

	err = c.tryStart(fi)
	var ce *raftlog.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("restart after a mid-log bit flip: %v, want a raftlog.CorruptionError", err)
	}
	if ce.Path != path || ce.FileOffset != pos%seg || ce.Index != bad {
		t.Fatalf("damage reported at %s offset %d index %d, flipped %s offset %d (frame of index %d)", ce.Path, ce.FileOffset, ce.Index, path, off, bad)
	}
	t.Logf("the damaged member refuses to start: %v", err)

	// The group serves on; nothing acknowledged is lost on the others.
	more := c.sendConcurrently(4, 300, 512, 2, nil)
	acks = append(acks, more...)
	c.waitCaughtUp()
	for _, n := range c.nodes {
		if n.g() != nil {
			checkAcked(t, n, acks)
		}
	}

	// Repair: wipe the member and restart it empty.
	if err := os.RemoveAll(f.cfg.Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	c.start(fi)
	// With the leader's whole log retained it replicates from the log;
	// after retention it would install the snapshot and catch up.
	c.waitCaughtUp()
	testutil.WaitFor(t, 60*time.Second, "the repaired member holds everything", func() bool {
		return !f.g().catchupBlocksVoting()
	})
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
}

// tryStart is start returning the error instead of failing the test.
func (c *testCluster) tryStart(i int) error {
	n := c.nodes[i]
	n.fs = &killableFS{FS: n.base}
	cfg := n.cfg
	cfg.Store.FS = n.fs
	parts, err := openDiskParts(cfg, nil, func(s raft.StreamLayer) raft.StreamLayer {
		n.stream = &faultStream{StreamLayer: s, conns: map[*trackedConn]struct{}{}}
		return n.stream
	})
	if err != nil {
		return err
	}
	g, err := newGroup(cfg, parts, n.remoting, nil, groupOptions{})
	if err != nil {
		return err
	}
	g.startCatchup(c.catchupSource)
	n.grp.Store(g)
	return nil
}
