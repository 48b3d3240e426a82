package broker

import (
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
)

// catchingUpVoter wipes voter i of c, which a leader with a trimmed log
// then sends a snapshot, and restarts it with its full-data catch-up held
// until release is called (at the latest when the test ends): it holds
// the log's tail and answers the leader, but does not stand for election.
// It returns once the leader has it caught up on the log.
func catchingUpVoter(t *testing.T, c *testCluster, i int) (n *testNode, release func()) {
	t.Helper()
	n = c.nodes[i]
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
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
		_, l := c.currentLeaderGroup()
		if l == nil {
			return false
		}
		p := l.progress.get(raft.ServerID(n.id))
		return n.g().catchupBlocksVoting() && p.match >= l.Raft().LastIndex() && !p.at.IsZero()
	})
	return n, release
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
	wiped, _ := catchingUpVoter(t, c, slices.IndexFunc(c.nodes, func(n *testNode) bool { return n.id == order[0] }))
	healthy := order[1]
	if cur := c.leader(); cur != l {
		t.Fatalf("leadership moved to %s while %s caught up", cur.id, wiped.id)
	}
	term := l.g().Raft().CurrentTerm()
	// Named, it is refused: it would not campaign.
	if err := l.g().TransferLeadership(wiped.id); !errors.Is(err, ErrTargetCatchingUp) {
		t.Fatalf("transfer to %s catching up: %v, want ErrTargetCatchingUp", wiped.id, err)
	}
	if cur := c.leader(); cur != l || l.g().Raft().CurrentTerm() != term {
		t.Fatalf("after the refused transfer %s leads in term %d; want %s in term %d", cur.id, cur.g().Raft().CurrentTerm(), l.id, term)
	}
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

// The preferred-leader check does not move leadership to a preferred
// member whose full-data catch-up is pending (it would not campaign, and
// each tick would leave the group without a leader for an election
// timeout); it does once the catch-up is done.
func TestGroupPreferredLeaderWaitsForCatchup(t *testing.T) {
	const seg = 1 << 20
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
		g.Raft.PreferredLeaderID = "n2"
		g.PreferredLeaderCheckInterval = 20 * time.Millisecond
	}})
	leads := func(id string) func() bool {
		return func() bool { n := c.currentLeader(); return n != nil && n.id == id }
	}
	testutil.WaitFor(t, 10*time.Second, "the preferred leader n2 leads", leads("n2"))
	c.createTopic("T", 2)
	fillAndTrim(t, c, 4<<20, 1024, seg, 2)
	n2, release := catchingUpVoter(t, c, 2)
	l := c.leader()
	p := l.g().preferred
	from := p.Stats()
	// Past ha.PreferredLeaderSettle every tick is a check.
	testutil.WaitFor(t, 15*time.Second, "five checks while n2 catches up", func() bool {
		return p.Stats().Checked >= from.Checked+5
	})
	if s := p.Stats(); s.Attempted != from.Attempted {
		t.Fatalf("%d transfers to the preferred member catching up in %d checks", s.Attempted-from.Attempted, s.Checked-from.Checked)
	}
	if cur := c.leader(); cur != l {
		t.Fatalf("leadership moved from %s to %s while n2 caught up", l.id, cur.id)
	}
	release()
	testutil.WaitFor(t, 60*time.Second, "n2 completes its catch-up", func() bool { return !n2.g().catchupBlocksVoting() })
	testutil.WaitFor(t, 10*time.Second, "leadership back on n2 after its catch-up", leads("n2"))
}
