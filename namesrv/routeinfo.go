package namesrv

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/wire"
)

// Channel is the connection a broker registered through. *remoting.Conn
// satisfies it; the tables compare channels by identity and close a channel
// whose broker expired, like RocketMQ's BrokerLiveInfo.channel.
type Channel interface {
	Close() error
	// Closed reports whether the connection has closed; it must be true
	// before the connection's close is reported to the name server.
	Closed() bool
}

// brokerAddrInfo keys the live and filter-server tables: the same address
// may exist in two clusters.
type brokerAddrInfo struct {
	cluster string
	addr    string
}

// groupKey names a broker group.
type groupKey struct {
	cluster string
	name    string
}

// masterTerm is the highest state version (a raftmq leader's Raft term) a
// group's brokerId 0 registered with, and until when it holds off lower
// ones.
type masterTerm struct {
	version int64
	until   time.Time
}

// maxMasterTermMemory caps how long a group's master term is kept after
// the last registration that carried it, whatever expiry that
// registration asked for: the table must not grow with every group name
// ever registered.
const maxMasterTermMemory = 10 * time.Minute

// brokerLiveInfo is what the name server knows about a registered address.
type brokerLiveInfo struct {
	lastUpdate   time.Time
	timeout      time.Duration
	dataVersion  wire.DataVersion
	channel      Channel
	haServerAddr string
}

// RouteInfoManager holds the routing tables of RocketMQ's RouteInfoManager.
// Every table is guarded by mu; methods ending in Locked expect the caller to
// hold it (write lock for those that modify). No method calls out to the
// network or closes a channel while holding mu, because a channel's close
// callback comes back into the manager.
type RouteInfoManager struct {
	log           *zap.Logger
	now           func() time.Time
	defaultExpiry time.Duration
	// deleteTopicWithRegistration mirrors NamesrvConfig.deleteTopicWithBrokerRegistration.
	deleteTopicWithRegistration bool

	mu sync.RWMutex
	// topicQueueTable: topic → brokerName → queue data.
	topicQueueTable map[string]map[string]*wire.QueueData
	// brokerAddrTable: brokerName → group members.
	brokerAddrTable map[string]*wire.BrokerData
	// clusterAddrTable: cluster → set of brokerNames.
	clusterAddrTable map[string]map[string]struct{}
	// brokerLiveTable: (cluster, addr) → liveness and data version.
	brokerLiveTable map[brokerAddrInfo]*brokerLiveInfo
	// filterServerTable: (cluster, addr) → filter server addresses.
	filterServerTable map[brokerAddrInfo][]string
	// writeWiped: the broker names whose write permission an operator
	// wiped (WIPE_WRITE_PERM_OF_BROKER) and has not added back. Queue data
	// written for them from any registration loses its write bit. Kept by
	// name, not in a member's entry: a new leader registers from another
	// address, with its own data version, and rebuilds the group's queue
	// data from the replicated topic table, which knows nothing of the
	// wipe; nor can the name server tell such a registration from a
	// deposed leader's once the newer leader's entry is gone. It outlives
	// the group's entries (every member restarting) until addWritePerm.
	writeWiped map[string]struct{}
	// masterTerms: group → the highest state version its brokerId 0
	// registered with. A raftmq leader registers with its Raft term, so a
	// deposed leader's registration (one in flight when it lost the
	// leadership, or sent in the moment before it noticed) carries a lower
	// one. Comparing with the entry at brokerId 0 alone would let it take
	// the id back once the newer leader's entry is gone (its connection
	// closed, gossip declared it dead) and before the next leader
	// registers. Kept as long as the newer leader's entry would have lived
	// had it stayed (its expiry after its last registration, at most
	// maxMasterTermMemory), then forgotten: a group restarted from wiped
	// data counts terms from 1 again, and a name server cannot tell its
	// leader from a deposed one, so such a group is routed without master
	// until then (or at once after the name servers restart).
	masterTerms map[groupKey]masterTerm
}

// RouteOption adjusts a RouteInfoManager at construction.
type RouteOption func(*RouteInfoManager)

// WithClock injects the clock used for heartbeat timestamps and expiry, so
// tests can move time without sleeping.
func WithClock(now func() time.Time) RouteOption {
	return func(r *RouteInfoManager) { r.now = now }
}

// WithDeleteTopicWithRegistration drops a broker's topics that are missing
// from its newest full registration.
func WithDeleteTopicWithRegistration(on bool) RouteOption {
	return func(r *RouteInfoManager) { r.deleteTopicWithRegistration = on }
}

// NewRouteInfoManager returns empty tables. defaultExpiry applies to brokers
// that do not send heartbeatTimeoutMillis; log may be nil.
func NewRouteInfoManager(defaultExpiry time.Duration, log *zap.Logger, opts ...RouteOption) *RouteInfoManager {
	if log == nil {
		log = zap.NewNop()
	}
	r := &RouteInfoManager{
		log:               log,
		now:               time.Now,
		defaultExpiry:     defaultExpiry,
		topicQueueTable:   make(map[string]map[string]*wire.QueueData),
		brokerAddrTable:   make(map[string]*wire.BrokerData),
		clusterAddrTable:  make(map[string]map[string]struct{}),
		brokerLiveTable:   make(map[brokerAddrInfo]*brokerLiveInfo),
		filterServerTable: make(map[brokerAddrInfo][]string),
		writeWiped:        make(map[string]struct{}),
		masterTerms:       make(map[groupKey]masterTerm),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// RegisterBrokerArgs is one REGISTER_BROKER request, decoded.
type RegisterBrokerArgs struct {
	Cluster      string
	BrokerAddr   string
	BrokerName   string
	BrokerID     int64
	HAServerAddr string
	ZoneName     string
	// HeartbeatTimeout overrides the default expiry when positive.
	HeartbeatTimeout time.Duration
	// EnableActingMaster is nil for brokers that do not send the header
	// (RocketMQ treats them as old-version brokers).
	EnableActingMaster *bool
	Topics             wire.TopicConfigSerializeWrapper
	FilterServerList   []string
	Channel            Channel
}

// RegisterBrokerResult tells a slave where its master is.
type RegisterBrokerResult struct {
	HAServerAddr string
	MasterAddr   string
}

// RegisterBroker records a broker and, when it is the master (or the
// lowest-id slave of an acting-master group) and its data version changed or
// this is its first registration, its topics' queue data. It returns
// ErrRegistrationIgnored when the registration was ignored because another
// address holds the same brokerId with a newer state version, or because it
// was read from a connection that has since closed (RocketMQ answers
// SUCCESS to the first and binds the second), and an
// error wrapping ErrBrokerNameInOtherCluster when another cluster's group
// holds the brokerName (RocketMQ accepts it and mixes the groups).
func (r *RouteInfoManager) RegisterBroker(a RegisterBrokerArgs) (res RegisterBrokerResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	// A registration read from a connection that has closed since is
	// ignored: the close removes only what was bound to the connection
	// when the close was seen. Bound later, a broker that registered again
	// over a new connection meanwhile would be dropped by the queued
	// removal (RocketMQ binds it and drops it), and a broker that shut
	// down with a registration in flight, processed after its close's
	// removal ran, would stay routed with no close left to remove it until
	// it expires (brokerChannelExpiredTime). A live broker's client sees
	// the same close and registers again over a new connection; this
	// answer cannot reach it anyway. One processed before the close is
	// seen still binds and goes with the close's removal: the broker's
	// second registration a second after reconnecting covers that.
	key := brokerAddrInfo{a.Cluster, a.BrokerAddr}
	if a.Channel != nil && a.Channel.Closed() {
		r.log.Info("registration read from a connection closed since; ignored",
			zap.String("cluster", a.Cluster), zap.String("brokerName", a.BrokerName),
			zap.Int64("brokerId", a.BrokerID), zap.String("addr", a.BrokerAddr))
		return res, ErrRegistrationIgnored
	}

	// One brokerName, one group: RocketMQ lets a second cluster's group of
	// the same name join the first's entry, so its members (and, with a
	// higher state version, its master) would be routed for the first
	// cluster's topics and the reverse. The group that holds the name
	// keeps it until its last member leaves.
	if bd := r.brokerAddrTable[a.BrokerName]; bd != nil && bd.Cluster != a.Cluster {
		r.log.Warn("broker name is registered in another cluster; registration refused",
			zap.String("brokerName", a.BrokerName), zap.String("cluster", bd.Cluster),
			zap.String("refusedCluster", a.Cluster), zap.String("addr", a.BrokerAddr))
		return res, fmt.Errorf("%w: %s is registered in cluster %s; refused for cluster %s "+
			"(brokerName must be unique among the clusters sharing a name server)",
			ErrBrokerNameInOtherCluster, a.BrokerName, bd.Cluster, a.Cluster)
	}

	// A different address already holding this id wins if its state
	// version is newer: the registering broker is stale (a deposed
	// leader's registration applied after its successor's). It changes
	// nothing: the address may meanwhile be registered under another id,
	// as a follower, and that registration stands. RocketMQ first drops
	// the address's other ids and its liveness, leaving such a member
	// unrouted until its next registration.
	if bd := r.brokerAddrTable[a.BrokerName]; bd != nil {
		if old, ok := bd.BrokerAddrs[a.BrokerID]; ok && old != a.BrokerAddr {
			if oldLive := r.brokerLiveTable[brokerAddrInfo{a.Cluster, old}]; oldLive != nil &&
				oldLive.dataVersion.StateVersion > a.Topics.DataVersion.StateVersion {
				r.log.Warn("registering broker conflicts with a newer one; ignored",
					zap.String("cluster", a.Cluster), zap.String("brokerName", a.BrokerName),
					zap.Int64("brokerId", a.BrokerID), zap.String("oldAddr", old), zap.String("newAddr", a.BrokerAddr))
				if !r.inClusterLocked(a.Cluster, a.BrokerAddr) {
					delete(r.brokerLiveTable, key)
				}
				return res, ErrRegistrationIgnored
			}
		}
	}

	// A master registering with a lower state version than the group's
	// newest master did, within that one's expiry, is a deposed leader
	// (masterTerms), whether or not the newer one still holds brokerId 0.
	gk := groupKey{a.Cluster, a.BrokerName}
	sv := a.Topics.DataVersion.StateVersion
	if a.BrokerID == wire.MasterID {
		if mt, ok := r.masterTerms[gk]; ok && sv < mt.version && r.now().Before(mt.until) {
			r.log.Warn("master registration older than the group's newest master; ignored",
				zap.String("cluster", a.Cluster), zap.String("brokerName", a.BrokerName),
				zap.String("addr", a.BrokerAddr), zap.Int64("stateVersion", sv), zap.Int64("newestStateVersion", mt.version))
			if !r.inClusterLocked(a.Cluster, a.BrokerAddr) {
				delete(r.brokerLiveTable, key)
			}
			return res, ErrRegistrationIgnored
		}
	}

	r.leaveOtherGroupsLocked(a.Cluster, a.BrokerName, a.BrokerAddr)

	names := r.clusterAddrTable[a.Cluster]
	if names == nil {
		names = make(map[string]struct{})
		r.clusterAddrTable[a.Cluster] = names
	}
	names[a.BrokerName] = struct{}{}

	registerFirst := false
	bd := r.brokerAddrTable[a.BrokerName]
	if bd == nil {
		registerFirst = true
		bd = &wire.BrokerData{Cluster: a.Cluster, BrokerName: a.BrokerName, BrokerAddrs: make(map[int64]string)}
		r.brokerAddrTable[a.BrokerName] = bd
	}
	oldVersionBroker := a.EnableActingMaster == nil
	bd.EnableActingMaster = !oldVersionBroker && *a.EnableActingMaster
	bd.ZoneName = a.ZoneName

	// One address holds one id: a slave promoted to master (or a Raft
	// follower that became leader) re-registers under id 0 and its old
	// entry goes.
	for id, addr := range bd.BrokerAddrs {
		if addr == a.BrokerAddr && id != a.BrokerID {
			delete(bd.BrokerAddrs, id)
		}
	}

	// RocketMQ also refuses a first registration that carries exactly one
	// topic (it takes it for a single-topic update from an unknown broker).
	// We accept it: a raftmq broker may legitimately register with one
	// topic, and refusing would leave it routeless without a clear cause.

	oldAddr := bd.BrokerAddrs[a.BrokerID]
	bd.BrokerAddrs[a.BrokerID] = a.BrokerAddr
	registerFirst = registerFirst || oldAddr == ""

	isMaster := a.BrokerID == wire.MasterID
	isPrimeSlave := !oldVersionBroker && !isMaster && a.BrokerID == minID(bd.BrokerAddrs)

	if isMaster || isPrimeSlave {
		tc := a.Topics.TopicConfigTable
		if r.deleteTopicWithRegistration {
			for topic, qds := range r.topicQueueTable {
				if _, keep := tc[topic]; keep {
					continue
				}
				if _, ok := qds[a.BrokerName]; ok {
					delete(qds, a.BrokerName)
					if len(qds) == 0 {
						delete(r.topicQueueTable, topic)
					}
				}
			}
		}
		for _, t := range tc {
			if registerFirst || r.isTopicConfigChangedLocked(key, a.Topics.DataVersion, a.BrokerName, t.TopicName) {
				if isPrimeSlave && bd.EnableActingMaster {
					// The acting master of a group without master is read-only.
					t.Perm &^= wire.PermWrite
				}
				r.createAndUpdateQueueDataLocked(a.BrokerName, t)
			}
		}
	}

	expiry := r.defaultExpiry
	if a.HeartbeatTimeout > 0 {
		expiry = a.HeartbeatTimeout
	}
	if _, ok := r.brokerLiveTable[key]; !ok {
		r.log.Info("new broker registered", zap.String("cluster", a.Cluster),
			zap.String("brokerName", a.BrokerName), zap.Int64("brokerId", a.BrokerID),
			zap.String("addr", a.BrokerAddr), zap.String("haServerAddr", a.HAServerAddr))
	}
	r.brokerLiveTable[key] = &brokerLiveInfo{
		lastUpdate:   r.now(),
		timeout:      expiry,
		dataVersion:  a.Topics.DataVersion,
		channel:      a.Channel,
		haServerAddr: a.HAServerAddr,
	}
	if isMaster {
		if mt, ok := r.masterTerms[gk]; !ok || sv >= mt.version || !r.now().Before(mt.until) {
			r.masterTerms[gk] = masterTerm{version: sv, until: r.now().Add(min(expiry, maxMasterTermMemory))}
		}
	}
	if len(a.FilterServerList) == 0 {
		delete(r.filterServerTable, key)
	} else {
		r.filterServerTable[key] = append([]string(nil), a.FilterServerList...)
	}

	if !isMaster {
		if masterAddr, ok := bd.BrokerAddrs[wire.MasterID]; ok {
			if ml := r.brokerLiveTable[brokerAddrInfo{a.Cluster, masterAddr}]; ml != nil {
				res.HAServerAddr = ml.haServerAddr
				res.MasterAddr = masterAddr
			}
		}
	}
	return res, nil
}

// leaveOtherGroupsLocked drops addr from every group of cluster but keep.
// One address is one process, a member of one group; it can register in
// another group before the name server saw its earlier process go (no
// close seen, gossip off), as when a pod's address is handed to a pod of
// another group. Left in the old group, it would be routed there as a
// member it no longer is, and would never expire, since the new group's
// registrations refresh its liveness; as the old group's brokerId 0 it
// would even keep that group's next leader out, whose term the new
// group's need not exceed. A group left without members goes with its
// queue data, as after an unregistration.
func (r *RouteInfoManager) leaveOtherGroupsLocked(cluster, keep, addr string) {
	emptied := make(map[string]struct{})
	for name := range r.clusterAddrTable[cluster] {
		bd := r.brokerAddrTable[name]
		if name == keep || bd == nil {
			continue
		}
		for id, x := range bd.BrokerAddrs {
			if x != addr {
				continue
			}
			delete(bd.BrokerAddrs, id)
			r.log.Warn("address registered in another group; dropped from its old one",
				zap.String("cluster", cluster), zap.String("addr", addr), zap.String("oldBrokerName", name),
				zap.Int64("oldBrokerId", id), zap.String("brokerName", keep))
		}
		if len(bd.BrokerAddrs) == 0 {
			emptied[name] = struct{}{}
		}
	}
	for name := range emptied {
		delete(r.brokerAddrTable, name)
		delete(r.clusterAddrTable[cluster], name)
	}
	r.dropQueueDataLocked(emptied)
}

// inClusterLocked reports whether addr is a member of a group of cluster.
// Its live record is that membership's: dropped, the member would neither
// expire nor go with its connection's close.
func (r *RouteInfoManager) inClusterLocked(cluster, addr string) bool {
	for name := range r.clusterAddrTable[cluster] {
		if bd := r.brokerAddrTable[name]; bd != nil && slices.Contains(slices.Collect(maps.Values(bd.BrokerAddrs)), addr) {
			return true
		}
	}
	return false
}

func minID(addrs map[int64]string) int64 {
	first := true
	var m int64
	for id := range addrs {
		if first || id < m {
			m, first = id, false
		}
	}
	return m
}

// isBrokerTopicConfigChangedLocked reports whether dv differs from the data
// version last registered for key (or nothing was registered).
func (r *RouteInfoManager) isBrokerTopicConfigChangedLocked(key brokerAddrInfo, dv wire.DataVersion) bool {
	prev := r.brokerLiveTable[key]
	return prev == nil || prev.dataVersion != dv
}

func (r *RouteInfoManager) isTopicConfigChangedLocked(key brokerAddrInfo, dv wire.DataVersion, brokerName, topic string) bool {
	if r.isBrokerTopicConfigChangedLocked(key, dv) {
		return true
	}
	qds := r.topicQueueTable[topic]
	if len(qds) == 0 {
		return true
	}
	_, ok := qds[brokerName]
	return !ok
}

func (r *RouteInfoManager) createAndUpdateQueueDataLocked(brokerName string, tc wire.TopicConfig) {
	if _, wiped := r.writeWiped[brokerName]; wiped {
		tc.Perm &^= wire.PermWrite
	}
	qd := &wire.QueueData{
		BrokerName:     brokerName,
		ReadQueueNums:  tc.ReadQueueNums,
		WriteQueueNums: tc.WriteQueueNums,
		Perm:           tc.Perm,
		TopicSysFlag:   tc.TopicSysFlag,
	}
	qds := r.topicQueueTable[tc.TopicName]
	if qds == nil {
		qds = make(map[string]*wire.QueueData)
		r.topicQueueTable[tc.TopicName] = qds
		r.log.Info("new topic registered", zap.String("topic", tc.TopicName), zap.String("brokerName", brokerName))
	} else if old := qds[brokerName]; old != nil && *old != *qd {
		r.log.Info("topic changed", zap.String("topic", tc.TopicName), zap.String("brokerName", brokerName),
			zap.Any("old", *old), zap.Any("new", *qd))
	}
	qds[brokerName] = qd
}

// IsBrokerTopicConfigChanged reports whether dv differs from what the broker
// at addr last registered (QUERY_DATA_VERSION).
func (r *RouteInfoManager) IsBrokerTopicConfigChanged(cluster, addr string, dv wire.DataVersion) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.isBrokerTopicConfigChangedLocked(brokerAddrInfo{cluster, addr}, dv)
}

// QueryBrokerTopicConfig returns the data version registered for addr.
func (r *RouteInfoManager) QueryBrokerTopicConfig(cluster, addr string) (wire.DataVersion, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if l := r.brokerLiveTable[brokerAddrInfo{cluster, addr}]; l != nil {
		return l.dataVersion, true
	}
	return wire.DataVersion{}, false
}

// UpdateBrokerInfoUpdateTimestamp refreshes a broker's liveness (heartbeat);
// unknown addresses are ignored, as in RocketMQ: they must register first.
func (r *RouteInfoManager) UpdateBrokerInfoUpdateTimestamp(cluster, addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.brokerLiveTable[brokerAddrInfo{cluster, addr}]; l != nil {
		l.lastUpdate = r.now()
		return true
	}
	return false
}

// PickupTopicRouteData builds the route of topic, or nil when no live broker
// serves it. Queue and broker data are sorted by broker name.
func (r *RouteInfoManager) PickupTopicRouteData(topic string) *wire.TopicRouteData {
	r.mu.RLock()
	defer r.mu.RUnlock()
	qds := r.topicQueueTable[topic]
	if len(qds) == 0 {
		return nil
	}
	rd := &wire.TopicRouteData{FilterServerTable: map[string][]string{}}
	for _, name := range sortedKeys(qds) {
		rd.QueueDatas = append(rd.QueueDatas, *qds[name])
		bd := r.brokerAddrTable[name]
		if bd == nil {
			continue
		}
		c := bd.Clone()
		rd.BrokerDatas = append(rd.BrokerDatas, c)
		for _, addr := range c.BrokerAddrs {
			if fs, ok := r.filterServerTable[brokerAddrInfo{c.Cluster, addr}]; ok {
				rd.FilterServerTable[addr] = append([]string(nil), fs...)
			}
		}
	}
	if len(rd.BrokerDatas) == 0 {
		return nil
	}
	return rd
}

// ClusterInfo returns a copy of the broker and cluster tables.
func (r *RouteInfoManager) ClusterInfo() *wire.ClusterInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ci := &wire.ClusterInfo{
		BrokerAddrTable:  make(map[string]wire.BrokerData, len(r.brokerAddrTable)),
		ClusterAddrTable: make(map[string][]string, len(r.clusterAddrTable)),
	}
	for name, bd := range r.brokerAddrTable {
		ci.BrokerAddrTable[name] = bd.Clone()
	}
	for cluster, names := range r.clusterAddrTable {
		ci.ClusterAddrTable[cluster] = sortedKeys(names)
	}
	return ci
}

// AllTopics lists every topic with queue data, sorted.
func (r *RouteInfoManager) AllTopics() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.topicQueueTable)
}

// TopicsByCluster lists the topics served by any broker of cluster, sorted;
// an unknown cluster has none.
func (r *RouteInfoManager) TopicsByCluster(cluster string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := r.clusterAddrTable[cluster]
	var out []string
	for topic, qds := range r.topicQueueTable {
		for name := range names {
			if _, ok := qds[name]; ok {
				out = append(out, topic)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// SystemTopics lists, sorted, the names RocketMQ's getSystemTopicList
// gives (every cluster and broker group: RocketMQ's brokers create a topic
// named after each) and the routed topics a broker counts as system
// topics: wire.SystemTopic's and each cluster's reply topic. RocketMQ
// leaves these to the broker the answer names (GET_SYSTEM_TOPIC_LIST_FROM_BROKER).
func (r *RouteInfoManager) SystemTopics() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	set := make(map[string]struct{})
	for cluster, names := range r.clusterAddrTable {
		set[cluster] = struct{}{}
		if _, ok := r.topicQueueTable[wire.ReplyTopic(cluster)]; ok {
			set[wire.ReplyTopic(cluster)] = struct{}{}
		}
		for name := range names {
			set[name] = struct{}{}
		}
	}
	for topic := range r.topicQueueTable {
		if wire.SystemTopic(topic) {
			set[topic] = struct{}{}
		}
	}
	return sortedKeys(set)
}

// TopicsBySysFlag lists, sorted, the topics whose topicSysFlag satisfies
// match (the unit topic lists, 311-313). Like RocketMQ it reads the flag
// of one broker's queue data: the first by broker name.
func (r *RouteInfoManager) TopicsBySysFlag(match func(flag int) bool) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := []string{}
	for topic, qds := range r.topicQueueTable {
		var first *wire.QueueData
		for name, qd := range qds {
			if first == nil || name < first.BrokerName {
				first = qd
			}
		}
		if first != nil && match(first.TopicSysFlag) {
			out = append(out, topic)
		}
	}
	sort.Strings(out)
	return out
}

// sortedKeys returns m's keys in order; never nil, so an empty list encodes
// as [] rather than null.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
