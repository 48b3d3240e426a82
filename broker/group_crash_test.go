package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// crash kills in-memory member i like a power cut (or a SIGKILL of the
// crashfs build the chaos suite runs): every byte it did not sync is
// lost, torn as opts says. Its stable store and snapshots stay (they are
// durable when written).
func (c *testCluster) crash(i int, opts storage.CrashOptions) {
	c.t.Helper()
	n := c.nodes[i]
	ffs, ok := n.base.(*storage.FaultFS)
	if !ok {
		c.t.Fatalf("crash: %s does not run on a FaultFS", n.id)
	}
	ffs.Freeze()
	c.kill(i)
	n.base = ffs.Crash(opts)
}

// A leader that crashes losing its unsynced ConsumeQueue units (pages
// written back out of order: holes in some queues, later units kept in
// others), and is
// restarted as a follower of a new leader while messages keep coming,
// re-applies the log after its snapshot into the same units as the
// others: every member holds the same units and CommitLog bytes.
func TestGroupCrashedLeaderRejoinsWithSameUnits(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true})
	c.createTopic("T", 2)
	acks := c.sendConcurrently(3, 60, 512, 2, nil)
	c.waitCaughtUp()
	for _, n := range c.nodes {
		if _, err := n.g().SnapshotAndTruncate(); err != nil {
			t.Fatalf("%s: snapshot: %v", n.id, err)
		}
	}
	acks = append(acks, c.sendConcurrently(3, 60, 512, 2, nil)...)
	l := c.leader()
	li := slices.Index(c.nodes, l)
	c.crash(li, storage.CrashOptions{TearPages: true})
	acks = append(acks, c.sendConcurrently(3, 60, 512, 2, nil)...)
	c.start(li)
	acks = append(acks, c.sendConcurrently(3, 60, 512, 2, nil)...)
	commit := c.waitCaughtUp()
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
	checkSameUnits(t, c, 2)
	c.checkIdentical(0, commit, 2)
}

// Members crash (losing unsynced bytes) and restart repeatedly while
// senders keep sending and snapshots are taken often.
func TestGroupCrashLoopSameUnits(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, tune: func(cfg *GroupConfig) {
		cfg.Raft.SnapshotInterval = 300 * time.Millisecond
		cfg.Raft.SnapshotThreshold = 16
	}})
	c.createTopic("T", chaosQueues)
	stop := make(chan struct{})
	out := make(chan []ack, 4)
	errs := make(chan error, 4)
	deadline := time.Now().Add(3 * time.Minute)
	for s := 0; s < 4; s++ {
		go c.chaosSender(s, stop, deadline, out, errs)
	}
	rng := rand.New(rand.NewPCG(chaosSeed(t), 7))
	for round := 0; round < 5; round++ {
		var i int
		if rng.IntN(2) == 0 {
			i = slices.Index(c.nodes, c.leader())
		} else {
			i = c.followerOf(c.leader())
		}
		<-time.After(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		c.crash(i, storage.CrashOptions{TearPages: rng.IntN(2) == 0})
		<-time.After(time.Duration(200+rng.IntN(1500)) * time.Millisecond)
		c.start(i)
	}
	<-time.After(time.Second)
	close(stop)
	var acks []ack
	for s := 0; s < 4; s++ {
		acks = append(acks, <-out...)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	commit := c.waitCaughtUp()
	t.Logf("%d acks", len(acks))
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
	checkSameUnits(t, c, chaosQueues)
	c.checkIdentical(0, commit, chaosQueues)
}

// plainSender puts batches of three messages without producer ids (as the
// schedule service re-puts delayed messages) to whichever member leads,
// sending a batch again after any error (at least once) until stop.
func (c *testCluster) plainSender(id int, stop <-chan struct{}, done chan<- int) {
	n := 0
	defer func() { done <- n }()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		var msgs []*store.Message
		for k := range 3 {
			m := testMessage("T", int32((seq+k)%2), fmt.Sprintf("plain%d-%d-%d", id, seq, k), "", 0, 300)
			delete(m.Properties, wire.PropertyProducerID)
			delete(m.Properties, wire.PropertySequence)
			msgs = append(msgs, m)
		}
		for {
			_, g := c.currentLeaderGroup()
			if g != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := g.PutMessages(ctx, msgs)
				cancel()
				if err == nil {
					n++
					break
				}
			}
			select {
			case <-stop:
				return
			default:
			}
			waitBriefly()
		}
	}
}

// streamGates holds, per paused member's stream layer, the channel its
// Raft connections wait on (see pause).
var streamGates sync.Map // *faultStream -> chan struct{}

func (s *faultStream) waitGate() {
	if g, ok := streamGates.Load(s); ok {
		<-g.(chan struct{})
	}
}

// Read implements net.Conn: a paused member reads nothing more.
func (c *trackedConn) Read(b []byte) (int, error) {
	c.s.waitGate()
	return c.Conn.Read(b)
}

// Write implements net.Conn: a paused member sends nothing more.
func (c *trackedConn) Write(b []byte) (int, error) {
	c.s.waitGate()
	return c.Conn.Write(b)
}

// pause holds member n's Raft traffic like a SIGSTOP of its process: the
// bytes its peers send wait in the sockets and arrive, stale and all at
// once, at resume; it sends nothing meanwhile. Unlike a stopped process
// it keeps running (its leader lease runs out).
func (c *testCluster) pause(n *testNode) {
	streamGates.Store(n.stream, make(chan struct{}))
	// A test that fails while n is paused must still close it.
	c.t.Cleanup(func() { c.resume(n) })
}

func (c *testCluster) resume(n *testNode) {
	if g, ok := streamGates.LoadAndDelete(n.stream); ok {
		close(g.(chan struct{}))
	}
}

// Members whose Raft traffic is held (a paused process: stale requests
// arrive at resume) while plain and idempotent senders keep going end
// with the same units and CommitLog bytes.
func TestGroupPausedMembersSameUnits(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{prodTimings: true, disk: true, sync: true, segmentSize: 1 << 20, tune: func(cfg *GroupConfig) {
		cfg.Raft.SnapshotInterval = 300 * time.Millisecond
		cfg.Raft.SnapshotThreshold = 64
	}})
	c.createTopic("T", chaosQueues)
	stop := make(chan struct{})
	done := make(chan int, 3)
	for s := 0; s < 3; s++ {
		go c.plainSender(s, stop, done)
	}
	out := make(chan []ack, 2)
	errs := make(chan error, 2)
	for s := 0; s < 2; s++ {
		go c.chaosSender(s, stop, time.Now().Add(3*time.Minute), out, errs)
	}
	rng := rand.New(rand.NewPCG(chaosSeed(t), 13))
	for round := 0; round < 8; round++ {
		<-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		n := c.leader()
		if rng.IntN(3) == 0 {
			n = c.nodes[c.followerOf(n)]
		}
		c.pause(n)
		<-time.After(time.Duration(300+rng.IntN(2000)) * time.Millisecond)
		c.resume(n)
	}
	<-time.After(time.Second)
	close(stop)
	total := 0
	for s := 0; s < 3; s++ {
		total += <-done
	}
	var acks []ack
	for s := 0; s < 2; s++ {
		acks = append(acks, <-out...)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	commit := c.waitCaughtUp()
	t.Logf("%d plain batches, %d idempotent sends acknowledged", total, len(acks))
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
	checkSameUnits(t, c, chaosQueues)
	c.checkIdentical(0, commit, chaosQueues)
}
