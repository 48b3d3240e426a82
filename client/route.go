package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// routeManager fetches routes from the name servers and caches them per
// topic, together with a table of broker groups (brokerName → members)
// that also remembers what requests taught us about leaders: a broker that
// said "not leader, ask X", a follower's pull answer or a new leader's
// notice naming the leader, or a member whose connection failed. It has
// no goroutine of its own; its client's refresh loop drives it.
type routeManager struct {
	rc          *remoting.Client
	log         *zap.Logger
	nameServers []string
	timeout     time.Duration // per name-server call
	now         func() time.Time
	downFor     time.Duration // how long a member whose connection failed is avoided
	// onLeaderChange is told when a route shows a new master address for a
	// broker group, so fault isolation of the old process can be lifted.
	onLeaderChange func(brokerName string)
	// onAddrChange is told, outside mu, whenever what brokerAddr returns
	// for a broker group may have changed: a route with other members, a
	// learned leader, a member marked down. The consumer uses it to move
	// long polls parked at a deposed or stalled leader.
	onAddrChange func(brokerName string)
	// onMembersChange is told, outside mu, when a route shows a broker
	// group with other members than the cached one (not when a member is
	// marked down or a leader learned): producers and consumers heartbeat
	// them.
	onMembersChange func(brokerName string)

	mu      sync.Mutex
	nsIndex int                     // guarded by mu; name server tried first
	topics  map[string]*topicRoute  // guarded by mu
	brokers map[string]*brokerGroup // guarded by mu
	// unnamed: the broker groups no cached route named at the last
	// forgetOffline, which forgets them if the next one finds the same.
	unnamed  map[string]bool       // guarded by mu
	inflight map[string]*routeCall // guarded by mu; coalesces fetches per topic
	// fetches numbers the name servers' answers in the order they
	// arrive (and storeGroups' merges): a route, or a group's members, is
	// replaced only by what a later answer brought, as if each answer
	// were stored on arrival (RocketMQ stores under the lock it fetches
	// under, lockNamesrv). Each caller stores a shared fetch's answer
	// when it gets to it, after which a later answer may have stored
	// already. Numbered when they begin instead, a fetch that waited out
	// a failing name server before the next one answered would count as
	// older than those begun meanwhile.
	fetches uint64 // guarded by mu
}

// topicRoute is the cached state of one topic.
type topicRoute struct {
	data      *wire.TopicRouteData
	publish   *TopicPublishInfo
	subscribe []MessageQueue
	fetchedAt time.Time
	seq       uint64 // the answer it came from (routeManager.fetches)
}

// brokerGroup is one broker group as the client knows it.
type brokerGroup struct {
	members map[int64]string     // brokerId → address, from the latest route
	leader  string               // learned from a hint (see learnLeader); "" if none
	stale   string               // the route's master that hint refuted
	down    map[string]time.Time // address → avoid until
	// distrust: address → until when a leader hint naming it is ignored
	// (see distrusted); set with down marks, at most staleHintWindow.
	distrust map[string]time.Time
	// masters counts the routes' changes of master address (to another
	// address: a route without a master does not count), lastMaster is the
	// latest one; liftAt holds, per address marked down, the count at which
	// a route naming it master lifts the mark (see store and markDown).
	masters    uint64
	lastMaster string
	liftAt     map[string]uint64
	// seq is the answer whose route set members (routeManager.fetches).
	seq uint64
}

// routeCall is one in-flight fetch that concurrent callers wait on.
type routeCall struct {
	done chan struct{}
	seq  uint64 // the answer's number (routeManager.fetches)
	rd   *wire.TopicRouteData
	err  error
}

func newRouteManager(rc *remoting.Client, log *zap.Logger, nameServers []string, timeout time.Duration, now func() time.Time) *routeManager {
	return &routeManager{
		rc:          rc,
		log:         log,
		nameServers: slices.Clone(nameServers),
		timeout:     timeout,
		now:         now,
		downFor:     3 * time.Second,
		topics:      map[string]*topicRoute{},
		brokers:     map[string]*brokerGroup{},
		inflight:    map[string]*routeCall{},
	}
}

// fetchRoute asks the name servers for topic's route, starting with the
// one that answered last and moving on when one cannot be reached
// (RocketMQ's client rotates its name-server channel the same way). A
// TOPIC_NOT_EXIST answer is final: another name server would say the same.
// Concurrent fetches of one topic share one request. seq numbers the
// answer, a route's or TOPIC_NOT_EXIST (routeManager.fetches), for store.
func (r *routeManager) fetchRoute(ctx context.Context, topic string) (rd *wire.TopicRouteData, seq uint64, err error) {
	r.mu.Lock()
	for r.inflight[topic] != nil {
		c := r.inflight[topic]
		r.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
		if c.err == nil || ctx.Err() != nil || !(errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)) {
			return c.rd, c.seq, c.err
		}
		// The fetch ended with its caller's context, not ours: fetch again.
		r.mu.Lock()
	}
	c := &routeCall{done: make(chan struct{})}
	r.inflight[topic] = c
	start := r.nsIndex
	r.mu.Unlock()

	c.rd, c.seq, c.err = r.fetchFrom(ctx, topic, start)
	r.mu.Lock()
	delete(r.inflight, topic)
	r.mu.Unlock()
	close(c.done)
	return c.rd, c.seq, c.err
}

func (r *routeManager) fetchFrom(ctx context.Context, topic string, start int) (*wire.TopicRouteData, uint64, error) {
	var errs []error
	for i := range r.nameServers {
		idx := (start + i) % len(r.nameServers)
		addr := r.nameServers[idx]
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		req := remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, &wire.GetRouteInfoRequestHeader{Topic: topic}, nil)
		resp, err := r.rc.InvokeSync(cctx, addr, req)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			r.log.Warn("name server unreachable, trying the next", zap.String("nameServer", addr), zap.String("topic", topic), zap.Error(err))
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.nsIndex = idx
		r.fetches++
		seq := r.fetches
		r.mu.Unlock()
		switch resp.Code {
		case remoting.ResponseSuccess:
			rd, err := wire.DecodeTopicRouteData(resp.Body)
			if err != nil {
				return nil, 0, fmt.Errorf("client: route of %q from %s: %w", topic, addr, err)
			}
			return rd, seq, nil
		case remoting.ResponseTopicNotExist:
			return nil, seq, fmt.Errorf("%w: %q (name server %s: %s)", ErrNoRoute, topic, addr, resp.Remark)
		default:
			errs = append(errs, remoting.ResponseError(addr, resp))
		}
	}
	return nil, 0, fmt.Errorf("%w for topic %q (tried %v): %w", ErrNoNameServer, topic, r.nameServers, errors.Join(errs...))
}

// store caches rd, from answer seq, as topic's route and merges its broker
// groups, unless a later answer stored topic's route already; it
// returns the publish info cached then.
func (r *routeManager) store(topic string, rd *wire.TopicRouteData, publish *TopicPublishInfo, seq uint64) *TopicPublishInfo {
	r.mu.Lock()
	if tr := r.topics[topic]; tr != nil && tr.seq > seq {
		r.mu.Unlock()
		return tr.publish
	}
	r.topics[topic] = &topicRoute{data: rd, publish: publish, subscribe: subscribeQueues(topic, rd), fetchedAt: r.now(), seq: seq}
	r.mergeGroupsAndUnlock(rd.BrokerDatas, seq)
	return publish
}

// storeGroups merges broker groups learned elsewhere than from a topic's
// route (the admin client's cluster table) into the group table, as news
// newer than any route fetched so far.
func (r *routeManager) storeGroups(bds []wire.BrokerData) {
	r.mu.Lock()
	r.fetches++
	r.mergeGroupsAndUnlock(bds, r.fetches)
}

// mergeGroupsAndUnlock merges bds, from answer seq, into the group table,
// releases mu (held on entry) and then tells the hooks what changed. A
// group whose members came from a later answer keeps them: the
// older answer may name a master deposed since, and would lift the down
// mark of a member that failed us.
func (r *routeManager) mergeGroupsAndUnlock(bds []wire.BrokerData, seq uint64) {
	var changed, moved, members []string
	for _, bd := range bds {
		g := r.brokers[bd.BrokerName]
		if g == nil {
			g = &brokerGroup{down: map[string]time.Time{}}
			r.brokers[bd.BrokerName] = g
		}
		if g.seq > seq {
			continue
		}
		g.seq = seq
		oldMaster := g.members[wire.MasterID]
		sameMembers := maps.Equal(g.members, bd.BrokerAddrs)
		if !sameMembers {
			members = append(members, bd.BrokerName)
		}
		g.members = maps.Clone(bd.BrokerAddrs)
		master := g.members[wire.MasterID]
		if master != "" && master != oldMaster && oldMaster != "" {
			changed = append(changed, bd.BrokerName)
		}
		if master != "" && master != g.lastMaster {
			g.masters++
			g.lastMaster = master
		}
		// A member that failed us (killed) and is now named master again
		// restarted and won an election: neither its down mark nor
		// distrust of hints naming it may keep the group's new leader
		// avoided.
		if at, marked := g.liftAt[master]; master != "" && marked && g.masters >= at {
			g.clearMark(master)
		}
		until, masterDown := g.down[master]
		masterDown = masterDown && r.now().Before(until)
		// A learned leader stands until the name server has heard of a
		// leader change too, i.e. shows a master other than the refuted
		// one that has not just failed us.
		if g.leader != "" && master != "" && master != g.stale && !masterDown {
			g.leader, g.stale = "", ""
			sameMembers = false
		}
		// With no learned leader standing (it failed), a route naming
		// another master that has not just failed us is the name server's
		// news of a leader change all the same: the refuted address may
		// lead again later. (brokerAddr picks that usable master either
		// way, so no address changes here.)
		if g.leader == "" && g.stale != "" && master != "" && master != g.stale && !masterDown {
			g.stale = ""
		}
		if !sameMembers {
			moved = append(moved, bd.BrokerName)
		}
	}
	r.mu.Unlock()
	for _, name := range changed {
		if r.onLeaderChange != nil {
			r.onLeaderChange(name)
		}
	}
	for _, name := range members {
		if r.onMembersChange != nil {
			r.onMembersChange(name)
		}
	}
	r.addrChanged(moved...)
}

// addrChanged tells onAddrChange about brokerNames; never under mu (the
// hook calls brokerAddr).
func (r *routeManager) addrChanged(brokerNames ...string) {
	if r.onAddrChange == nil {
		return
	}
	for _, name := range brokerNames {
		r.onAddrChange(name)
	}
}

// publishInfo returns topic's cached publish info, fetching the route on
// first use. With autoCreate, a topic the name servers do not know is
// given TBW102's brokers with min(defaultQueueNums, writeQueueNums) queues
// each, so that the first send makes the broker create it
// (updateTopicRouteInfoFromNameServer with isDefault).
func (r *routeManager) publishInfo(ctx context.Context, topic string, autoCreate bool, defaultQueueNums int) (*TopicPublishInfo, error) {
	if info := r.cachedPublishInfo(topic); info != nil {
		return info, nil
	}
	return r.refresh(ctx, topic, autoCreate, defaultQueueNums)
}

// cachedPublishInfo is topic's cached publish info when it has queues,
// else nil (publishInfo would fetch).
func (r *routeManager) cachedPublishInfo(topic string) *TopicPublishInfo {
	r.mu.Lock()
	tr := r.topics[topic]
	r.mu.Unlock()
	if tr != nil && tr.publish.ok() {
		return tr.publish
	}
	return nil
}

// refresh fetches topic's route now and caches it. A failed fetch keeps
// the cached route (a name server hiccup must not stop sends).
func (r *routeManager) refresh(ctx context.Context, topic string, autoCreate bool, defaultQueueNums int) (*TopicPublishInfo, error) {
	rd, seq, err := r.fetchRoute(ctx, topic)
	if err == nil {
		return r.store(topic, rd, newPublishInfo(topic, rd), seq), nil
	}
	if errors.Is(err, ErrNoRoute) && autoCreate {
		// Stored as topic's TOPIC_NOT_EXIST answer: a later answer
		// for topic may have found the topic created meanwhile.
		def, _, derr := r.fetchRoute(ctx, wire.TopicAutoCreate)
		if derr != nil {
			return nil, fmt.Errorf("%w; and the auto-create route %s: %v", err, wire.TopicAutoCreate, derr)
		}
		def = cloneRoute(def)
		for i := range def.QueueDatas {
			n := min(defaultQueueNums, def.QueueDatas[i].WriteQueueNums)
			def.QueueDatas[i].ReadQueueNums, def.QueueDatas[i].WriteQueueNums = n, n
		}
		info := newPublishInfo(topic, def)
		info.fromDefault = true
		return r.store(topic, def, info, seq), nil
	}
	r.mu.Lock()
	tr := r.topics[topic]
	r.mu.Unlock()
	if tr != nil && tr.publish.ok() {
		if ctx.Err() == nil {
			r.log.Warn("route refresh failed, keeping the cached route", zap.String("topic", topic), zap.Error(err))
		}
		return tr.publish, nil
	}
	return nil, err
}

// subscribeInfo returns the readable queues of topic, fetching on first use.
func (r *routeManager) subscribeInfo(ctx context.Context, topic string) ([]MessageQueue, error) {
	r.mu.Lock()
	tr := r.topics[topic]
	r.mu.Unlock()
	if tr == nil {
		if _, err := r.refresh(ctx, topic, false, 0); err != nil {
			return nil, err
		}
		r.mu.Lock()
		tr = r.topics[topic]
		r.mu.Unlock()
	}
	return slices.Clone(tr.subscribe), nil
}

// cachedTopics lists the topics in the cache, for the periodic refresh.
func (r *routeManager) cachedTopics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.topics))
}

// routedLocked returns the broker groups some cached topic route names.
func (r *routeManager) routedLocked() map[string]bool {
	named := map[string]bool{}
	for _, tr := range r.topics {
		for _, bd := range tr.data.BrokerDatas {
			named[bd.BrokerName] = true
		}
	}
	return named
}

// routed returns the broker groups still known as part of the cluster:
// those some cached topic route names, and those forgetOffline has seen
// unnamed only once; nil while no route is cached (nothing to judge a
// group by).
func (r *routeManager) routed() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.topics) == 0 {
		return nil
	}
	named := r.routedLocked()
	for name := range r.unnamed {
		named[name] = true
	}
	return named
}

// forgetOffline forgets the broker groups no cached topic route named at
// this call nor at the one before, as MQClientInstance.cleanOfflineBroker
// does on the route timer, and returns their names, sorted. A cached
// route is replaced only by a lookup that succeeded (refresh keeps it
// through a failed one, and a name server answers TOPIC_NOT_EXIST rather
// than a route without brokers), so a name-server hiccup forgets nothing,
// nor does a group missing from one topic's route while another's still
// names it. A live group can still be missing from the routes of one
// round: a name server that restarted lists the brokers as they register
// again (every registerNameServerPeriod), one that took a group for dead
// lists it again once it refutes that. Forgotten, its queues handed over
// could not commit their offsets; so a group is forgotten only when a
// second round, a refresh interval later, still finds it unnamed (RocketMQ
// forgets at once). The refresh loops call it after refreshing every
// topic.
func (r *routeManager) forgetOffline() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.topics) == 0 {
		return nil
	}
	named := r.routedLocked()
	var gone []string
	unnamed := map[string]bool{}
	for name := range r.brokers {
		switch {
		case named[name]:
		case r.unnamed[name]:
			delete(r.brokers, name)
			gone = append(gone, name)
		default:
			unnamed[name] = true
		}
	}
	r.unnamed = unnamed
	slices.Sort(gone)
	if len(gone) > 0 {
		r.log.Info("broker groups no route names any more; forgotten", zap.Strings("brokerNames", gone))
	}
	return gone
}

// isDefaultRoute reports whether topic is still served from TBW102.
func (r *routeManager) isDefaultRoute(topic string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := r.topics[topic]
	return tr != nil && tr.publish != nil && tr.publish.fromDefault
}

// brokerAddr picks the address to send to for a broker group: the leader
// a hint named, else the route's master, else any other
// member (a raftmq follower answers with the leader's address) — each
// skipped while it is marked down. When everything is down it returns the
// member whose mark ends first: it is the most likely to be back.
func (r *routeManager) brokerAddr(brokerName string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.brokers[brokerName]
	if g == nil {
		return ""
	}
	var now time.Time
	if len(g.down) > 0 { // no clock read while nothing is marked down
		now = r.now()
	}
	usable := func(addr string) bool {
		if addr == "" {
			return false
		}
		until, down := g.down[addr]
		return !down || !now.Before(until)
	}
	if usable(g.leader) {
		return g.leader
	}
	master := g.members[wire.MasterID]
	if master != g.stale && usable(master) {
		return master
	}
	ids := slices.Sorted(maps.Keys(g.members))
	for _, id := range ids {
		if a := g.members[id]; a != g.stale && usable(a) {
			return a
		}
	}
	// Everything is marked down: take the member whose mark ends first,
	// the one most likely to be back.
	best := ""
	var bestUntil time.Time
	for _, id := range ids {
		a := g.members[id]
		if until := g.down[a]; best == "" || until.Before(bestUntil) {
			best, bestUntil = a, until
		}
	}
	if best == "" {
		best = g.leader
	}
	return best
}

// leaderUnsure reports whether a broker group of topic's cached route has
// no leader worth sending to: no learned leader, and a route naming no
// master, or one that failed us (marked down) or a hint refuted. brokerAddr
// then guesses a member, and a raftmq follower drops what it cannot
// answer (a oneway send) until the route names the new leader.
func (r *routeManager) leaderUnsure(topic string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := r.topics[topic]
	if tr == nil {
		return false
	}
	now := r.now()
	for _, bd := range tr.data.BrokerDatas {
		g := r.brokers[bd.BrokerName]
		if g == nil {
			continue
		}
		usable := func(addr string) bool {
			until, down := g.down[addr]
			return addr != "" && (!down || !now.Before(until))
		}
		if usable(g.leader) {
			continue
		}
		if master := g.members[wire.MasterID]; master != g.stale && usable(master) {
			continue
		}
		return true
	}
	return false
}

// learnLeader records that addr is not brokerName's leader and leader is:
// a not-leader answer or a follower's pull answer from addr, or a new
// leader's notice (addr "").
func (r *routeManager) learnLeader(brokerName, addr, leader string) {
	defer r.addrChanged(brokerName)
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.brokers[brokerName]
	if g == nil {
		g = &brokerGroup{members: map[int64]string{}, down: map[string]time.Time{}}
		r.brokers[brokerName] = g
	}
	if g.members[wire.MasterID] == addr || g.stale == "" {
		g.stale = g.members[wire.MasterID]
	}
	if g.stale == leader { // a hint naming the route's master refutes nothing
		g.stale = ""
	}
	g.leader = leader
	g.clearMark(leader)
	r.log.Info("following the leader a broker named",
		zap.String("brokerName", brokerName), zap.String("notLeader", addr), zap.String("leader", leader))
}

// markDown avoids addr of brokerName for d (downFor after a failed
// connection; briefly for a member that knows no leader yet, since it will
// once the election ends); a leader learned at that address is forgotten.
func (r *routeManager) markDown(brokerName, addr string, d time.Duration) {
	r.mu.Lock()
	g := r.brokers[brokerName]
	if g == nil {
		r.mu.Unlock()
		return
	}
	defer r.addrChanged(brokerName)
	defer r.mu.Unlock()
	g.down[addr] = r.now().Add(d)
	if g.distrust == nil {
		g.distrust, g.liftAt = map[string]time.Time{}, map[string]uint64{}
	}
	g.distrust[addr] = r.now().Add(min(d, staleHintWindow))
	// A route naming a failed member master is news once the master has
	// changed since. For a member known as the leader when it failed, the
	// name server may still list it (it has not dropped it yet, or the
	// route is older than the learned leader): then only a route that
	// named another master first proves it came back.
	at := g.masters + 1
	if addr == g.leader || addr == g.members[wire.MasterID] {
		at++
	}
	// Another failure of the same death (one per send or pull in flight)
	// comes after the first has forgotten the learned leader: it must not
	// lower what the first one required.
	g.liftAt[addr] = max(at, g.liftAt[addr])
	if g.leader == addr {
		g.leader = ""
	}
}

// markUp clears the down mark of addr after a successful call.
func (r *routeManager) markUp(brokerName, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.brokers[brokerName]; g != nil {
		g.clearMark(addr)
	}
}

// clearMark forgets addr's down mark.
func (g *brokerGroup) clearMark(addr string) {
	delete(g.down, addr)
	delete(g.distrust, addr)
	delete(g.liftAt, addr)
}

// staleHintWindow bounds how long a leader hint naming a member that just
// failed us is ignored. After a leader dies, the other members keep naming
// it until their Raft heartbeat timeout fires and an election ends (well
// under a second); a member that comes back and wins later is followed
// again even while its down mark lasts.
const staleHintWindow = time.Second

// distrusted reports whether a leader hint naming addr of brokerName
// should be ignored: its connection failed, or it answered "not leader"
// without naming one, within the last staleHintWindow (and its down mark
// still holds). A member that is shutting down names itself, and the
// survivors of a leader's death name it until they elect.
func (r *routeManager) distrusted(brokerName, addr string) bool {
	return r.holds(brokerName, addr, func(g *brokerGroup) map[string]time.Time { return g.distrust })
}

// followable reports whether addr's answer naming leader is worth
// following: it names an address other than addr, and not one whose hint
// is distrusted. A member shutting down names itself; one that has not
// noticed its leader's death yet names the address that just failed.
func (r *routeManager) followable(brokerName, addr, leader string) bool {
	if leader == "" || leader == addr {
		return false
	}
	return !r.distrusted(brokerName, leader)
}

// markedDown reports whether addr of brokerName is avoided now.
func (r *routeManager) markedDown(brokerName, addr string) bool {
	return r.holds(brokerName, addr, func(g *brokerGroup) map[string]time.Time { return g.down })
}

// holds reports whether addr's entry in brokerName's table of ends (down
// marks or distrust) is still running.
func (r *routeManager) holds(brokerName, addr string, ends func(*brokerGroup) map[string]time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.brokers[brokerName]
	if g == nil {
		return false
	}
	until, ok := ends(g)[addr]
	return ok && r.now().Before(until)
}

func cloneRoute(rd *wire.TopicRouteData) *wire.TopicRouteData {
	c := *rd
	c.QueueDatas = slices.Clone(rd.QueueDatas)
	c.BrokerDatas = make([]wire.BrokerData, len(rd.BrokerDatas))
	for i, bd := range rd.BrokerDatas {
		bd.BrokerAddrs = maps.Clone(bd.BrokerAddrs)
		c.BrokerDatas[i] = bd
	}
	return &c
}
