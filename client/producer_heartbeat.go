package client

import (
	"context"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Producer heartbeats. A producer that only sends needs none: brokers
// store its messages without knowing it. Two features need the brokers to
// know it, as RocketMQ's producers always are: request-reply (a broker
// pushes a reply to the connection the requester's heartbeat registered)
// and transactions (a broker checks back an undecided half on a
// connection of a producer of its group). Both track topics here; the
// producer then heartbeats, as its producer group under its one client
// id, every member of every broker group routing a tracked topic (a
// follower that becomes leader already knows it), at once when a topic is
// new or a route shows a group with other members, on a new connection to
// a member (conn_heartbeat.go), and every TransactionHeartbeatInterval
// after.

// TransactionHeartbeatInterval is how often a producer that needs its
// brokers to know it (a TransactionProducer, a requester) heartbeats every
// member of its brokers' groups (RocketMQ's heartbeatBrokerInterval):
// brokers drop a producer silent for their channelExpiredTimeout (120 s).
const TransactionHeartbeatInterval = 30 * time.Second

// producerHeartbeats is a Producer's heartbeat state, built by the first
// trackHeartbeat.
type producerHeartbeats struct {
	now chan struct{} // wakes the loop for a new topic

	mu     sync.Mutex
	topics map[string]bool // guarded by mu; topics whose brokers get heartbeats
}

// newClientID makes a client id as RocketMQ's ClientConfig.buildMQClientId
// does: ip@instance. With the default instance name it adds the pid and
// the clock (changeInstanceNameToPID, + nanoTime in 5.x): two clients of
// one process must not share an id, or a broker would count them as one.
func newClientID(ip net.IP, instance string) string {
	if instance == "DEFAULT" {
		instance = strconv.Itoa(os.Getpid()) + "#" + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	if ip == nil {
		ip = localIPv4()
	}
	return ip.String() + "@" + instance
}

// ClientID is the id this producer gives brokers when it heartbeats, which
// replies to its requests are addressed to (REPLY_TO_CLIENT).
func (p *Producer) ClientID() string { return p.clientID }

// trackHeartbeat makes the brokers of topics know the producer: it starts
// the heartbeat loop on first use and reports whether a topic was new (the
// caller then heartbeats at once, or lets the loop do it).
func (p *Producer) trackHeartbeat(topics ...string) (added bool, err error) {
	p.mu.Lock()
	if err := p.runningLocked(); err != nil {
		p.mu.Unlock()
		return false, err
	}
	hb := p.hb
	if hb == nil {
		hb = &producerHeartbeats{now: make(chan struct{}, 1), topics: map[string]bool{}}
		p.hb = hb
		p.wg.Add(1)
		go func() { defer p.wg.Done(); every(p.ctx, TransactionHeartbeatInterval, hb.now, p.sendHeartbeats) }()
		p.startConnHeartbeatsLocked(hb)
	}
	p.mu.Unlock()
	hb.mu.Lock()
	for _, t := range topics {
		if !hb.topics[t] {
			hb.topics[t], added = true, true
		}
	}
	hb.mu.Unlock()
	return added, nil
}

// heartbeatSoon wakes the heartbeat loop without waiting for it.
func (p *Producer) heartbeatSoon() {
	p.mu.Lock()
	hb := p.hb
	p.mu.Unlock()
	if hb == nil {
		return
	}
	wake(hb.now)
}

// heartbeatMembers lists every member of the broker groups of the tracked
// topics, fetching a route that is not cached.
func (p *Producer) heartbeatMembers(ctx context.Context) []brokerMember {
	p.mu.Lock()
	hb, routes := p.hb, p.routes
	p.mu.Unlock()
	if hb == nil || routes == nil {
		return nil
	}
	topics := hb.tracked()
	for _, topic := range topics {
		if routes.cachedPublishInfo(topic) == nil {
			cctx, cancel := context.WithTimeout(ctx, p.cfg.common.requestTimeout)
			if _, err := routes.publishInfo(cctx, topic, false, 0); err != nil && ctx.Err() == nil {
				p.log.Debug("no route for a heartbeat topic", zap.String("topic", topic), zap.Error(err))
			}
			cancel()
		}
	}
	return routes.members(topics)
}

// tracked lists the topics whose brokers get heartbeats, sorted.
func (hb *producerHeartbeats) tracked() []string {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return slices.Sorted(maps.Keys(hb.topics))
}

// sendHeartbeats sends HEART_BEAT with the producer group to every member
// of the tracked topics' groups.
func (p *Producer) sendHeartbeats(ctx context.Context) {
	hb := p.heartbeatData()
	for _, b := range p.heartbeatMembers(ctx) {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.common.requestTimeout)
		err := sendHeartbeat(cctx, p.rc, b.name, b.addr, hb)
		cancel()
		if err != nil && ctx.Err() == nil {
			p.log.Debug("producer heartbeat failed", zap.String("broker", b.addr), zap.Error(err))
		}
	}
}

// unregisterHeartbeats tells every member the producer is gone
// (UNREGISTER_CLIENT), so the brokers stop choosing its connection.
func (p *Producer) unregisterHeartbeats(ctx context.Context) {
	h := &wire.UnregisterClientRequestHeader{ClientID: p.clientID, ProducerGroup: p.cfg.group}
	for _, b := range p.heartbeatMembers(ctx) {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.common.requestTimeout)
		_, _ = invokeOK(cctx, p.rc, b.name, b.addr, remoting.NewRequest(remoting.RequestUnregisterClient, h, nil))
		cancel()
	}
}

// members lists every member of every group routing one of topics
// (cached routes), plus each group's learned leader.
func (r *routeManager) members(topics []string) []brokerMember {
	seen := map[string]bool{}
	var out []brokerMember
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, topic := range topics {
		tr := r.topics[topic]
		if tr == nil {
			continue
		}
		for _, bd := range tr.data.BrokerDatas {
			addrs := slices.Collect(maps.Values(bd.BrokerAddrs))
			if g := r.brokers[bd.BrokerName]; g != nil && g.leader != "" {
				addrs = append(addrs, g.leader)
			}
			slices.Sort(addrs)
			for _, a := range addrs {
				if !seen[a] {
					seen[a] = true
					out = append(out, brokerMember{bd.BrokerName, a})
				}
			}
		}
	}
	return out
}
