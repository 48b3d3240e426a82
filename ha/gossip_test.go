package ha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/raftmq/raftmq/internal/testutil"
	"go.uber.org/zap"
)

// testNode is one gossip node on 127.0.0.1 with a recorder of the events
// its subscriber saw.
type testNode struct {
	g    *Gossip
	port int

	mu     sync.Mutex
	events []Event
}

func (n *testNode) seen() []Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.events)
}

// firstEvent returns the first event about member of one of the kinds.
func (n *testNode) firstEvent(member string, kinds ...EventKind) (Event, bool) {
	return n.firstEventAfter(time.Time{}, member, kinds...)
}

// firstEventAfter is firstEvent ignoring events memberlist reported before
// t0. (An event can reach the recorder a moment after the member table
// already shows the change, so a test cannot just clear the recorder.)
func (n *testNode) firstEventAfter(t0 time.Time, member string, kinds ...EventKind) (Event, bool) {
	for _, ev := range n.seen() {
		if ev.Member.Name == member && slices.Contains(kinds, ev.Kind) && !ev.At.Before(t0) {
			return ev, true
		}
	}
	return Event{}, false
}

// leave closes n gracefully. On a loaded machine memberlist may not send
// the leave broadcast as often as it wants within LeaveTimeout
// (ErrBroadcastTimeout); the node is closed all the same, and each test
// then waits for the peers to hold what it needs.
func leave(t *testing.T, n *testNode) {
	t.Helper()
	if err := n.g.Close(); err != nil && !errors.Is(err, ErrBroadcastTimeout) {
		t.Fatal(err)
	}
}

func (n *testNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

func testConfig(name string, port int, seeds ...*testNode) GossipConfig {
	c := DefaultGossipConfig()
	c.Name = name
	c.BindAddr = "127.0.0.1"
	c.BindPort = port
	c.JoinRetryInterval = 50 * time.Millisecond
	for i, s := range seeds {
		if i > 0 {
			c.Seeds += ","
		}
		c.Seeds += s.addr()
	}
	return c
}

func brokerMeta(name, raftID string, port int) NodeMeta {
	return NodeMeta{
		Kind: KindBroker, Cluster: "c1", BrokerName: name, RaftID: raftID,
		Role: RoleFollower, RemotingAddr: "127.0.0.1:" + strconv.Itoa(port), BrokerID: -1,
	}
}

// startNode starts a node on port, or on a fresh port from FreePort when
// port is 0 (retrying if someone grabbed it in between: memberlist must
// bind UDP and TCP on the same number). A node restarted on its old port
// retries for a few seconds: the port its earlier process just released
// can still be taken for a moment (CI saw EADDRINUSE right after a Close).
func startNode(t *testing.T, name string, port int, meta NodeMeta, seeds ...*testNode) *testNode {
	t.Helper()
	return startNodeWith(t, name, port, meta, nil, nil, seeds...)
}

// startNodeWith is startNode with the config adjusted by mutate first and
// a logger (nil: none).
func startNodeWith(t *testing.T, name string, port int, meta NodeMeta, mutate func(*GossipConfig), log *zap.Logger, seeds ...*testNode) *testNode {
	t.Helper()
	if log == nil {
		log = zap.NewNop()
	}
	start := func(p int) (*testNode, error) {
		cfg := testConfig(name, p, seeds...)
		if mutate != nil {
			mutate(&cfg)
		}
		g, err := NewGossip(cfg, meta, log)
		if err != nil {
			t.Fatal(err)
		}
		n := &testNode{g: g, port: p}
		g.Subscribe(func(ev Event) {
			n.mu.Lock()
			n.events = append(n.events, ev)
			n.mu.Unlock()
		})
		if err := g.Start(context.Background()); err != nil {
			_ = g.Close()
			return nil, err
		}
		t.Cleanup(func() { _ = g.Close() })
		return n, nil
	}
	var (
		n   *testNode
		err error
	)
	if port != 0 {
		var logged string
		testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("%s binds its old port %d", name, port), func() bool {
			n, err = start(port)
			if !errors.Is(err, ErrBind) {
				return true
			}
			if err.Error() != logged { // each new reason once
				logged = err.Error()
				t.Logf("start %s on %d: %v; trying again", name, port, err)
			}
			return false
		})
	} else {
		for attempt := 0; attempt < 5; attempt++ {
			if n, err = start(testutil.FreePort(t)); !errors.Is(err, ErrBind) {
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return n
}

// waitAlive waits until every node sees exactly the named members alive.
func waitAlive(t *testing.T, nodes []*testNode, names ...string) {
	t.Helper()
	want := slices.Sorted(slices.Values(names))
	testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("all nodes see %v alive", want), func() bool {
		for _, n := range nodes {
			var got []string
			for _, m := range n.g.LiveMembers() {
				got = append(got, m.Name)
			}
			if !slices.Equal(got, want) {
				return false
			}
		}
		return true
	})
}

func startCluster(t *testing.T) (a, b, c *testNode) {
	t.Helper()
	a = startNode(t, "a", 0, brokerMeta("bk", "n0", 10911))
	b = startNode(t, "b", 0, brokerMeta("bk", "n1", 10921), a)
	c = startNode(t, "c", 0, brokerMeta("bk", "n2", 10931), a, b)
	waitAlive(t, []*testNode{a, b, c}, "a", "b", "c")
	return a, b, c
}

func TestGossipJoinAndMetaUpdate(t *testing.T) {
	t.Parallel()
	a, b, c := startCluster(t)

	for _, n := range []*testNode{a, b, c} {
		for _, m := range n.g.Members() {
			want := map[string]string{"a": "n0", "b": "n1", "c": "n2"}[m.Name]
			if m.Meta.RaftID != want || m.Meta.BrokerName != "bk" || m.Meta.Kind != KindBroker {
				t.Fatalf("%s sees %s with meta %+v", n.g.Name(), m.Name, m.Meta)
			}
			if m.Local != (m.Name == n.g.Name()) {
				t.Fatalf("%s: Local wrong for %s", n.g.Name(), m.Name)
			}
		}
		// Join events for the two others, none for itself.
		testutil.WaitFor(t, 5*time.Second, n.g.Name()+" got join events for the others", func() bool {
			for _, other := range []string{"a", "b", "c"} {
				if _, ok := n.firstEvent(other, EventJoin); !ok && other != n.g.Name() {
					return false
				}
			}
			return true
		})
		if _, ok := n.firstEvent(n.g.Name(), EventJoin, EventUpdate); ok {
			t.Fatalf("%s got an event about itself", n.g.Name())
		}
	}

	// a becomes leader in term 3: the others see an update with the new meta.
	meta := brokerMeta("bk", "n0", 10911)
	meta.Role, meta.Term, meta.BrokerID = RoleLeader, 3, 0
	start := time.Now()
	if err := a.g.UpdateMeta(meta); err != nil {
		t.Fatal(err)
	}
	if a.g.Meta() != meta {
		t.Fatal("Meta does not return the published meta")
	}
	testutil.WaitFor(t, 5*time.Second, "b and c see a as leader", func() bool {
		for _, n := range []*testNode{b, c} {
			ev, ok := n.firstEvent("a", EventUpdate)
			if !ok || ev.Member.Meta != meta {
				return false
			}
			if m, _ := n.g.Member("a"); m.Meta != meta || m.State != MemberAlive {
				return false
			}
		}
		return true
	})
	t.Logf("meta update visible on both peers after %v", time.Since(start))
}

// detectCrash shuts victim down without leaving and returns how long each
// observer took to report it dead (Event.At is stamped by the memberlist
// callback, before queueing).
func detectCrash(t *testing.T, victim *testNode, observers ...*testNode) []time.Duration {
	t.Helper()
	name := victim.g.Name()
	crashed := time.Now()
	if err := victim.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, name+" reported gone by every observer", func() bool {
		for _, o := range observers {
			if _, ok := o.firstEventAfter(crashed, name, EventDead, EventLeave); !ok {
				return false
			}
		}
		return true
	})
	var out []time.Duration
	for _, o := range observers {
		ev, _ := o.firstEventAfter(crashed, name, EventDead, EventLeave)
		if ev.Kind != EventDead {
			t.Fatalf("%s: crash of %s reported as %s, want dead", o.g.Name(), name, ev.Kind)
		}
		if m, _ := o.g.Member(name); m.State != MemberDead {
			t.Fatalf("%s: member %s state %s, want dead", o.g.Name(), name, m.State)
		}
		out = append(out, ev.At.Sub(crashed))
	}
	return out
}

// TestGossipCrashDetectedAndRejoin crashes the same node repeatedly,
// measures how long the two survivors take to report it dead, and
// restarts it under the same name and port each time, which must be
// reported as a join with its new metadata.
func TestGossipCrashDetectedAndRejoin(t *testing.T) {
	t.Parallel()
	runs := 5
	if os.Getenv("RAFTMQ_LONG") == "1" {
		runs = 20
	}
	a, b, c := startCluster(t)
	var worst []time.Duration // per run: the later of the two observers
	for i := range runs {
		d := detectCrash(t, c, a, b)
		worst = append(worst, max(d[0], d[1]))
		t.Logf("run %d: dead on a after %v, on b after %v", i, d[0], d[1])

		meta := brokerMeta("bk", "n2", 10931)
		meta.Term = uint64(i + 1)
		restarted := time.Now()
		c = startNode(t, "c", c.port, meta, a, b)
		waitAlive(t, []*testNode{a, b, c}, "a", "b", "c")
		testutil.WaitFor(t, 5*time.Second, "rejoin events delivered", func() bool {
			_, okA := a.firstEventAfter(restarted, "c", EventJoin)
			_, okB := b.firstEventAfter(restarted, "c", EventJoin)
			return okA && okB
		})
		for _, o := range []*testNode{a, b} {
			ev, ok := o.firstEventAfter(restarted, "c", EventJoin)
			if !ok || ev.Member.Meta.Term != meta.Term {
				t.Fatalf("%s: rejoin of c not reported with its new meta (%+v, %v)", o.g.Name(), ev, ok)
			}
		}
	}
	slices.Sort(worst)
	median := worst[len(worst)/2]
	t.Logf("crash detection by both survivors over %d runs: median %v, min %v, max %v",
		runs, median, worst[0], worst[len(worst)-1])
	// The sub-second goal is a measurement, not a pass/fail timing on a shared
	// CI box (style: speed goals are benchmarks): only the long profile, run
	// on a quiet machine, enforces it. The default profile still fails if
	// detection is an order of magnitude off (the LAN preset takes ~6 s).
	limit := 3 * time.Second
	if os.Getenv("RAFTMQ_LONG") != "" {
		limit = time.Second
	}
	if median >= limit {
		t.Errorf("median detection %v; the tuned config should detect a crash in under %v", median, limit)
	}
}

// TestBrokerMemberByRaftID: a broker group member is found by cluster,
// group and Raft id with its failure-detector state; a crashed member is
// reported dead, not forgotten, and alive again once it rejoins under a
// new gossip name.
func TestBrokerMemberByRaftID(t *testing.T) {
	t.Parallel()
	a, b, c := startCluster(t)
	if m, ok := a.g.BrokerMember("c1", "bk", "n2"); !ok || m.Name != "c" || m.State != MemberAlive {
		t.Fatalf("n2 on a: %+v %v, want c alive", m, ok)
	}
	for _, q := range [][3]string{{"c1", "bk", "n9"}, {"c1", "other", "n2"}, {"c2", "bk", "n2"}} {
		if m, ok := a.g.BrokerMember(q[0], q[1], q[2]); ok {
			t.Errorf("BrokerMember%v found %+v", q, m)
		}
	}
	detectCrash(t, c, a, b)
	if m, ok := a.g.BrokerMember("c1", "bk", "n2"); !ok || m.State != MemberDead {
		t.Fatalf("crashed n2 on a: %+v %v, want dead", m, ok)
	}
	startNode(t, "c2", 0, brokerMeta("bk", "n2", 10931), a)
	testutil.WaitFor(t, 5*time.Second, "n2 alive again under its new name", func() bool {
		m, ok := a.g.BrokerMember("c1", "bk", "n2")
		return ok && m.Name == "c2" && m.State == MemberAlive
	})
}

func TestGossipGracefulLeaveIsNotDead(t *testing.T) {
	t.Parallel()
	a, b, c := startCluster(t)
	// Only what follows the leave counts: on a loaded machine a member
	// may have declared c dead earlier, and c refuted it.
	closed := time.Now()
	leave(t, c)
	testutil.WaitFor(t, 5*time.Second, "a and b report c gone", func() bool {
		_, okA := a.firstEventAfter(closed, "c", EventDead, EventLeave)
		_, okB := b.firstEventAfter(closed, "c", EventDead, EventLeave)
		return okA && okB
	})
	for _, o := range []*testNode{a, b} {
		if ev, _ := o.firstEventAfter(closed, "c", EventDead, EventLeave); ev.Kind != EventLeave {
			t.Fatalf("%s: graceful leave reported as %s", o.g.Name(), ev.Kind)
		}
		if m, _ := o.g.Member("c"); m.State != MemberLeft {
			t.Fatalf("%s: c state %s, want left", o.g.Name(), m.State)
		}
	}
	if err := c.g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// A node that left may come back under its name.
	c = startNode(t, "c", c.port, brokerMeta("bk", "n2", 10931), a)
	waitAlive(t, []*testNode{a, b, c}, "a", "b", "c")
}

func TestStateLayoutMatchesMemberlist(t *testing.T) {
	// leftGracefully relies on it; if memberlist changes its internals this
	// fails before the leave/dead tests do, pointing at the reason.
	if !stateLayout.ok {
		t.Fatal("memberlist's nodeMap/nodeState.State layout changed; revisit leftGracefully")
	}
}

// fakeRoutes records RemoveBrokerByAddr calls like a name server would.
type fakeRoutes struct {
	mu      sync.Mutex
	removed []string
}

func (f *fakeRoutes) RemoveBrokerByAddr(cluster, addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, cluster+"/"+addr)
	return true
}

func (f *fakeRoutes) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func TestRemoveGoneBrokers(t *testing.T) {
	t.Parallel()
	ns := startNode(t, "ns", 0, NodeMeta{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876"})
	ns2 := startNode(t, "ns2", 0, NodeMeta{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9877"}, ns)
	b0 := startNode(t, "b0", 0, brokerMeta("bk", "n0", 10911), ns)
	b1 := startNode(t, "b1", 0, brokerMeta("bk", "n1", 10921), ns)
	waitAlive(t, []*testNode{ns, ns2, b0, b1}, "ns", "ns2", "b0", "b1")
	routes := &fakeRoutes{}
	unsub := RemoveGoneBrokers(ns.g, routes, nil)
	defer unsub()

	// On a loaded machine the name server may also declare a live broker
	// dead for a moment (its probes time out; the broker refutes): that
	// removes its routes too, rightly, so the test asserts what must be
	// removed and what must not, not an exact list.
	_ = b0.g.Shutdown() // crash
	testutil.WaitFor(t, 5*time.Second, "crashed broker removed from routes", func() bool {
		return slices.Contains(routes.get(), "c1/127.0.0.1:10911")
	})
	removals := func(r string) int {
		n := 0
		for _, got := range routes.get() {
			if got == r {
				n++
			}
		}
		return n
	}
	before := removals("c1/127.0.0.1:10921")
	_ = b1.g.Close() // graceful
	_ = ns2.g.Close()
	testutil.WaitFor(t, 5*time.Second, "ns2 reported gone", func() bool {
		_, ok := ns.firstEvent("ns2", EventLeave, EventDead)
		return ok
	})
	// The graceful broker is removed too; the name server that left is not.
	testutil.WaitFor(t, 5*time.Second, "left broker removed from routes", func() bool {
		return removals("c1/127.0.0.1:10921") > before
	})
	for _, r := range routes.get() {
		if r != "c1/127.0.0.1:10911" && r != "c1/127.0.0.1:10921" {
			t.Fatalf("removed %q", routes.get())
		}
	}
}

func TestStartRetriesSeedsUntilOneAnswers(t *testing.T) {
	t.Parallel()
	port := testutil.FreePort(t)
	// b's seed is not up yet: b runs alone, then joins once a appears.
	b := startNode(t, "b", 0, brokerMeta("bk", "n1", 10921), &testNode{port: port})
	if got := len(b.g.LiveMembers()); got != 1 {
		t.Fatalf("b alone sees %d members", got)
	}
	a := startNode(t, "a", port, brokerMeta("bk", "n0", 10911))
	waitAlive(t, []*testNode{a, b}, "a", "b")
}

func TestGossipLifecycleErrors(t *testing.T) {
	cfg := testConfig("x", 0)
	if _, err := NewGossip(cfg, NodeMeta{Kind: "bogus"}, nil); !errors.Is(err, ErrInvalidMeta) {
		t.Fatalf("bad meta: %v", err)
	}
	cfg.Name = ""
	if _, err := NewGossip(cfg, NodeMeta{Kind: KindBroker}, nil); !errors.Is(err, ErrInvalidGossipConfig) {
		t.Fatalf("bad config: %v", err)
	}

	g, err := NewGossip(testConfig("x", 0), NodeMeta{Kind: KindBroker}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Join([]string{"127.0.0.1:1"}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Join before Start: %v", err)
	}
	if g.Addr() != "" {
		t.Fatal("Addr before Start")
	}
	if err := g.UpdateMeta(NodeMeta{Kind: KindBroker, BrokerName: string(make([]byte, 600))}); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("oversized meta: %v", err)
	}
	// Before Start, UpdateMeta only changes what Start will publish.
	if err := g.UpdateMeta(NodeMeta{Kind: KindBroker, Term: 9}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled context: %v", err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Start: %v", err)
	}
	if m, ok := g.Member("x"); !ok || !m.Local || m.Meta.Term != 9 {
		t.Fatalf("local member %+v %v", m, ok)
	}
	_, port, _ := net.SplitHostPort(g.Addr())
	if port == "0" || port == "" {
		t.Fatalf("Addr %q has no bound port", g.Addr())
	}
	if _, err := g.Join([]string{"127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))}); !errors.Is(err, ErrJoin) {
		t.Fatalf("Join to nobody: %v", err)
	}

	// The port is taken now: a second node on it cannot bind.
	p, _ := strconv.Atoi(port)
	g2, err := NewGossip(testConfig("y", p), NodeMeta{Kind: KindBroker}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Start(context.Background()); !errors.Is(err, ErrBind) {
		t.Fatalf("start on a taken port: %v", err)
	}
	_ = g2.Close()

	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil { // after Shutdown: no leave, no panic
		t.Fatal(err)
	}
	if err := g.UpdateMeta(NodeMeta{Kind: KindBroker}); !errors.Is(err, ErrClosed) {
		t.Fatalf("UpdateMeta after Close: %v", err)
	}
	if _, err := g.Join([]string{"127.0.0.1:1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Join after Close: %v", err)
	}
	if err := g.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

// A subscriber that blocks must not hold up failure detection: the member
// table is updated in the memberlist callback, and events queue behind the
// slow subscriber, in order.
func TestSlowSubscriberDoesNotStallGossip(t *testing.T) {
	t.Parallel()
	a, b, c := startCluster(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	unsub := a.g.Subscribe(func(ev Event) {
		<-release
		mu.Lock()
		order = append(order, ev.Kind.String()+":"+ev.Member.Name)
		mu.Unlock()
	})
	// Subscribers are called in subscription order: once this later one
	// has seen an event, the one above has too, if it still listens.
	var sentinel atomic.Bool
	defer a.g.Subscribe(func(ev Event) {
		if ev.Kind == EventLeave && ev.Member.Name == "b" {
			sentinel.Store(true)
		}
	})()
	_ = b.g.UpdateMeta(brokerMeta("bk", "n1-renamed", 10921))
	_ = c.g.Shutdown()
	testutil.WaitFor(t, 5*time.Second, "a's table shows c dead while its subscriber is blocked", func() bool {
		m, _ := a.g.Member("c")
		return m.State == MemberDead
	})
	close(release)
	// On a starved machine gossip may add events of its own (a suspected
	// and refuted member, a retransmitted update), so check that both
	// queued events arrive, in order, rather than an exact list.
	testutil.WaitFor(t, 10*time.Second, "queued events delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(order, "update:b") && slices.Contains(order, "dead:c")
	})
	mu.Lock()
	got := slices.Clone(order)
	mu.Unlock()
	if slices.Index(got, "update:b") > slices.Index(got, "dead:c") {
		t.Fatalf("delivered out of order: %q", got)
	}

	// After unsubscribing, later events no longer reach it.
	unsub()
	_ = b.g.Close()
	testutil.WaitFor(t, 5*time.Second, "b's leave seen by a later subscriber", sentinel.Load)
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(order, "leave:b") {
		t.Fatalf("unsubscribed func still called: %q", order)
	}
}

// The deployment shape: every node lists all nodes, itself included, as
// seeds, and they start one after another.
func TestSameSeedListOnEveryNode(t *testing.T) {
	t.Parallel()
	ports := []int{testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)}
	all := []*testNode{{port: ports[0]}, {port: ports[1]}, {port: ports[2]}}
	var nodes []*testNode
	for i, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, startNode(t, name, ports[i], brokerMeta("bk", "n"+strconv.Itoa(i), 10911+10*i), all...))
	}
	// a found nobody at Start (its own address is not a peer) and was
	// joined by b; all three converge.
	waitAlive(t, nodes, "a", "b", "c")
}

// A member whose metadata does not decode (another version, another
// program on the port) is still tracked, with an empty NodeMeta.
func TestUndecodableMetaIsTrackedWithoutMeta(t *testing.T) {
	t.Parallel()
	a := startNode(t, "a", 0, brokerMeta("bk", "n0", 10911))
	mlc := testConfig("alien", 0).memberlistConfig()
	mlc.BindPort, mlc.AdvertisePort = 0, 0
	mlc.Delegate = rawMeta{0x00, 0xff}
	mlc.Logger = newMemberlistLogger(zap.NewNop())
	alien, err := memberlist.Create(mlc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = alien.Shutdown() }()
	if _, err := alien.Join([]string{a.addr()}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "a reports the alien's join", func() bool {
		_, ok := a.firstEvent("alien", EventJoin)
		return ok
	})
	ev, _ := a.firstEvent("alien", EventJoin)
	if ev.Member.Meta != (NodeMeta{}) || ev.Member.State != MemberAlive {
		t.Fatalf("alien member %+v", ev.Member)
	}
	// Leave waits until its broadcast has been sent RetransmitMult times;
	// with one peer that is one gossip round each, which a loaded machine
	// can stretch past the timeout. That wait is not what the test is
	// about: a still gossips the leave on, and the event is awaited below.
	_ = alien.Leave(time.Second)
	testutil.WaitFor(t, 5*time.Second, "a reports the alien's leave", func() bool {
		_, ok := a.firstEvent("alien", EventLeave)
		return ok
	})
}

// rawMeta is a memberlist.Delegate publishing fixed metadata bytes.
type rawMeta []byte

func (r rawMeta) NodeMeta(int) []byte           { return r }
func (rawMeta) NotifyMsg([]byte)                {}
func (rawMeta) GetBroadcasts(int, int) [][]byte { return nil }
func (rawMeta) LocalState(bool) []byte          { return nil }
func (rawMeta) MergeRemoteState([]byte, bool)   {}
