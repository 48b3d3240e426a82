package client

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/wire"
)

// routeModelSeeds are always run; one more seed from the clock widens the
// search, and every failure names its seed so it can be added here.
var routeModelSeeds = []uint64{1, 2, 3, 4, 5, 1 << 40}

const routeModelSteps = 3000

var routeModelAddrs = []string{"a", "b", "c"}

// routeModel drives one routeManager through random events on one broker
// group of three members and keeps a reference copy of what route.go's
// comments promise: members from the latest route, the learned leader and
// the master it refuted, down marks and hint distrust with their ends,
// and the count of master changes a route must reach to lift a mark.
type routeModel struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	now  time.Time
	r    *routeManager
	step int
	hist []string

	known      bool // the group exists in r.brokers
	members    map[int64]string
	leader     string
	stale      string
	down       map[string]time.Time
	distrust   map[string]time.Time
	need       map[string]uint64 // liftAt
	changes    uint64            // masters
	lastMaster string
	lastMark   string               // address of the latest markDown, to repeat it
	markedAt   map[string]time.Time // when each address was last marked down
	// master changes counted when each address was last marked down, and
	// how many more a route naming it must follow (2 if it failed as
	// master or learned leader)
	markedChanges map[string]uint64
	markedNeeds   map[string]uint64
	// contradicted holds the route masters a hint named another leader
	// for and no hint has named leader since: the only addresses that may
	// stand refuted. Kept from the events alone, not from route.go's rules.
	contradicted map[string]bool

	addrHooks, memberHooks, leaderHooks int
}

func newRouteModel(t *testing.T, seed uint64) *routeModel {
	m := &routeModel{
		t:        t,
		seed:     seed,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		now:      time.Unix(1_000_000, 0),
		down:     map[string]time.Time{},
		distrust: map[string]time.Time{},
		need:     map[string]uint64{},
		markedAt: map[string]time.Time{},

		markedChanges: map[string]uint64{},
		markedNeeds:   map[string]uint64{},
		contradicted:  map[string]bool{},
	}
	m.r = newRouteManager(nil, zap.NewNop(), []string{"ns:1"}, time.Second, func() time.Time { return m.now })
	// The hooks must run outside mu: the consumer's calls brokerAddr.
	outsideMu := func(hook string) {
		if !m.r.mu.TryLock() {
			m.failf("%s hook called with mu held", hook)
			return
		}
		m.r.mu.Unlock()
	}
	m.r.onAddrChange = func(name string) {
		outsideMu("onAddrChange")
		if name != "g" {
			m.failf("onAddrChange for %q", name)
		}
		m.r.brokerAddr(name)
		m.addrHooks++
	}
	m.r.onMembersChange = func(name string) {
		outsideMu("onMembersChange")
		if name != "g" {
			m.failf("onMembersChange for %q", name)
		}
		m.memberHooks++
	}
	m.r.onLeaderChange = func(name string) {
		outsideMu("onLeaderChange")
		if name != "g" {
			m.failf("onLeaderChange for %q", name)
		}
		m.leaderHooks++
	}
	return m
}

func (m *routeModel) failf(format string, args ...any) {
	m.t.Helper()
	from := max(0, len(m.hist)-40)
	m.t.Fatalf("seed %d, step %d: %s\nlast %d events:\n  %s",
		m.seed, m.step, fmt.Sprintf(format, args...), len(m.hist)-from, strings.Join(m.hist[from:], "\n  "))
}

func (m *routeModel) logf(format string, args ...any) {
	m.hist = append(m.hist, fmt.Sprintf(format, args...))
}

func (m *routeModel) active(until map[string]time.Time, addr string) bool {
	u, ok := until[addr]
	return ok && m.now.Before(u)
}

func (m *routeModel) clear(addr string) {
	delete(m.down, addr)
	delete(m.distrust, addr)
	delete(m.need, addr)
}

func (m *routeModel) group() *brokerGroup {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	return m.r.brokers["g"]
}

// codeDown reports whether route.go holds addr marked down now.
func (m *routeModel) codeDown(g *brokerGroup, addr string) bool {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	u, ok := g.down[addr]
	return ok && m.now.Before(u)
}

func (m *routeModel) randAddr() string { return routeModelAddrs[m.rng.IntN(len(routeModelAddrs))] }

// target is the member a call would go to: mostly the one brokerAddr
// picks, sometimes another (a first answer, a pull in flight elsewhere).
func (m *routeModel) target() string {
	if a := m.r.brokerAddr("g"); a != "" && m.rng.IntN(10) < 7 {
		return a
	}
	return m.randAddr()
}

func (m *routeModel) randRoute() map[int64]string {
	if m.members != nil && m.rng.IntN(10) < 3 {
		return maps.Clone(m.members) // the name server has no news
	}
	addrs := map[int64]string{}
	var in []string
	for _, a := range routeModelAddrs {
		if m.rng.IntN(100) < 85 {
			in = append(in, a)
		}
	}
	m.rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	for i, a := range in {
		if i == 0 && m.rng.IntN(100) < 85 {
			addrs[wire.MasterID] = a
			continue
		}
		addrs[int64(slices.Index(routeModelAddrs, a)+1)] = a
	}
	return addrs
}

func (m *routeModel) store(addrs map[int64]string) {
	m.logf("route %v", addrs)
	rd := &wire.TopicRouteData{
		QueueDatas:  []wire.QueueData{{BrokerName: "g", Perm: 6, ReadQueueNums: 1, WriteQueueNums: 1}},
		BrokerDatas: []wire.BrokerData{{BrokerName: "g", BrokerAddrs: maps.Clone(addrs)}},
	}
	leaderBefore, staleBefore := m.leader, m.stale
	wasMarked := false
	if g := m.group(); g != nil {
		m.r.mu.Lock()
		_, wasMarked = g.liftAt[addrs[wire.MasterID]]
		m.r.mu.Unlock()
	}

	// Reference: route.go's store, as its comments describe it.
	differ := !maps.Equal(m.members, addrs)
	oldMaster, master := m.members[wire.MasterID], addrs[wire.MasterID]
	wantLeaderHook := master != "" && oldMaster != "" && master != oldMaster
	m.members, m.known = maps.Clone(addrs), true
	if master != "" && master != m.lastMaster {
		m.changes++
		m.lastMaster = master
	}
	if n, ok := m.need[master]; master != "" && ok && m.changes >= n {
		m.clear(master)
	}
	leaderCleared := m.leader != "" && master != "" && master != m.stale && !m.active(m.down, master)
	if leaderCleared {
		m.leader, m.stale = "", ""
	}
	// With no leader standing, a route naming another master ends the
	// refutation too: the refuted address may lead again later.
	staleCleared := m.leader == "" && m.stale != "" && master != "" && master != m.stale && !m.active(m.down, master)
	if staleCleared {
		m.stale = ""
	}

	m.r.storeFresh("T", rd)

	if got, want := m.memberHooks, b2i(differ); got != want {
		m.failf("onMembersChange fired %d times, want %d (members differ: %v)", got, want, differ)
	}
	if got, want := m.leaderHooks, b2i(wantLeaderHook); got != want {
		m.failf("onLeaderChange fired %d times, want %d (master %q → %q)", got, want, oldMaster, master)
	}
	if got, want := m.addrHooks, b2i(differ || leaderCleared); got != want {
		m.failf("onAddrChange fired %d times, want %d (members differ %v, leader cleared %v)", got, want, differ, leaderCleared)
	}
	g := m.group()
	m.r.mu.Lock()
	_, stillMarked := g.liftAt[master]
	m.r.mu.Unlock()
	// A route naming a failed member master lifts its mark only once the
	// master changed since the failure (twice if it failed as the master
	// or the learned leader: the route may predate its death).
	if wasMarked && !stillMarked && m.changes < m.markedChanges[master]+m.markedNeeds[master] {
		m.failf("route lifted the mark of %s after %d master changes since it failed, want %d",
			master, m.changes-m.markedChanges[master], m.markedNeeds[master])
	}
	// The learned leader is cleared by a route only when it names a
	// master other than the refuted one that has not just failed us.
	if leaderBefore != "" && g.leader == "" && (master == "" || master == staleBefore || m.codeDown(g, master)) {
		m.failf("route with master %q (refuted %q) cleared learned leader %q", master, staleBefore, leaderBefore)
	}
	m.checkConvergence(master)
}

// checkConvergence: once no mark holds, a route's master that is not the
// refuted one is where the group is reached, unless a leader is learned.
func (m *routeModel) checkConvergence(master string) {
	if master == "" || slices.ContainsFunc(routeModelAddrs, func(a string) bool { return m.active(m.down, a) }) {
		return
	}
	got := m.r.brokerAddr("g")
	g := m.group()
	if g.leader != "" {
		return
	}
	if master != g.stale && got != master {
		m.failf("nothing marked down, no learned leader, route names master %q: brokerAddr %q", master, got)
	}
}

func (m *routeModel) markDown(addr string, d time.Duration) {
	m.logf("markDown %s %v", addr, d)
	m.lastMark = addr
	m.markedAt[addr] = m.now
	var liftBefore uint64
	var hadLift bool
	if m.known {
		g := m.group()
		m.r.mu.Lock()
		liftBefore, hadLift = g.liftAt[addr]
		m.r.mu.Unlock()
		k := uint64(1)
		if addr == m.leader || addr == m.members[wire.MasterID] {
			k = 2
		}
		m.markedChanges[addr], m.markedNeeds[addr] = m.changes, k
		m.down[addr] = m.now.Add(d)
		m.distrust[addr] = m.now.Add(min(d, staleHintWindow))
		m.need[addr] = max(m.need[addr], m.changes+k)
		if m.leader == addr {
			m.leader = ""
		}
	}
	m.r.markDown("g", addr, d)
	if m.memberHooks != 0 || m.leaderHooks != 0 {
		m.failf("markDown fired onMembersChange %d, onLeaderChange %d times", m.memberHooks, m.leaderHooks)
	}
	if got, want := m.addrHooks, b2i(m.known); got != want {
		m.failf("markDown fired onAddrChange %d times, want %d", got, want)
	}
	if hadLift {
		g := m.group()
		m.r.mu.Lock()
		after := g.liftAt[addr]
		m.r.mu.Unlock()
		if after < liftBefore {
			m.failf("second failure of %s lowered its lift point %d → %d", addr, liftBefore, after)
		}
	}
}

func (m *routeModel) learnLeader(addr, leader string) {
	m.logf("learnLeader %q says %q leads", addr, leader)
	if !m.known {
		m.known, m.members = true, map[int64]string{}
	}
	if m.members[wire.MasterID] == addr || m.stale == "" {
		m.stale = m.members[wire.MasterID]
	}
	if m.stale == leader { // a hint naming the route's master refutes nothing
		m.stale = ""
	}
	if master := m.members[wire.MasterID]; master != "" && master != leader {
		m.contradicted[master] = true
	}
	delete(m.contradicted, leader)
	m.leader = leader
	m.clear(leader)
	m.r.learnLeader("g", addr, leader)
	if m.memberHooks != 0 || m.leaderHooks != 0 {
		m.failf("learnLeader fired onMembersChange %d, onLeaderChange %d times", m.memberHooks, m.leaderHooks)
	}
	if m.addrHooks != 1 {
		m.failf("learnLeader fired onAddrChange %d times, want 1", m.addrHooks)
	}
}

func (m *routeModel) markUp(addr string) {
	m.logf("markUp %s", addr)
	if m.known {
		m.clear(addr)
	}
	m.r.markUp("g", addr)
	if m.addrHooks+m.memberHooks+m.leaderHooks != 0 {
		m.failf("markUp fired hooks")
	}
}

// event applies one random event. The hint and notice events follow the
// callers in producer_send.go and consumer_core.go: a hint naming the
// member it came from or a distrusted one is not followed.
func (m *routeModel) event() {
	before := m.r.brokerAddr("g")
	var leaderBefore string
	if g := m.group(); g != nil {
		m.r.mu.Lock()
		leaderBefore = g.leader
		m.r.mu.Unlock()
	}
	histBefore := len(m.hist)
	m.addrHooks, m.memberHooks, m.leaderHooks = 0, 0, 0
	// Neither the clock nor a success (markUp) tells onAddrChange.
	quiet := false
	switch n := m.rng.IntN(100); {
	case n < 22:
		m.store(m.randRoute())
	case n < 42:
		addr := m.target()
		if m.lastMark != "" && m.rng.IntN(4) == 0 {
			addr = m.lastMark // another call in flight fails too
		}
		d := []time.Duration{m.r.downFor, noLeaderBackoff, time.Second}[m.rng.IntN(3)]
		m.markDown(addr, d)
	case n < 58:
		from, leader := m.target(), m.randAddr()
		switch {
		case leader == from:
			m.logf("hint from %s names itself: ignored", from)
		case m.r.distrusted("g", leader):
			m.logf("hint from %s names distrusted %s", from, leader)
			m.markDown(from, noLeaderBackoff)
		default:
			m.learnLeader(from, leader)
		}
	case n < 66:
		addr := m.randAddr()
		if m.r.brokerAddr("g") == addr {
			m.logf("notice from %s: already followed", addr)
			break
		}
		m.learnLeader("", addr)
	case n < 76:
		m.markUp(m.target())
		quiet = true
	default:
		var d time.Duration
		switch k := m.rng.IntN(10); {
		case k < 6:
			d = time.Duration(m.rng.IntN(500)) * time.Millisecond
		case k < 8:
			d = time.Second + time.Duration(m.rng.IntN(500))*time.Millisecond
		default:
			d = m.r.downFor + time.Duration(m.rng.IntN(1000))*time.Millisecond
		}
		m.now = m.now.Add(d)
		quiet = true
		m.logf("advance %v", d)
	}
	if after := m.r.brokerAddr("g"); !quiet && after != before && m.addrHooks == 0 {
		m.failf("brokerAddr moved %q → %q without onAddrChange", before, after)
	}
	// A learned leader is forgotten only when it fails us or a route
	// names another master (checked in store).
	if g := m.group(); leaderBefore != "" && g != nil {
		m.r.mu.Lock()
		leaderAfter := g.leader
		m.r.mu.Unlock()
		ev := strings.Join(m.hist[histBefore:], "; ")
		if leaderAfter == "" && !strings.HasPrefix(ev, "route ") && !strings.Contains(ev, "markDown "+leaderBefore+" ") {
			m.failf("learned leader %q forgotten by %s", leaderBefore, ev)
		}
	}
	m.check()
}

// check asserts the invariants of brokerAddr and distrusted, then
// compares route.go's state with the reference (invariants first, so a
// broken one is reported as itself rather than as a state difference).
func (m *routeModel) check() {
	got := m.r.brokerAddr("g")
	g := m.group()
	if g == nil {
		if m.known {
			m.failf("group missing")
		}
		if got != "" {
			m.failf("unknown group has address %q", got)
		}
		return
	}
	m.r.mu.Lock()
	members, leader, stale := maps.Clone(g.members), g.leader, g.stale
	_, leaderMarked := g.down[leader]
	_, leaderDistrusted := g.distrust[leader]
	_, leaderLift := g.liftAt[leader]
	lift := maps.Clone(g.liftAt)
	ends := maps.Clone(g.down)
	m.r.mu.Unlock()
	usable := func(a string) bool { return !m.active(ends, a) }

	// brokerAddr names a member or the learned leader, and is empty only
	// for a group that has neither.
	inGroup := slices.Contains(slices.Collect(maps.Values(members)), got) || got != "" && got == leader
	if (len(members) > 0 || leader != "") && !inGroup {
		m.failf("brokerAddr %q is neither a member of %v nor the learned leader %q", got, members, leader)
	}
	if len(members) == 0 && leader == "" && got != "" {
		m.failf("brokerAddr %q for a group without members", got)
	}
	// Only a master some hint contradicted, and no hint named leader
	// since, stands refuted.
	if stale != "" && !m.contradicted[stale] {
		m.failf("%q stands refuted, but no hint contradicted it since one named it leader", stale)
	}
	// A learned leader is never marked down (learning it lifts its mark,
	// marking it down forgets it) and is where the group is reached.
	if leader != "" {
		if leaderMarked || leaderDistrusted || leaderLift {
			m.failf("learned leader %q still carries a down mark", leader)
		}
		if got != leader {
			m.failf("brokerAddr %q, want the learned leader %q", got, leader)
		}
	}
	// A member marked down is picked only when every member is, and then
	// the one whose mark ends first.
	if got != "" && !usable(got) {
		for _, a := range members {
			if usable(a) {
				m.failf("brokerAddr %q is marked down while %q is not (members %v)", got, a, members)
			}
			if ends[a].Before(ends[got]) {
				m.failf("all down: brokerAddr %q ends %v, %q ends earlier %v", got, ends[got], a, ends[a])
			}
		}
	}
	// Without a learned leader the route's master is preferred unless
	// refuted or marked down, and the refuted master is avoided while
	// another member is usable.
	if leader == "" {
		if master := members[wire.MasterID]; master != "" && master != stale && usable(master) && got != master {
			m.failf("brokerAddr %q, want the route's master %q (refuted %q)", got, master, stale)
		}
		for _, a := range members {
			if a != stale && usable(a) && got == stale {
				m.failf("brokerAddr is the refuted master %q while member %q is usable", got, a)
			}
		}
	}
	for _, a := range routeModelAddrs {
		dt := m.r.distrusted("g", a)
		// Distrust never outlives the down mark it came with, nor
		// staleHintWindow.
		if dt && !m.active(ends, a) {
			m.failf("hints naming %s distrusted but it is not marked down", a)
		}
		if dt && m.now.Sub(m.markedAt[a]) >= staleHintWindow {
			m.failf("hints naming %s distrusted %v after it was marked down", a, m.now.Sub(m.markedAt[a]))
		}
		if want := m.active(m.distrust, a); dt != want {
			m.failf("hints naming %s distrusted %v, want %v", a, dt, want)
		}
		if d, want := m.active(ends, a), m.active(m.down, a); d != want {
			m.failf("%s marked down %v, want %v (ends %v)", a, d, want, ends)
		}
	}
	if !maps.Equal(members, m.members) {
		m.failf("members %v, want %v", members, m.members)
	}
	if leader != m.leader || stale != m.stale {
		m.failf("leader %q refuted %q, want %q refuted %q", leader, stale, m.leader, m.stale)
	}
	if !maps.Equal(lift, m.need) {
		m.failf("lift points %v, want %v", lift, m.need)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRouteModel drives the route state machine of one three-member group
// through random routes, send failures, leader hints, leader notices and
// time, checking route.go against a reference model and the invariants its
// callers rely on after every event.
func TestRouteModel(t *testing.T) {
	seeds := slices.Clone(routeModelSeeds)
	clockSeed := uint64(time.Now().UnixNano())
	t.Logf("clock seed %d (add it to routeModelSeeds to reproduce a failure)", clockSeed)
	seeds = append(seeds, clockSeed)
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newRouteModel(t, seed)
			for m.step = 0; m.step < routeModelSteps; m.step++ {
				m.event()
			}
		})
	}
}
