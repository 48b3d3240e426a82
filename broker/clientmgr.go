package broker

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// clientManager holds the producer and consumer tables built from
// heartbeats (RocketMQ ProducerManager + ConsumerManager): which clients
// of which group are connected on which channel, and each consumer
// group's subscriptions. The tables are node-local, like RocketMQ's:
// clients heartbeat every broker they talk to. They are keyed by
// connection, as RocketMQ's channel tables are: a heartbeat naming a
// client ID adds or refreshes the registration of the connection it came
// on and never replaces another connection's, so a stranger naming a
// live client's ID cannot take its place (its group would rebalance
// without it, and its notices would go to the stranger). One client ID
// may thus be registered on two connections, as after a reconnect whose
// old connection this node has not yet seen close; the lists by client
// ID name it once, and lookups by ID take the connection it heartbeat on
// last.
type clientManager struct {
	c *Controller

	mu        sync.Mutex
	consumers map[string]*consumerGroupInfo                // guarded by mu; by group
	producers map[string]map[*remoting.Conn]*clientChannel // guarded by mu; group → connection
	// entries counts, per open connection, its entries in consumers and
	// producers (maxClientGroupsPerConnection); guarded by mu.
	entries map[*remoting.Conn]int
}

// errTooManyGroups refuses a heartbeat's group that would register its
// connection in more than maxClientGroupsPerConnection groups.
var errTooManyGroups = errors.New("connection registered in too many groups")

// clientChannel is one client on one connection.
type clientChannel struct {
	ClientID   string
	Conn       *remoting.Conn
	Language   string
	Version    int
	LastUpdate time.Time
}

// consumerGroupInfo is RocketMQ's ConsumerGroupInfo.
type consumerGroupInfo struct {
	ConsumeType      string
	MessageModel     string
	ConsumeFromWhere string
	Channels         map[*remoting.Conn]*clientChannel // by connection
	Subscriptions    map[string]wire.SubscriptionData  // by topic
	LastUpdate       time.Time
	// sql holds the SQL92 subscriptions of Subscriptions, compiled. Like
	// Subscriptions it is replaced, never modified, by each heartbeat, so
	// a copy of the info may share it.
	sql map[string]*sqlSub // by topic
}

func newClientManager(c *Controller) *clientManager {
	return &clientManager{c: c, consumers: map[string]*consumerGroupInfo{}, producers: map[string]map[*remoting.Conn]*clientChannel{},
		entries: map[*remoting.Conn]int{}}
}

// putChannel records ch in a table keyed by connection and reports
// whether the set of client IDs in it changed: ch's ID was in no other
// connection's entry, or its connection's entry named an ID now gone.
// Entries of ch's ID on connections already closed go now rather than
// when their close is processed: the client has reconnected.
func putChannel(chans map[*remoting.Conn]*clientChannel, ch *clientChannel) bool {
	changed := true
	var replaced string
	for conn, old := range chans {
		switch {
		case conn == ch.Conn:
			if old.ClientID != ch.ClientID {
				replaced = old.ClientID
			} else {
				changed = false
			}
		case old.ClientID == ch.ClientID:
			changed = false
			if conn.Closed() {
				delete(chans, conn)
			}
		}
	}
	chans[ch.Conn] = ch
	if replaced != "" && !hasClientID(chans, replaced) {
		changed = true
	}
	return changed
}

// closedConn reports whether a heartbeat came on a connection that has
// closed since it was read (a request waits in a worker queue while its
// connection closes). Registered, it would outlive the close's removal,
// which ran or runs under mu, and stay a member of its groups until it
// expired (channelExpiredTimeout): rebalancing would hand it queues
// nobody consumes meanwhile.
func closedConn(c *remoting.Conn) bool { return c != nil && c.Closed() }

// hasClientID reports whether any connection of chans is registered
// under id.
func hasClientID(chans map[*remoting.Conn]*clientChannel, id string) bool {
	for _, ch := range chans {
		if ch.ClientID == id {
			return true
		}
	}
	return false
}

// channelOf returns the entry of chans registered under id that heartbeat
// last, preferring a connection still open; nil when there is none.
func channelOf(chans map[*remoting.Conn]*clientChannel, id string) *clientChannel {
	var best *clientChannel
	for _, ch := range chans {
		if ch.ClientID != id {
			continue
		}
		if best == nil || best.Conn.Closed() && !ch.Conn.Closed() ||
			best.Conn.Closed() == ch.Conn.Closed() && ch.LastUpdate.After(best.LastUpdate) {
			best = ch
		}
	}
	return best
}

// addEntryLocked counts a new entry of conn, or returns errTooManyGroups
// when conn has maxClientGroupsPerConnection already.
func (m *clientManager) addEntryLocked(conn *remoting.Conn) error {
	if m.entries[conn] >= m.c.live().MaxClientGroupsPerConnection {
		return errTooManyGroups
	}
	m.entries[conn]++
	return nil
}

// dropEntryLocked uncounts an entry of conn.
func (m *clientManager) dropEntryLocked(conn *remoting.Conn) {
	if m.entries[conn] <= 1 {
		delete(m.entries, conn)
		return
	}
	m.entries[conn]--
}

// registerConsumer records a heartbeat's consumer data; it reports
// whether the group's membership changed (a client ID new to the group)
// or the topics it subscribes to did, either of which triggers
// NOTIFY_CONSUMER_IDS_CHANGED, as RocketMQ's ConsumerManager does: a
// client that subscribes to a topic while running (Java's subscribe after
// start only heartbeats) and the group's other members rebalance it at
// once instead of on their 20 s timer. It returns
// errTooManyGroups, registering nothing, when the group would be one too
// many for the connection.
func (m *clientManager) registerConsumer(cd wire.HeartbeatConsumerData, ch clientChannel, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if closedConn(ch.Conn) {
		return false, nil
	}
	g := m.consumers[cd.GroupName]
	if g == nil || g.Channels[ch.Conn] == nil {
		if err := m.addEntryLocked(ch.Conn); err != nil {
			return false, err
		}
	}
	if g == nil {
		g = &consumerGroupInfo{Channels: map[*remoting.Conn]*clientChannel{}, Subscriptions: map[string]wire.SubscriptionData{}}
		m.consumers[cd.GroupName] = g
	}
	g.ConsumeType, g.MessageModel, g.ConsumeFromWhere, g.LastUpdate = cd.ConsumeType, cd.MessageModel, cd.ConsumeFromWhere, now
	ch.LastUpdate = now
	changed := putChannel(g.Channels, &ch)
	// RocketMQ replaces the subscription table with the heartbeat's,
	// except that a topic's subscription only changes for a newer
	// subVersion (ConsumerGroupInfo.updateSubscription): the group keeps
	// the newest one any client announced, so the pulls of a client that
	// announced it are not refused as stale (SUBSCRIPTION_NOT_LATEST)
	// whenever another client of the group heartbeats an older one.
	subs := make(map[string]wire.SubscriptionData, len(cd.SubscriptionDataSet))
	var sql map[string]*sqlSub
	for _, s := range cd.SubscriptionDataSet {
		if s == nil {
			continue
		}
		if old, ok := g.Subscriptions[s.Topic]; ok && old.SubVersion >= s.SubVersion {
			subs[s.Topic] = old
			if prev := g.sql[s.Topic]; prev != nil {
				if sql == nil {
					sql = map[string]*sqlSub{}
				}
				sql[s.Topic] = prev
			}
			continue
		}
		subs[s.Topic] = *s
		if isSQL92(s.ExpressionType) {
			if sql == nil {
				sql = map[string]*sqlSub{}
			}
			sql[s.Topic] = m.compileSub(cd.GroupName, s, g.sql[s.Topic])
		}
	}
	if len(subs) != len(g.Subscriptions) {
		changed = true
	}
	for topic := range subs {
		if _, ok := g.Subscriptions[topic]; !ok {
			changed = true
		}
	}
	g.Subscriptions, g.sql = subs, sql
	return changed, nil
}

// compileSub compiles a heartbeat's SQL92 subscription, reusing the
// previous heartbeat's result for the same text (so a bad expression is
// logged once, not on every heartbeat; a client changing the text on
// every heartbeat gets its warnings rate-limited). The heartbeat succeeds
// either way: pulls of a subscription that does not compile answer
// FILTER_DATA_NOT_EXIST with the reason.
func (m *clientManager) compileSub(group string, s *wire.SubscriptionData, prev *sqlSub) *sqlSub {
	if prev != nil && prev.src == s.SubString {
		return &sqlSub{src: prev.src, version: s.SubVersion, expr: prev.expr, err: prev.err}
	}
	sub := &sqlSub{src: s.SubString, version: s.SubVersion}
	if !m.c.cfg.EnablePropertyFilter {
		sub.err = errPropertyFilterOff
	} else {
		sub.expr, sub.err = m.c.filters.Compile(s.SubString)
	}
	if sub.err != nil {
		if ok, held := m.c.sqlWarn.Allow(); ok {
			m.c.log.Warn("consumer group subscribes with a SQL92 expression this broker cannot use; its pulls will fail",
				zap.String("group", group), zap.String("topic", s.Topic), zap.String("expression", s.SubString), zap.Error(sub.err),
				zap.Int64("sqlWarningsNotLogged", held))
		}
	}
	return sub
}

// registerProducer records a heartbeat's producer group, or returns
// errTooManyGroups as registerConsumer does.
func (m *clientManager) registerProducer(group string, ch clientChannel, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if closedConn(ch.Conn) {
		return nil
	}
	g := m.producers[group]
	if g == nil || g[ch.Conn] == nil {
		if err := m.addEntryLocked(ch.Conn); err != nil {
			return err
		}
	}
	if g == nil {
		g = map[*remoting.Conn]*clientChannel{}
		m.producers[group] = g
	}
	ch.LastUpdate = now
	putChannel(g, &ch)
	return nil
}

// unregister removes a client from the named groups when it is
// registered on conn, the connection the request came on; it returns the
// consumer groups whose membership changed. RocketMQ's tables are keyed
// by channel, so an UNREGISTER_CLIENT removes only its sender's own
// registrations: naming another client's ID must not drop that client
// (its consumer group would rebalance without it while it still pulls).
func (m *clientManager) unregister(conn *remoting.Conn, clientID, producerGroup, consumerGroup string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.producers[producerGroup]; g != nil {
		if ch, ok := g[conn]; ok && ch.ClientID == clientID {
			delete(g, conn)
			m.dropEntryLocked(conn)
			if len(g) == 0 {
				delete(m.producers, producerGroup)
			}
		}
	}
	if g := m.consumers[consumerGroup]; g != nil {
		if ch, ok := g.Channels[conn]; ok && ch.ClientID == clientID {
			delete(g.Channels, conn)
			m.dropEntryLocked(conn)
			if len(g.Channels) == 0 {
				delete(m.consumers, consumerGroup)
			}
			if !hasClientID(g.Channels, clientID) {
				return []string{consumerGroup}
			}
		}
	}
	return nil
}

// removeIf drops every channel matching drop and returns the consumer
// groups that lost a member: a client ID no connection left is
// registered under.
func (m *clientManager) removeIf(drop func(*clientChannel) bool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var changed []string
	for name, g := range m.consumers {
		var lost []string
		for conn, ch := range g.Channels {
			if drop(ch) {
				delete(g.Channels, conn)
				m.dropEntryLocked(conn)
				lost = append(lost, ch.ClientID)
			}
		}
		if len(g.Channels) == 0 {
			delete(m.consumers, name)
		}
		for _, id := range lost {
			if !hasClientID(g.Channels, id) {
				changed = append(changed, name)
				break
			}
		}
	}
	for name, g := range m.producers {
		for conn, ch := range g {
			if drop(ch) {
				delete(g, conn)
				m.dropEntryLocked(conn)
			}
		}
		if len(g) == 0 {
			delete(m.producers, name)
		}
	}
	sort.Strings(changed)
	return changed
}

// connClosed is the servers' OnConnClose hook.
func (m *clientManager) connClosed(conn *remoting.Conn) {
	changed := m.removeIf(func(ch *clientChannel) bool { return ch.Conn == conn })
	m.mu.Lock()
	delete(m.entries, conn) // with any entry putChannel dropped for a reconnect
	m.mu.Unlock()
	for _, g := range changed {
		m.notifyChanged(g)
	}
}

// scanLoop expires clients that stopped heartbeating (RocketMQ's
// ClientHousekeepingService, every 10 s).
func (m *clientManager) scanLoop() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.c.quit:
			return
		case now := <-t.C:
			exp := m.c.cfg.ChannelExpiredTimeout
			changed := m.removeIf(func(ch *clientChannel) bool { return now.Sub(ch.LastUpdate) > exp })
			for _, g := range changed {
				m.c.log.Info("consumer channels expired", zap.String("group", g))
				m.notifyChanged(g)
			}
		}
	}
}

// consumerIDs lists a group's client ids, sorted, each once: the
// clients' rebalance takes the list as the group's members.
func (m *clientManager) consumerIDs(group string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g == nil {
		return nil
	}
	ids := make([]string, 0, len(g.Channels))
	for _, ch := range g.Channels {
		ids = append(ids, ch.ClientID)
	}
	sort.Strings(ids)
	return slices.Compact(ids)
}

// consumerChannel returns a copy of the entry a consumer of group is
// reached on by its client ID (channelOf), or false.
func (m *clientManager) consumerChannel(group, clientID string) (clientChannel, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.consumers[group]; g != nil {
		if ch := channelOf(g.Channels, clientID); ch != nil {
			return *ch, true
		}
	}
	return clientChannel{}, false
}

// group returns a copy of a consumer group's info.
func (m *clientManager) group(name string) (consumerGroupInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[name]
	if g == nil {
		return consumerGroupInfo{}, false
	}
	cp := *g
	cp.Channels = make(map[*remoting.Conn]*clientChannel, len(g.Channels))
	for k, v := range g.Channels {
		vv := *v
		cp.Channels[k] = &vv
	}
	cp.Subscriptions = make(map[string]wire.SubscriptionData, len(g.Subscriptions))
	for k, v := range g.Subscriptions {
		cp.Subscriptions[k] = v
	}
	return cp, true
}

// hasGroup reports whether a consumer of the group is connected.
func (m *clientManager) hasGroup(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consumers[name] != nil
}

// groups lists the consumer group names known from heartbeats.
func (m *clientManager) groups() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.consumers))
	for g := range m.consumers {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// subscription returns the subscription of group to topic from its
// heartbeats, with its compiled form when it is SQL92 (nil otherwise);
// false when no heartbeat brought one.
func (m *clientManager) subscription(group, topic string) (wire.SubscriptionData, *sqlSub, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.consumers[group]; g != nil {
		if s, ok := g.Subscriptions[topic]; ok {
			return s, g.sql[topic], true
		}
	}
	return wire.SubscriptionData{}, nil, false
}

// broadcasting reports whether group's heartbeats say it consumes in
// broadcasting mode.
func (m *clientManager) broadcasting(group string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	return g != nil && g.MessageModel == wire.Broadcasting.String()
}

// notifyChanged sends NOTIFY_CONSUMER_IDS_CHANGED (40) oneway to every
// remaining client of group so they rebalance now instead of within 20 s.
// It never waits: a notice that finds its connection's write queue full
// (a client that stopped reading) is dropped. It runs inside heartbeat
// handling and connection-close callbacks, where waiting for each stalled
// member would hold every heartbeat of the group behind it, and the
// notice is only a hint: the client rebalances on its own timer anyway
// (RocketMQ gives the oneway write 10 ms, then drops it).
func (m *clientManager) notifyChanged(group string) {
	g, ok := m.group(group)
	if !ok {
		return
	}
	for _, ch := range g.Channels {
		if ch.Conn.Closed() {
			continue
		}
		req := remoting.NewRequest(remoting.RequestNotifyConsumerIDsChanged, &wire.ConsumerGroupRequestHeader{ConsumerGroup: group}, nil)
		req.Flag |= remoting.FlagOneway
		if err := ch.Conn.InvokeOneway(noWait, req); err != nil {
			m.c.log.Debug("notify consumer ids changed not sent", zap.String("group", group), zap.String("client", ch.ClientID), zap.Error(err))
		}
	}
}

// noWait is a context already cancelled: a oneway send with it is queued
// when the connection's write queue has room and fails at once otherwise.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
