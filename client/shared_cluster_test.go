package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/devcluster"
)

// Starting a real group costs a second or more of a test's time under
// -race, most of it waiting for elections and registrations. Tests that
// leave a cluster as they found it (no member killed, stopped or cut off,
// topics and groups named for the test) share one per kind: it is started
// by the first test that asks and closed after the package's last test,
// before the goroutine leak check (TestMain).
var shared = struct {
	mu       sync.Mutex
	clusters map[string]*sharedCluster
}{clusters: map[string]*sharedCluster{}}

type sharedCluster struct {
	once sync.Once
	ec   *devcluster.Cluster
	dir  string
	err  error
	// users are the tests that asked for the cluster; guarded by shared.mu.
	users map[string]bool
}

// SharedCluster returns the cluster shared under name, started with
// options(dir) by the first caller (dir outlives every test, for files
// the members read such as an ACL file). Every caller of one name must
// ask for the same options; only the first caller's are used. A test that
// asks again (go test -count) gets a new cluster, as it did the first
// time: a cluster its earlier run left topics, messages and offsets on
// is not the one it was written for. Call it from a top-level test that
// does not run in parallel, so that the earlier cluster's users have all
// ended when it is closed.
func SharedCluster(t testing.TB, name string, options func(dir string) devcluster.Options) *devcluster.Cluster {
	t.Helper()
	shared.mu.Lock()
	sc := shared.clusters[name]
	var old *sharedCluster
	if sc != nil && sc.users[t.Name()] {
		old, sc = sc, nil
	}
	if sc == nil {
		sc = &sharedCluster{users: map[string]bool{}}
		shared.clusters[name] = sc
	}
	sc.users[t.Name()] = true
	shared.mu.Unlock()
	if old != nil {
		if err := old.close(); err != nil {
			t.Fatalf("shared cluster %s: %v", name, err)
		}
	}
	sc.once.Do(func() { sc.err = sc.start(name, options) })
	if sc.err != nil {
		t.Fatalf("shared cluster %s: %v", name, sc.err)
	}
	return sc.ec
}

// SharedFailoverCluster is SharedCluster for tests that kill, stop or
// restart members: once the test and its other cleanups are over, every
// member is running again, each group has a leader the name server
// routes, and every member has applied the leader's log. A cluster that
// does not get there in time is closed and the next test starts a new one.
func SharedFailoverCluster(t testing.TB, name string, options func(dir string) devcluster.Options) *devcluster.Cluster {
	t.Helper()
	ec := SharedCluster(t, name, options)
	// Registered before the test's own cleanups, so it runs after them
	// (its clients closed).
	t.Cleanup(func() {
		if err := restore(ec, 20*time.Second); err != nil {
			t.Logf("shared cluster %s not restored, the next test starts a new one: %v", name, err)
			shared.mu.Lock()
			sc := shared.clusters[name]
			if sc != nil && sc.ec == ec {
				delete(shared.clusters, name)
			} else {
				sc = nil
			}
			shared.mu.Unlock()
			if sc != nil {
				_ = sc.close()
			}
		}
	})
	return ec
}

// restore brings every member of ec back and waits, up to timeout, until
// each group has a leader that the name server routes and that every
// member has caught up with, its FSM included.
func restore(ec *devcluster.Cluster, timeout time.Duration) error {
	for g := range ec.Groups() {
		for m, mb := range ec.Members(g) {
			if !mb.Running() {
				if err := ec.Restart(g, m); err != nil {
					return err
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for g := range ec.Groups() {
		// target is the leader's last index when it was first seen: a
		// new leader's no-op in it, nothing another leader may truncate.
		var leaderID string
		var target uint64
		settled := func() bool {
			l := ec.Leader(g)
			if l < 0 {
				return false
			}
			leader := ec.Member(g, l)
			if leader.ID() != leaderID {
				leaderID, target = leader.ID(), leader.Group.Raft().LastIndex()
			}
			for _, mb := range ec.Members(g) {
				// Raft's applied index runs ahead of a replaying FSM; a
				// member still replaying would make a leader it becomes
				// wait that out in its barrier, not serving.
				if mb.Group.Raft().AppliedIndex() < target || !mb.Group.FSMCaughtUp() {
					return false
				}
			}
			return ec.RoutedLeader(g) == leader.Addr()
		}
		if !eventually(time.Until(deadlineOf(ctx)), settled) {
			return fmt.Errorf("group %d: no routed leader every member caught up with", g)
		}
	}
	return ec.WaitReady(ctx)
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func (sc *sharedCluster) start(name string, options func(dir string) devcluster.Options) error {
	dir, err := os.MkdirTemp("", "raftmq-client-"+name+"-")
	if err != nil {
		return err
	}
	sc.dir = dir
	opts := options(dir)
	opts.Dir = dir
	ec, err := devcluster.Start(opts)
	if err != nil {
		return err
	}
	sc.ec = ec
	// As devcluster.MustStart waits.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return ec.WaitReady(ctx)
}

// closeSharedClusters closes every shared cluster and removes its files.
func closeSharedClusters() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var errs []error
	for name, sc := range shared.clusters {
		if err := sc.close(); err != nil {
			errs = append(errs, fmt.Errorf("shared cluster %s: %w", name, err))
		}
	}
	shared.clusters = map[string]*sharedCluster{}
	return errors.Join(errs...)
}

func (sc *sharedCluster) close() error {
	if sc.ec != nil {
		_ = sc.ec.Close() // as devcluster.MustStart's cleanup
	}
	if sc.dir != "" {
		return os.RemoveAll(sc.dir)
	}
	return nil
}

// runThenCloseShared runs the tests, then closes the shared clusters so
// that the leak check after it sees none of their goroutines.
type runThenCloseShared struct{ m *testing.M }

func (r runThenCloseShared) Run() int {
	code := r.m.Run()
	if err := closeSharedClusters(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the shared clusters:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
