package ha

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/internal/testutil"
)

// slowSync stretches the periodic push/pull to a minute, so that in a test
// only a join can be what tells a node about the others.
func slowSync(c *GossipConfig) { c.PushPullInterval = time.Minute }

// seedRejoinBound is how soon a node must have joined a seed that came
// back: the next round of its rejoin loop (JoinRetryInterval) and one
// push/pull, which TCPTimeout bounds.
func seedRejoinBound(c GossipConfig) time.Duration { return c.JoinRetryInterval + c.TCPTimeout }

// waitKnows waits until n holds every named member alive and returns when
// the last of them was reported joined (after t0).
func waitKnows(t *testing.T, n *testNode, t0 time.Time, names ...string) time.Time {
	t.Helper()
	var last time.Time
	testutil.WaitFor(t, 10*time.Second, n.g.Name()+" knows "+strings.Join(names, ", "), func() bool {
		last = time.Time{}
		for _, name := range names {
			ev, ok := n.firstEventAfter(t0, name, EventJoin)
			if m, _ := n.g.Member(name); !ok || m.State != MemberAlive {
				return false
			}
			if ev.At.After(last) {
				last = ev.At
			}
		}
		return true
	})
	return last
}

// TestGossipRestartedNameServerIsRejoined: the deployment shape, where the
// brokers' seeds are the name servers and a name server has none. A name
// server restarts (a new process on the same address, knowing nobody);
// brokers that still see each other must join it again, or its gossip
// never learns of them and cannot drop a dead broker from its routes. One
// broker names the seed by IP, the other by host name. The periodic
// push/pull runs once a minute here, so only the rejoin can repair it.
func TestGossipRestartedNameServerIsRejoined(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stop  func(*Gossip) error
		state MemberState
	}{
		{"left", (*Gossip).Close, MemberLeft},
		{"crashed", (*Gossip).Shutdown, MemberDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nsMeta := NodeMeta{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876"}
			ns := startNodeWith(t, "ns", 0, nsMeta, slowSync, nil)
			byName := func(c *GossipConfig) { slowSync(c); c.Seeds = "localhost:" + strconv.Itoa(ns.port) }
			b0Core, b0Logs := observer.New(zap.DebugLevel)
			b1Core, b1Logs := observer.New(zap.DebugLevel)
			b0 := startNodeWith(t, "b0", 0, brokerMeta("bk", "n0", 10911), slowSync, zap.New(b0Core), ns)
			b1 := startNodeWith(t, "b1", 0, brokerMeta("bk", "n1", 10921), byName, zap.New(b1Core))
			waitAlive(t, []*testNode{ns, b0, b1}, "ns", "b0", "b1")

			if err := tc.stop(ns.g); err != nil {
				t.Fatal(err)
			}
			// A broker whose probes of the leaving name server time out on
			// a loaded box declares it dead before the leave reaches it,
			// and memberlist ignores a leave for a member it holds dead:
			// that broker is in the crashed case.
			gone := func(m Member) bool {
				return m.State == tc.state || (tc.state == MemberLeft && m.State == MemberDead)
			}
			testutil.WaitFor(t, 10*time.Second, "the brokers hold the name server "+tc.state.String(), func() bool {
				m0, _ := b0.g.Member("ns")
				m1, _ := b1.g.Member("ns")
				return gone(m0) && gone(m1)
			})
			if tc.state == MemberLeft {
				// Each broker asks a member it newly holds left once
				// (askLoop); that must not be what reaches the new process.
				var left []*observer.ObservedLogs
				for _, b := range []struct {
					n    *testNode
					logs *observer.ObservedLogs
				}{{b0, b0Logs}, {b1, b1Logs}} {
					if m, _ := b.n.g.Member("ns"); m.State == MemberLeft {
						left = append(left, b.logs)
					} else {
						t.Logf("%s declared the leaving name server dead before its leave arrived", b.n.g.Name())
					}
				}
				testutil.WaitFor(t, 5*time.Second, "the brokers asked the stopped name server", func() bool {
					for _, logs := range left {
						if logs.FilterMessage("gossip: asked a member reported left").Len() == 0 {
							return false
						}
					}
					return true
				})
			}

			restarted := time.Now()
			ns = startNodeWith(t, "ns", ns.port, nsMeta, slowSync, nil)
			known := waitKnows(t, ns, restarted, "b0", "b1")
			bound := seedRejoinBound(ns.g.cfg)
			t.Logf("the restarted name server knew both brokers after %v", known.Sub(restarted).Round(time.Millisecond))
			if d := known.Sub(restarted); d > bound {
				t.Errorf("the restarted name server learned the brokers after %v; want within %v", d, bound)
			}

			// Its fast removal of a dead broker works again.
			routes := &fakeRoutes{}
			defer RemoveGoneBrokers(ns.g, routes, nil)()
			if err := b0.g.Shutdown(); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 10*time.Second, "the killed broker removed from the name server's routes", func() bool {
				return slices.Contains(routes.get(), "c1/127.0.0.1:10911")
			})
			if m, _ := ns.g.Member("b0"); m.State != MemberDead {
				t.Fatalf("the name server holds the killed broker %s, want dead", m.State)
			}
		})
	}
}

// seedProxy forwards each TCP connection to a target it can be switched
// to: a seed address that is not the address of the node behind it, as a
// Kubernetes Service in front of a name server pod (joins are TCP
// push/pulls, so TCP is all a seed needs to carry).
type seedProxy struct {
	ln       net.Listener
	target   atomic.Pointer[string]
	accepted atomic.Int64

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

func startSeedProxy(t *testing.T, target string) *seedProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &seedProxy{ln: ln}
	p.target.Store(&target)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *seedProxy) addr() string { return p.ln.Addr().String() }

func (p *seedProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		up, err := net.DialTimeout("tcp", *p.target.Load(), time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = c.Close(), up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies src to dst; either side finishing ends both (a push/pull
// closes only after it has read the answer).
func (p *seedProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_, _ = dst.Close(), src.Close()
}

func (p *seedProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestGossipSeedBehindAnotherAddressIsRejoined: the brokers' seed is a
// proxy in front of the name server, as a Kubernetes Service is, so no
// member ever has the seed's address. The name server is replaced (a new
// pod: another name, another address behind the same seed). The brokers
// must join the new one, and must not sync through the seed every round
// while nothing changes.
func TestGossipSeedBehindAnotherAddressIsRejoined(t *testing.T) {
	t.Parallel()
	nsMeta := NodeMeta{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876"}
	ns := startNodeWith(t, "ns-a", 0, nsMeta, slowSync, nil)
	proxy := startSeedProxy(t, ns.addr())
	// The brokers also list a seed that is down: each round of a rejoin
	// loop tries it once, which memberlist logs; the test counts rounds by
	// it.
	down := &testNode{port: testutil.FreePort(t)}
	viaProxyAndDown := func(c *GossipConfig) { slowSync(c); c.Seeds = proxy.addr() + "," + down.addr() }
	core0, logs0 := observer.New(zap.DebugLevel)
	core1, logs := observer.New(zap.DebugLevel)
	b0 := startNodeWith(t, "b0", 0, brokerMeta("bk", "n0", 10911), viaProxyAndDown, zap.New(core0))
	b1 := startNodeWith(t, "b1", 0, brokerMeta("bk", "n1", 10921), viaProxyAndDown, zap.New(core1))
	waitAlive(t, []*testNode{ns, b0, b1}, "ns-a", "b0", "b1")

	leave(t, ns)
	testutil.WaitFor(t, 10*time.Second, "the brokers hold the name server left", func() bool {
		m0, _ := b0.g.Member("ns-a")
		m1, _ := b1.g.Member("ns-a")
		return m0.State == MemberLeft && m1.State == MemberLeft
	})
	restarted := time.Now()
	ns = startNodeWith(t, "ns-b", 0, nsMeta, slowSync, nil)
	next := ns.addr()
	proxy.target.Store(&next)
	known := waitKnows(t, ns, restarted, "b0", "b1")
	bound := seedRejoinBound(ns.g.cfg)
	t.Logf("the new name server knew both brokers after %v", known.Sub(restarted).Round(time.Millisecond))
	if d := known.Sub(restarted); d > bound {
		t.Errorf("the new name server learned the brokers after %v; want within %v", d, bound)
	}

	// While no member is lost the seed is not joined again. Answers
	// within LeaveTimeout of the last loss do not settle it (they may come
	// from the member that left), so wait that out first, on each broker:
	// their rejoin loops run apart, and a round runs late on a loaded box.
	cfg := b1.g.cfg
	roundsOf := func(logs *observer.ObservedLogs) []time.Time {
		var at []time.Time
		for _, e := range logs.FilterMessageSnippet("failed to join " + down.addr()).All() {
			at = append(at, e.Time)
		}
		return at
	}
	rounds := func() int { return len(roundsOf(logs)) }
	waitRounds := func(n int) {
		t.Helper()
		from := rounds()
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d rounds of b1's rejoin loop", n), func() bool {
			return rounds() >= from+n
		})
	}
	// settledSince reports whether a broker's seed has been joined for the
	// last time for the losses it had counted by t0: a round notices a
	// loss (lossAt) once it starts after it; the round after the first
	// that starts LeaveTimeout past lossAt settles the seed; its join has
	// happened once the round after it logged. A round's line comes
	// between its start and its end, so the round after a line started
	// after it.
	settledSince := func(logs *observer.ObservedLogs, t0 time.Time) bool {
		var after []time.Time
		for _, at := range roundsOf(logs) {
			if at.After(t0) {
				after = append(after, at)
			}
		}
		if len(after) < 2 {
			return false
		}
		lossAt := after[1] // no later than this round's start
		for i, at := range after {
			if !at.Before(lossAt.Add(cfg.LeaveTimeout)) {
				return len(after) > i+2
			}
		}
		return false
	}
	// A member reported dead meanwhile (probes time out on a loaded box)
	// is a loss, after which joining the seed again is right: such a
	// window proves nothing, and the next one is watched.
	losses := func() uint64 { return b0.g.losses.Load() + b1.g.losses.Load() }
	for attempt := 1; ; attempt++ {
		t0, lost := time.Now(), losses()
		testutil.WaitFor(t, 10*time.Second, "both brokers settled the seed", func() bool {
			return settledSince(logs0, t0) && settledSince(logs, t0)
		})
		before := proxy.accepted.Load()
		waitRounds(10)
		if losses() != lost {
			if attempt == 3 {
				t.Fatal("a member was reported lost in each of 3 windows of 10 rounds; nothing to judge by")
			}
			continue
		}
		if n := proxy.accepted.Load() - before; n != 0 {
			t.Errorf("the brokers joined through the seed %d times in 10 rounds while no member was lost; want none", n)
		}
		return
	}
}

// TestGossipUnreachableSeedWarnsOnce: a seed that stays down is retried
// every round but warned about once; a seed that answers is not warned
// about at all.
func TestGossipUnreachableSeedWarnsOnce(t *testing.T) {
	t.Parallel()
	a := startNode(t, "a", 0, brokerMeta("bk", "n0", 10911))
	down := &testNode{port: testutil.FreePort(t)}
	core, logs := observer.New(zap.DebugLevel)
	b := startNodeWith(t, "b", 0, brokerMeta("bk", "n1", 10921), nil, zap.New(core), a, down)
	waitAlive(t, []*testNode{a, b}, "a", "b")
	// Retried each round: memberlist logs each failed join at debug.
	testutil.WaitFor(t, 10*time.Second, "several rounds tried the down seed", func() bool {
		return logs.FilterMessageSnippet("failed to join "+down.addr()).Len() >= 5
	})
	warned := logs.FilterMessage("gossip: seed does not answer; retrying").All()
	if len(warned) != 1 || warned[0].ContextMap()["seed"] != down.addr() {
		t.Fatalf("warnings about unreachable seeds: %v", warned)
	}

	// The seed comes up: it is joined, and a later outage warns again.
	up := startNode(t, "c", down.port, brokerMeta("bk", "n2", 10931))
	waitAlive(t, []*testNode{a, b, up}, "a", "b", "c")
	if err := up.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "b warned about the seed again", func() bool {
		return logs.FilterMessage("gossip: seed does not answer; retrying").Len() == 2
	})
}
