package broker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
)

// slowHeartbeats makes the heartbeat timeout long (2–4 s, randomized), so
// the fast election, not the timeout, is what replaces a dead leader.
//
// The stagger is longer than the default too: it must exceed the time the
// first survivor takes to reach the others with its vote request (an fsync,
// and on mutual TLS a fresh handshake, since followers hold no connections
// to each other), which under -race on a loaded 2-core box can pass the
// default 250 ms and split the votes. Still well below the heartbeat
// timeout, so the fast election is what elects.
func slowHeartbeats(g *GroupConfig) {
	g.Raft.HeartbeatTimeout = 2 * time.Second
	g.Raft.ElectionTimeout = 2 * time.Second
	g.Raft.LeaderLeaseTimeout = time.Second
	g.RaftFastElectionStagger = 800 * time.Millisecond
}

// newLeaderOtherThan returns a serving leader that is not old, or nil.
func (c *testCluster) newLeaderOtherThan(old *testNode) *testNode {
	l := c.currentLeader()
	if l == old {
		return nil
	}
	return l
}

// TestFastElectionOnProcessDeath: a leader whose process is gone (its
// connections closed and its Raft port refusing, as after SIGKILL) is
// replaced by the fast election: the first term after the dead leader's
// is a fast campaign's (its vote requests carry the transfer flag of a
// TimeoutNow campaign, which no heartbeat or election timeout sets), and
// whoever wins that term wins it by a fast campaign. A second round is
// tolerated: when the first campaign takes longer than the stagger to
// reach the next survivor (a TLS handshake and fsyncs under -race on a
// loaded 2-core box), the next survivor's turn comes too, and the two
// campaigns split the votes or the later one deposes the new leader (the
// stagger's documented limit); Raft's timeouts settle it. How fast is
// measured by `raftmq failover` (BENCHMARKS.md), not asserted here: on a
// loaded box the time says more about the box than about the election.
// On plain TCP and on mutual TLS (the campaign is a TimeoutNow the member
// sends itself through its transport).
func TestFastElectionOnProcessDeath(t *testing.T) {
	t.Run("tcp", func(t *testing.T) { testFastElection(t, slowHeartbeats) })
	t.Run("tls", func(t *testing.T) {
		ca := testutil.NewTestCA(t, "group-ca")
		testFastElection(t, func(cfg *GroupConfig) {
			slowHeartbeats(cfg)
			f := ca.Issue(cfg.Raft.DLegerSelfID)
			cfg.RaftTLS = RaftTLSConfig{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: ca.CertPath}
		})
	})
}

func testFastElection(t *testing.T, tune func(*GroupConfig)) {
	c := newTestCluster(t, clusterOpts{disk: true, tune: tune})
	c.createTopic("T", 2)
	for round := 0; round < 2; round++ {
		c.sendSeq(round, 128)
		// Both followers hold the entry: a follower without it would be
		// refused by the other, which then campaigns too (a second term,
		// as designed, but not what this test looks at).
		c.waitCaughtUp()
		old := c.leader()
		term := old.g().Term()
		i := slices.Index(c.nodes, old)
		var survivors []*Group
		for _, n := range c.nodes {
			if g := n.g(); g != nil && n != old {
				survivors = append(survivors, g)
			}
		}
		campaigns := func() (sum uint64) {
			for _, g := range survivors {
				if g.fastElect != nil {
					sum += g.fastElect.campaigns.Load()
				}
			}
			return sum
		}
		before := campaigns()
		el := watchGroupElections(survivors...)
		start := time.Now()
		c.stop(i) // closes the transport: connections end, the port refuses
		var l *testNode
		// A second round (above) costs an election timeout or more on a
		// loaded box: the bound is generous.
		testutil.WaitFor(t, 30*time.Second, "a new leader", func() bool {
			l = c.newLeaderOtherThan(old)
			return l != nil
		})
		took := time.Since(start)
		if campaigns() == before {
			t.Errorf("round %d: no survivor made a fast campaign", round)
		}
		if !el.transferVote(term+1, "") {
			t.Errorf("round %d: term %d, the first after the dead leader's, saw no fast campaign's vote request: a timeout started the election", round, term+1)
		}
		switch won, _ := el.term(term + 1); {
		case won == "":
			t.Logf("round %d: term %d split; %s won term %d", round, term+1, l.id, l.g().Term())
		case !el.transferVote(term+1, won):
			t.Errorf("round %d: %s won term %d without a fast campaign", round, won, term+1)
		case l.g().Term() != term+1:
			t.Logf("round %d: %s won term %d by a fast campaign; a later campaign moved it to %d", round, won, term+1, l.g().Term())
		}
		t.Logf("round %d: %s killed, %s leads after %v", round, old.id, l.id, took)
		c.start(i)
		testutil.WaitFor(t, 30*time.Second, "the restarted member to follow", func() bool {
			g, cur := old.g(), c.currentLeader()
			return g != nil && cur != nil && g.LeaderID() == cur.id
		})
		// Caught up, so the next round's first campaign is not refused
		// for a short log (which would cost a second term).
		c.waitCaughtUp()
	}
}

// TestNoFastElectionWhileLeaderListens: connections to the leader end but
// its Raft port still accepts (a partition that resets connections, a
// leader cut off while its process runs): no fast election; the group
// waits for the heartbeat timeout.
func TestNoFastElectionWhileLeaderListens(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{disk: true, tune: slowHeartbeats})
	old := c.leader()
	start := time.Now()
	c.setCut(old, true) // closes every connection; the listener stays
	// Split votes (two followers timing out together) can take a few
	// election timeouts on a loaded box: the bound is generous.
	testutil.WaitFor(t, 30*time.Second, "a new leader after the heartbeat timeout", func() bool {
		return c.newLeaderOtherThan(old) != nil
	})
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("new leader after %v, before the 2 s heartbeat timeout: a fast election fired while the leader listened", took)
	}
	for _, n := range c.nodes {
		if g := n.g(); g != nil && g.fastElect != nil && g.fastElect.campaigns.Load() != 0 {
			t.Errorf("%s made %d fast campaigns", n.id, g.fastElect.campaigns.Load())
		}
	}
	c.setCut(old, false)
}

// TestFastElectionFirstSurvivorHonoursGrantedVote: a survivor that granted
// a vote request against the leader moments before its connection ended
// (a damaged leader handing over, then closing its port) does not campaign
// as well, even when it is first in turn: the candidate it voted for is
// winning, and a second campaign would take a term from it. The vote is
// put in place as the member's observer records one; the next survivor,
// having seen none, campaigns in its turn and leads.
func TestFastElectionFirstSurvivorHonoursGrantedVote(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{disk: true, tune: slowHeartbeats})
	c.createTopic("T", 2)
	c.sendSeq(0, 128)
	c.waitCaughtUp()
	old := c.leader()
	first, next := c.survivorsInTurn(old)
	fe := first.g().fastElect
	before := fe.campaigns.Load()
	grantedVote(first, old, next)
	c.stop(slices.Index(c.nodes, old))
	var l *testNode
	testutil.WaitFor(t, 10*time.Second, "a new leader", func() bool {
		l = c.newLeaderOtherThan(old)
		return l != nil
	})
	if got := fe.campaigns.Load(); got != before {
		t.Errorf("%s, first in turn, campaigned %d times after granting a vote", first.id, got-before)
	}
	if l != next {
		t.Errorf("leader %s, want %s (the survivor that saw no vote)", l.id, next.id)
	}
}

// TestFastElectionCampaignsBeforeTurnForABehindCandidate: a survivor that
// saw a vote request against the leader from a candidate whose log is
// behind its own (which it refused, as would any voter as far along)
// campaigns at once, not after its turn's stagger (here a minute, past the
// heartbeat timeout). The first survivor is kept out by a granted vote,
// as in the test above.
func TestFastElectionCampaignsBeforeTurnForABehindCandidate(t *testing.T) {
	c := newTestCluster(t, clusterOpts{disk: true, tune: func(g *GroupConfig) {
		slowHeartbeats(g)
		g.RaftFastElectionStagger = time.Minute
	}})
	c.createTopic("T", 2)
	c.sendSeq(0, 128)
	c.waitCaughtUp()
	old := c.leader()
	first, next := c.survivorsInTurn(old)
	grantedVote(first, old, next)
	fe := next.g().fastElect
	before := fe.campaigns.Load()
	fe.vote.Store(&voteSeen{req: raft.RequestVoteRequest{LastLogIndex: 1, LastLogTerm: 1}, at: time.Now(), leader: raft.ServerID(old.id)})
	c.stop(slices.Index(c.nodes, old))
	testutil.WaitFor(t, 10*time.Second, "a new leader", func() bool { return c.newLeaderOtherThan(old) != nil })
	if fe.campaigns.Load() == before {
		t.Errorf("%s made no fast campaign: it waited its turn despite a behind candidate", next.id)
	}
}

// survivorsInTurn returns the two members other than old in their fast
// election turn (by id).
func (c *testCluster) survivorsInTurn(old *testNode) (first, next *testNode) {
	var surv []*testNode
	for _, n := range c.nodes {
		if n != old {
			surv = append(surv, n)
		}
	}
	slices.SortFunc(surv, func(a, b *testNode) int { return strings.Compare(a.id, b.id) })
	return surv[0], surv[1]
}

// grantedVote records on n, as its observer would, a vote request against
// leader from candidate, whose log is as far along as n's.
func grantedVote(n, leader, candidate *testNode) {
	n.g().fastElect.vote.Store(&voteSeen{
		req:    raft.RequestVoteRequest{LastLogIndex: candidate.g().Raft().LastIndex(), LastLogTerm: leader.g().Term()},
		at:     time.Now(),
		leader: raft.ServerID(leader.id),
	})
}

// TestFastElectionAfterABehindCandidateClearedTheLeader: the first
// survivor, its log behind, campaigns before the next survivor's own check
// has run; its vote request (a transfer-flagged one, through TimeoutNow)
// raises the next survivor's term, which clears the leader that member
// knew. The next survivor's check must still find the dead leader — the
// one the vote request ran against — and campaign at once, rather than
// wait out its heartbeat timeout (here 10 s). The survivors' own checks
// are held back so that the vote request surely comes first.
func TestFastElectionAfterABehindCandidateClearedTheLeader(t *testing.T) {
	c := newTestCluster(t, clusterOpts{disk: true, tune: func(g *GroupConfig) {
		g.Raft.HeartbeatTimeout = 10 * time.Second
		g.Raft.ElectionTimeout = 10 * time.Second
		g.Raft.LeaderLeaseTimeout = time.Second
		g.RaftFastElectionStagger = time.Minute
	}})
	c.createTopic("T", 2)
	c.sendSeq(0, 128)
	c.waitCaughtUp()
	old := c.leader()
	first, next := c.survivorsInTurn(old)
	noop := func() {}
	for _, n := range []*testNode{first, next} {
		n.g().trans.(*raftTransport).watch.onEnd.Store(&noop)
	}
	fe := next.g().fastElect
	before := fe.campaigns.Load()
	c.stop(slices.Index(c.nodes, old))

	// first's campaign, as next receives it: a higher term, a log behind.
	ft, nt := first.g().trans, next.g().trans
	req := &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax,
			ID: []byte(first.id), Addr: ft.EncodePeer(raft.ServerID(first.id), ft.LocalAddr())},
		Term:               next.g().Term() + 1,
		LastLogIndex:       1,
		LastLogTerm:        1,
		LeadershipTransfer: true,
	}
	var resp raft.RequestVoteResponse
	if err := ft.RequestVote(raft.ServerID(next.id), nt.LocalAddr(), req, &resp); err != nil {
		t.Fatalf("vote request: %v", err)
	}
	if resp.Granted {
		t.Fatalf("%s granted a vote to a candidate whose log is behind", next.id)
	}
	if addr, id := next.g().Raft().LeaderWithID(); addr != "" {
		t.Fatalf("%s still knows leader %s: the scenario needs it cleared", next.id, id)
	}
	fe.kick <- struct{}{} // the ended connection, noticed late
	testutil.WaitFor(t, 5*time.Second, "a fast campaign", func() bool { return fe.campaigns.Load() != before })
	testutil.WaitFor(t, 5*time.Second, "a new leader", func() bool { return c.newLeaderOtherThan(old) == next })
}
