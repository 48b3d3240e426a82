package ha

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestGossipStaleLeftViewIsRefutedAtOnce replays an operator's rolling
// restart. The name server restarts (a new process knows nothing of the
// brokers' earlier lives), and broker b restarts gracefully before p and q
// have joined the new name server: b's peers hold "b left" at the
// incarnation b's old process had reached, which a new process does not
// reach (memberlist starts every process at 1 and only refutations and
// meta updates raise it). b joins the new name server, which holds it
// alive. Then p's rejoin loop joins its seed, the name server, whose
// push/pull merges p's stale record: "left" at a higher incarnation beats
// b's alive, so the name server marks b left and drops it from the
// routes. memberlist never gossips to, probes or syncs with a member it
// holds left, so b learns of the claim only from its own next push/pull
// with a holder of it (PushPullInterval, 10 s by default, with a random
// partner); meanwhile a healthy broker has no route. The name server must tell b at once: b
// refutes, and the name server holds it alive again within a gossip round.
//
// b may still hear of it by luck: the name server re-sends the claim a
// few times (RetransmitMult) within a few gossip intervals, piggybacked on
// whatever it sends, and an ack to a probe from b carries it too. With
// several members b rarely probes the name server inside that window
// (the operator walk: 8 and 18 s), so the test takes luck out: probes
// and the periodic push/pull run once a minute on every node, so neither
// can be what repairs the view. p and q retry their
// seeds once a minute too, so that p joins the name server after b did:
// the test calls Join where p's rejoin round would.
//
// The bound, 2 s, is a push/pull round trip plus one gossip interval with
// room for -race on a loaded machine.
func TestGossipStaleLeftViewIsRefutedAtOnce(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Second
	// No node probes: on a loaded machine a probe timing out has b's next
	// process refute a suspicion, each time raising its incarnation towards
	// the stale record's, and the replay would not happen.
	quiet := func(c *GossipConfig) { slowSync(c); c.ProbeInterval = time.Minute; c.UpdateTimeout = 10 * time.Second }
	slowRejoin := func(c *GossipConfig) { quiet(c); c.JoinRetryInterval = time.Minute }
	nsMeta := NodeMeta{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876"}
	nsLog, _ := logDumpedOnFailure(t, "ns")
	ns := startNodeWith(t, "ns", 0, nsMeta, quiet, nsLog)
	pLog, pLogs := logDumpedOnFailure(t, "p")
	qLog, qLogs := logDumpedOnFailure(t, "q")
	p := startNodeWith(t, "p", 0, brokerMeta("bk", "n0", 10911), slowRejoin, pLog, ns)
	q := startNodeWith(t, "q", 0, brokerMeta("bk", "n1", 10921), slowRejoin, qLog, ns)
	bMeta := brokerMeta("bk", "n2", 10931)
	bLog, bLogs := logDumpedOnFailure(t, "b")
	b := startNodeWith(t, "b", 0, bMeta, slowRejoin, bLog, ns)
	waitAlive(t, []*testNode{ns, p, q, b}, "ns", "p", "q", "b")

	// Role and term changes raise b's incarnation, as on a real member.
	for term := uint64(1); term <= 3; term++ {
		bMeta.Term = term
		if err := b.g.UpdateMeta(bMeta); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "p and q see b's last meta", func() bool {
		mp, _ := p.g.Member("b")
		mq, _ := q.g.Member("b")
		return mp.Meta.Term == 3 && mq.Meta.Term == 3
	})

	// A member asks another once when it hears it left; a restarted one
	// starts once they have, as with a real restart, which takes longer
	// than that.
	asked := func(logs *observer.ObservedLogs, n *testNode) bool {
		for _, e := range logs.FilterMessage("gossip: asked a member reported left").All() {
			if e.ContextMap()["addr"] == n.addr() {
				return true
			}
		}
		return false
	}
	waitAsked := func(n *testNode) {
		t.Helper()
		testutil.WaitFor(t, 5*time.Second, "p and q asked the stopped "+n.g.Name(), func() bool {
			return asked(pLogs, n) && asked(qLogs, n)
		})
	}

	// The name server restarts: same name and port, a new process. Every
	// member must be done with the old one first, or the new process
	// hears b's earlier life (alive, then left, at the old incarnation)
	// before b's new process joins; b would refute that at once, and the
	// replay below, a view the name server has never heard, would not
	// happen. A member still holding the old one alive gossips to its
	// address; b, once it holds it left, asks that address once (askLoop),
	// and its rejoin loop joins it (every round until the seed answers
	// alive), both a push/pull of b's earlier life with whichever process
	// listens there then. So b must have asked the old one, and b retries
	// its seeds only once a minute, as p and q do.
	leave(t, ns)
	waitAsked(ns)
	testutil.WaitFor(t, 5*time.Second, "b holds the old name server left and asked it", func() bool {
		m, _ := b.g.Member("ns")
		return m.State == MemberLeft && asked(bLogs, ns)
	})
	ns = startNodeWith(t, "ns", ns.port, nsMeta, quiet, nsLog.Named("restarted"))

	// b restarts gracefully; p and q keep "b left" at its old incarnation.
	leave(t, b)
	testutil.WaitFor(t, 5*time.Second, "p and q hold b left", func() bool {
		mp, _ := p.g.Member("b")
		mq, _ := q.g.Member("b")
		return mp.State == MemberLeft && mq.State == MemberLeft
	})
	waitAsked(b)
	bMeta.Term = 0
	b = startNodeWith(t, "b", b.port, bMeta, quiet, bLog.Named("restarted"), ns)
	testutil.WaitFor(t, 5*time.Second, "the new name server holds b alive", func() bool {
		m, ok := ns.g.Member("b")
		return ok && m.State == MemberAlive
	})
	routes := &fakeRoutes{}
	defer RemoveGoneBrokers(ns.g, routes, nil)()

	// p's rejoin round: it joins the name server with its stale view of b.
	stale := time.Now()
	if _, err := p.g.Join([]string{ns.addr()}); err != nil {
		t.Fatal(err)
	}
	var left Event
	testutil.WaitFor(t, 10*time.Second, "p's stale view reaches the name server", func() bool {
		var ok bool
		left, ok = ns.firstEventAfter(stale, "b", EventLeave, EventDead)
		return ok
	})
	testutil.WaitFor(t, 10*time.Second, "the name server holds b alive again", func() bool {
		_, ok := ns.firstEventAfter(left.At, "b", EventJoin)
		return ok
	})
	back, _ := ns.firstEventAfter(left.At, "b", EventJoin)
	t.Logf("the name server held b %s for %v (routes removed: %q)", left.Kind, back.At.Sub(left.At).Round(time.Millisecond), routes.get())
	if gap := back.At.Sub(left.At); gap > bound {
		t.Errorf("b, alive and serving, was held %s by the name server for %v; want it told and refuting within %v", left.Kind, gap, bound)
	}
	testutil.WaitFor(t, bound, "b notices it was declared gone (MaybeDeclaredDead), so that a broker registers again at once", func() bool {
		select {
		case <-b.g.MaybeDeclaredDead():
			return true
		default:
			return false
		}
	})
	testutil.WaitFor(t, 5*time.Second, "p holds b alive again", func() bool {
		m, _ := p.g.Member("b")
		return m.State == MemberAlive
	})
}

// logDumpedOnFailure returns a debug logger, and its entries, which the
// test prints if it fails: the gossip of a node that took a wrong turn.
func logDumpedOnFailure(t *testing.T, node string) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, e := range logs.All() {
			t.Logf("%s %s %s: %s %v", e.Time.Format("15:04:05.000"), node, e.LoggerName, e.Message, e.ContextMap())
		}
	})
	return zap.New(core), logs
}
