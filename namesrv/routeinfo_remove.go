package namesrv

import (
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/wire"
)

// unregistration is one queued removal: an UNREGISTER_BROKER request, or,
// with via set, the removal of a broker whose registration came through
// the connection via, which closed.
type unregistration struct {
	req wire.UnregisterBrokerRequestHeader
	via Channel
}

// UnregisterBrokers removes every listed address under one lock: from the
// live and filter-server tables, from its group, the group from its cluster
// once empty, and the queue data of groups that disappeared.
func (r *RouteInfoManager) UnregisterBrokers(reqs []wire.UnregisterBrokerRequestHeader) {
	batch := make([]unregistration, len(reqs))
	for i, q := range reqs {
		batch[i] = unregistration{req: q}
	}
	r.unregister(batch)
}

// unregister is UnregisterBrokers for queued removals. A closed
// connection's removal is skipped for a broker whose registration now came
// through another connection: it registered again between the close and
// this batch, and dropping it would leave it unrouted until its next
// periodic registration.
func (r *RouteInfoManager) unregister(batch []unregistration) {
	if len(batch) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs := make([]wire.UnregisterBrokerRequestHeader, 0, len(batch))
	for _, u := range batch {
		if u.via != nil {
			if l := r.brokerLiveTable[brokerAddrInfo{u.req.Cluster, u.req.BrokerAddr}]; l != nil && l.channel != u.via {
				r.log.Info("broker registered again since its connection closed; kept",
					zap.String("brokerName", u.req.BrokerName), zap.String("addr", u.req.BrokerAddr))
				continue
			}
		}
		reqs = append(reqs, u.req)
	}
	r.unregisterLocked(reqs)
}

func (r *RouteInfoManager) unregisterLocked(reqs []wire.UnregisterBrokerRequestHeader) {
	removed := make(map[string]struct{})
	for _, q := range reqs {
		key := brokerAddrInfo{q.Cluster, q.BrokerAddr}
		_, wasLive := r.brokerLiveTable[key]
		delete(r.brokerLiveTable, key)
		delete(r.filterServerTable, key)

		bd := r.brokerAddrTable[q.BrokerName]
		if bd == nil {
			r.log.Info("unregister broker: unknown broker name", zap.String("brokerName", q.BrokerName),
				zap.String("addr", q.BrokerAddr), zap.Bool("wasLive", wasLive))
			continue
		}
		for id, addr := range bd.BrokerAddrs {
			if addr == q.BrokerAddr {
				delete(bd.BrokerAddrs, id)
			}
		}
		r.log.Info("broker unregistered", zap.String("cluster", q.Cluster), zap.String("brokerName", q.BrokerName),
			zap.Int64("brokerId", q.BrokerID), zap.String("addr", q.BrokerAddr))
		if len(bd.BrokerAddrs) > 0 {
			continue
		}
		delete(r.brokerAddrTable, q.BrokerName)
		if names := r.clusterAddrTable[q.Cluster]; names != nil {
			delete(names, q.BrokerName)
			if len(names) == 0 {
				delete(r.clusterAddrTable, q.Cluster)
			}
		}
		removed[q.BrokerName] = struct{}{}
	}
	r.dropQueueDataLocked(removed)
}

// dropQueueDataLocked removes the queue data of the groups named, and each
// topic left with none.
func (r *RouteInfoManager) dropQueueDataLocked(names map[string]struct{}) {
	if len(names) == 0 {
		return
	}
	for topic, qds := range r.topicQueueTable {
		for name := range names {
			delete(qds, name)
		}
		if len(qds) == 0 {
			delete(r.topicQueueTable, topic)
		}
	}
}

// RemoveBroker drops one member of a group at once, e.g. when gossip reports
// it dead, instead of waiting for the heartbeat expiry. It reports whether
// the member was registered.
func (r *RouteInfoManager) RemoveBroker(cluster, brokerName string, brokerID int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	bd := r.brokerAddrTable[brokerName]
	if bd == nil || bd.Cluster != cluster {
		return false
	}
	addr, ok := bd.BrokerAddrs[brokerID]
	if !ok {
		return false
	}
	r.unregisterLocked([]wire.UnregisterBrokerRequestHeader{{Cluster: cluster, BrokerAddr: addr, BrokerName: brokerName, BrokerID: brokerID}})
	return true
}

// RemoveBrokerByAddr drops the broker registered at addr in cluster at once.
func (r *RouteInfoManager) RemoveBrokerByAddr(cluster, addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	req, ok := r.unregisterRequestLocked(brokerAddrInfo{cluster, addr})
	if !ok {
		return false
	}
	r.unregisterLocked([]wire.UnregisterBrokerRequestHeader{req})
	return true
}

// unregisterRequestLocked finds the group and id of an address
// (RocketMQ setupUnRegisterRequest). An address in the live table but no
// longer in any group still yields a request so its live entry goes.
func (r *RouteInfoManager) unregisterRequestLocked(key brokerAddrInfo) (wire.UnregisterBrokerRequestHeader, bool) {
	for _, bd := range r.brokerAddrTable {
		if bd.Cluster != key.cluster {
			continue
		}
		for id, addr := range bd.BrokerAddrs {
			if addr == key.addr {
				return wire.UnregisterBrokerRequestHeader{Cluster: key.cluster, BrokerAddr: key.addr, BrokerName: bd.BrokerName, BrokerID: id}, true
			}
		}
	}
	if _, ok := r.brokerLiveTable[key]; ok {
		return wire.UnregisterBrokerRequestHeader{Cluster: key.cluster, BrokerAddr: key.addr}, true
	}
	return wire.UnregisterBrokerRequestHeader{}, false
}

// UnregisterRequestsForChannel returns unregister requests for every broker
// address whose registration came through ch (called when a connection
// closes; RocketMQ onChannelDestroy).
func (r *RouteInfoManager) UnregisterRequestsForChannel(ch Channel) []wire.UnregisterBrokerRequestHeader {
	if ch == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []wire.UnregisterBrokerRequestHeader
	for key, l := range r.brokerLiveTable {
		if l.channel == ch {
			if req, ok := r.unregisterRequestLocked(key); ok {
				out = append(out, req)
			}
		}
	}
	return out
}

// ScanNotActiveBrokers removes, in one batch, every broker whose last
// heartbeat is older than its expiry, and the master terms past theirs,
// and returns the channels they registered through so the caller can
// close them outside the lock.
func (r *RouteInfoManager) ScanNotActiveBrokers() []Channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var reqs []wire.UnregisterBrokerRequestHeader
	var chans []Channel
	for key, l := range r.brokerLiveTable {
		if l.lastUpdate.Add(l.timeout).Before(now) {
			r.log.Warn("broker channel expired", zap.String("cluster", key.cluster),
				zap.String("addr", key.addr), zap.Duration("expiry", l.timeout))
			if req, ok := r.unregisterRequestLocked(key); ok {
				reqs = append(reqs, req)
			}
			if l.channel != nil {
				chans = append(chans, l.channel)
			}
		}
	}
	r.unregisterLocked(reqs)
	for gk, mt := range r.masterTerms {
		if !now.Before(mt.until) {
			delete(r.masterTerms, gk)
		}
	}
	return chans
}

// WipeWritePermOfBroker clears the write bit of every topic of brokerName
// (done before taking a broker out of service) and returns how many topics
// it touched. The wipe lasts until AddWritePermOfBroker: queue data the
// group registers meanwhile (a new leader, a topic change, members
// registering again after a restart) is routed read-only too. A name no
// group holds is not remembered.
func (r *RouteInfoManager) WipeWritePermOfBroker(brokerName string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.operateWritePermLocked(brokerName, func(p int) int { return p &^ wire.PermWrite })
	if _, known := r.brokerAddrTable[brokerName]; known || n > 0 {
		r.writeWiped[brokerName] = struct{}{}
	}
	return n
}

// AddWritePermOfBroker ends a wipe and sets every topic of brokerName back
// to read-write (RocketMQ sets perm 6 whatever the topic's was) and
// returns how many topics it touched.
func (r *RouteInfoManager) AddWritePermOfBroker(brokerName string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.writeWiped, brokerName)
	return r.operateWritePermLocked(brokerName, func(int) int { return wire.PermRead | wire.PermWrite })
}

func (r *RouteInfoManager) operateWritePermLocked(brokerName string, f func(int) int) int {
	n := 0
	for _, qds := range r.topicQueueTable {
		if qd := qds[brokerName]; qd != nil {
			qd.Perm = f(qd.Perm)
			n++
		}
	}
	return n
}

// DeleteTopic removes topic entirely, or, with a cluster, only its queues on
// that cluster's brokers.
func (r *RouteInfoManager) DeleteTopic(topic, cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cluster == "" {
		delete(r.topicQueueTable, topic)
		return
	}
	qds := r.topicQueueTable[topic]
	if qds == nil {
		return
	}
	for name := range r.clusterAddrTable[cluster] {
		delete(qds, name)
	}
	if len(qds) == 0 {
		delete(r.topicQueueTable, topic)
	}
}

// RegisterTopic adds or replaces queue data of topic for already registered
// brokers (REGISTER_TOPIC_IN_NAMESRV). Nothing changes if any queue data
// names an unknown broker; the result says whether it was applied.
func (r *RouteInfoManager) RegisterTopic(topic string, qds []wire.QueueData) bool {
	if len(qds) == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, qd := range qds {
		if _, ok := r.brokerAddrTable[qd.BrokerName]; !ok {
			r.log.Warn("register topic names an unknown broker; ignored",
				zap.String("topic", topic), zap.String("brokerName", qd.BrokerName))
			return false
		}
	}
	m := r.topicQueueTable[topic]
	if m == nil {
		m = make(map[string]*wire.QueueData)
		r.topicQueueTable[topic] = m
	}
	for _, qd := range qds {
		c := qd
		if _, wiped := r.writeWiped[qd.BrokerName]; wiped {
			c.Perm &^= wire.PermWrite
		}
		m[qd.BrokerName] = &c
	}
	return true
}
