package broker

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
)

// catchingUpVoter wipes voter i of c, which a leader with a trimmed log
// then sends a snapshot, and restarts it with its full-data catch-up held
// until the test ends: it holds the log's tail and answers the leader, but
// does not stand for election. It returns once the leader l has it
// caught up on the log.
func catchingUpVoter(t *testing.T, c *testCluster, l *testNode, i int) *testNode {
	t.Helper()
	n := c.nodes[i]
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	c.onStart = func(s *testNode, g *Group) {
		if s == n {
			g.startCatchup(func(addr string) catchupSource { return heldSource{catchupSource: c.catchupSource(addr), gate: gate} })
		}
	}
	c.stop(i)
	if err := os.RemoveAll(n.cfg.Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	c.start(i)
	testutil.WaitFor(t, 30*time.Second, n.id+" installs the snapshot and its Raft log catches up", func() bool {
		p := l.g().progress.get(raft.ServerID(n.id))
		return n.g().catchupBlocksVoting() && p.match >= l.g().Raft().LastIndex() && !p.at.IsZero()
	})
	return n
}

// A leadership transfer without a target passes over a voter whose
// catch-up is pending, although Raft, which knows only log positions,
// would pick it (it is first in the configuration and as caught up as the
// other follower): the healthy follower takes over in the next term, with
// no election-timeout gap.
func TestGroupTransferWithoutTargetSkipsCatchingUpVoter(t *testing.T) {
	const seg = 1 << 20
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) { g.SnapshotBytes = 0 }})
	c.createTopic("T", 2)
	fillAndTrim(t, c, 4<<20, 1024, seg, 2)
	l := c.leader()
	// Raft picks the first of the equally caught-up followers in
	// configuration order: make that one the member catching up.
	f := l.g().Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range f.Configuration().Servers {
		if string(s.ID) != l.id {
			order = append(order, string(s.ID))
		}
	}
	wiped := catchingUpVoter(t, c, l, slices.IndexFunc(c.nodes, func(n *testNode) bool { return n.id == order[0] }))
	healthy := order[1]
	if cur := c.leader(); cur != l {
		t.Fatalf("leadership moved to %s while %s caught up", cur.id, wiped.id)
	}
	term := l.g().Raft().CurrentTerm()
	if err := l.g().TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	var now *testNode
	testutil.WaitFor(t, 15*time.Second, "another member leads", func() bool {
		now = c.currentLeader()
		return now != nil && now != l
	})
	if got := now.g().Raft().CurrentTerm(); now.id != healthy || got != term+1 {
		t.Fatalf("after the transfer %s leads in term %d; want %s in term %d (the transfer's)", now.id, got, healthy, term+1)
	}
	if !wiped.g().catchupBlocksVoting() {
		t.Fatal("the wiped member finished its catch-up during the test")
	}

	// With the old leader stopped, the other voter left is catching up:
	// there is nobody to hand over to, and the transfer says so.
	c.stop(slices.Index(c.nodes, l))
	testutil.WaitFor(t, 15*time.Second, "the leader notices "+l.id+" stopped answering", func() bool {
		return now.g().peerAnswering(l.id, max(3*now.cfg.Raft.HeartbeatTimeout, time.Second)) != nil
	})
	if err := now.g().TransferLeadership(""); !errors.Is(err, ErrNoTransferTarget) {
		t.Fatalf("transfer with only a catching-up voter left: %v, want ErrNoTransferTarget", err)
	}
}
