package broker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/storage"
)

// gateFS holds every msync of the Raft log's segments while its gate is
// closed: a leader whose own disk is slow.
type gateFS struct {
	storage.FS
	mu     sync.Mutex
	open   chan struct{} // closed while the gate is open
	closed bool
	held   atomic.Int32 // msyncs waiting at the gate or running after it
	failed atomic.Bool  // msyncs fail with EIO
}

func newGateFS(fsys storage.FS) *gateFS {
	g := &gateFS{FS: fsys, open: make(chan struct{})}
	close(g.open)
	return g
}

// shut closes the gate; release opens it.
func (g *gateFS) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.open, g.closed = make(chan struct{}), true
	}
}

func (g *gateFS) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		close(g.open)
		g.closed = false
	}
}

func (g *gateFS) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

// OpenFile implements storage.FS.
func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, "commitlog") {
		return f, err
	}
	return &gateFile{File: f, gate: g}, nil
}

type gateFile struct {
	storage.File
	gate *gateFS
}

// Msync implements storage.File.
func (f *gateFile) Msync(b []byte) error {
	f.gate.held.Add(1)
	defer f.gate.held.Add(-1)
	f.gate.wait()
	if f.gate.failed.Load() {
		return &os.PathError{Op: "msync", Path: f.Name(), Err: unix.EIO}
	}
	return f.File.Msync(b)
}

// gatedCluster is a SYNC_FLUSH test cluster whose members run on gateFS.
func gatedCluster(t *testing.T) (*testCluster, []*gateFS) {
	c := newTestCluster(t, clusterOpts{sync: true})
	gates := make([]*gateFS, len(c.nodes))
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.startOn(i, func(fsys storage.FS) storage.FS { gates[i] = newGateFS(fsys); return gates[i] }, nil)
	}
	return c, gates
}

// The leader writes its copy of an entry while Raft replicates it, and
// counts itself toward the commit quorum only once its own sync returned
// (raft.ParallelLogStore). So a leader whose disk stalls still commits
// what both followers made durable, and with one follower down it commits
// nothing until its own sync returns: an acknowledgement always stands on
// two durable copies.
func TestLeaderSyncRunsBesideReplication(t *testing.T) {
	t.Parallel()
	c, gates := gatedCluster(t)
	t.Cleanup(func() { // before the cluster's cleanup closes the members
		for _, g := range gates {
			g.release()
		}
	})
	c.createTopic("T", 2)
	c.sendSeq(0, 64)
	l := c.leader()
	lg, gate := l.g(), gates[indexOf(c, l)]
	put := func(k int) <-chan error {
		done := make(chan error, 1)
		go func() {
			m := testMessage("T", int32(k%2), fmt.Sprintf("k%d", k), "p", int64(k), 64)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := lg.PutMessages(ctx, []*store.Message{m})
			done <- err
		}()
		return done
	}

	gate.shut()
	if err := <-put(1); err != nil {
		t.Fatalf("put while the leader's own sync is held: %v, want it committed by the two followers", err)
	}
	gate.release()
	testutil.WaitFor(t, 10*time.Second, "the leader's held sync to finish", func() bool { return gate.held.Load() == 0 })

	// One follower down: the quorum needs the leader's own sync now.
	c.stop(c.followerOf(l))
	gate.shut()
	done := put(2)
	testutil.WaitFor(t, 10*time.Second, "the leader's sync of the new entry to be held", func() bool { return gate.held.Load() > 0 })
	select {
	case err := <-done:
		t.Fatalf("put answered (%v) while only one of the two live members had made it durable", err)
	case <-time.After(500 * time.Millisecond):
	}
	gate.release()
	if err := <-done; err != nil {
		t.Fatalf("put after the leader's sync returned: %v", err)
	}
	if !lg.IsLeader() {
		t.Fatalf("%s lost leadership during the test", l.id)
	}
}

// A leader whose own sync fails steps down at once (it cannot count toward
// any quorum), and nothing the followers committed is lost: its log keeps
// serving the entries it wrote until its restart (a member whose log
// stopped needs one), so replication never falls back to an older
// snapshot, and after the restart every member holds every acknowledged
// message. (The gate fails the msync after the bytes reached the disk, so
// the restart's cut of the failed batch is raftlog's to test:
// TestFailedSyncLogsNotServedAfterProcessRestart.)
func TestLeaderSyncFailureStepsDown(t *testing.T) {
	t.Parallel()
	c, gates := gatedCluster(t)
	c.createTopic("T", 2)
	var acks []ack
	for k := range 20 {
		acks = append(acks, c.sendSeq(k, 256))
	}
	l := c.leader()
	li := indexOf(c, l)
	if err := l.g().Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	for k := 20; k < 40; k++ {
		acks = append(acks, c.sendSeq(k, 256))
	}
	gates[li].failed.Store(true)
	// One send, then nothing: the step-down must not wait for a next write.
	acks = append(acks, c.sendSeq(40, 256))
	testutil.WaitFor(t, 15*time.Second, "the leader whose sync failed to step down", func() bool { return !l.g().IsLeader() })
	for k := 41; k < 60; k++ {
		acks = append(acks, c.sendSeq(k, 256))
	}
	if l.g().LogStopped() == nil {
		t.Fatalf("%s: the Raft log is not stopped after a failed sync", l.id)
	}
	c.kill(li)
	gates[li].failed.Store(false)
	c.startOn(li, func(fsys storage.FS) storage.FS { gates[li] = newGateFS(fsys); return gates[li] }, nil)
	for k := 60; k < 70; k++ {
		acks = append(acks, c.sendSeq(k, 256))
	}
	c.waitCaughtUp()
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
}
