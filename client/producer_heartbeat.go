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

// Producer heartbeats. Every producer heartbeats, as its producer group
// under its one client id, the leader of every broker group routing a
// topic whose route it holds (the topics it sent to or looked up, as
// RocketMQ's MQClientInstance heartbeats brokerId 0 of every broker of its
// brokerAddrTable when it runs no consumer): brokers then list it
// (GET_PRODUCER_CONNECTION_LIST, admin producerConnection, the dashboard's
// producer view). It does so every ProducerHeartbeatInterval, at once when
// a route shows a group with other members (a new topic's groups among
// them), and on a new connection to a member (conn_heartbeat.go), which is
// how a new leader learns of it: through the producer's next send. The
// send path adds nothing: a topic's route is fetched once, and the
// heartbeats read the route cache. Two features need more: request-reply
// (a broker pushes a reply to the connection the requester's heartbeat
// registered) and transactions (a broker checks back an undecided half on
// a connection of a producer of its group) track the topics whose brokers
// must know the producer before a request or a check-back, fetching their
// routes and heartbeating every member of their groups at once, so that a
// follower that becomes leader already knows it.

// ProducerHeartbeatInterval is how often a producer heartbeats every
// member of its brokers' groups (RocketMQ's heartbeatBrokerInterval):
// brokers drop a producer silent for their channelExpiredTimeout (120 s).
const ProducerHeartbeatInterval = 30 * time.Second

// producerHeartbeats is a Producer's heartbeat state, built by Start.
type producerHeartbeats struct {
	now chan struct{} // wakes the loop

	mu     sync.Mutex
	topics map[string]bool // guarded by mu; topics whose routes the heartbeats fetch
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

// trackHeartbeat makes the brokers of topics know the producer even
// before it holds their routes, and reports whether a topic was new (the
// caller then heartbeats at once, or lets the loop do it).
func (p *Producer) trackHeartbeat(topics ...string) (added bool, err error) {
	p.mu.Lock()
	err = p.runningLocked()
	hb := p.hb
	p.mu.Unlock()
	if err != nil {
		return false, err
	}
	hb.mu.Lock()
	for _, t := range topics {
		if !hb.topics[t] {
			hb.topics[t], added = true, true
		}
	}
	hb.mu.Unlock()
	return added, nil
}

// startHeartbeatsLocked starts the heartbeat loop and the new-connection
// heartbeats; p.mu is held, by Start.
func (p *Producer) startHeartbeatsLocked() {
	hb := &producerHeartbeats{now: make(chan struct{}, 1), topics: map[string]bool{}}
	p.hb = hb
	p.wg.Add(1)
	go func() { defer p.wg.Done(); every(p.ctx, ProducerHeartbeatInterval, hb.now, p.sendHeartbeats) }()
	p.startConnHeartbeatsLocked()
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

// heartbeatMembers lists every member of the broker groups of the
// tracked topics, fetching a route that is not cached, and the leader of
// the other groups of the cached routes.
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
	out := routes.members(topics)
	seen := map[string]bool{}
	for _, b := range out {
		seen[b.addr] = true
	}
	for _, b := range routes.leaders(routes.cachedTopics()) {
		if !seen[b.addr] {
			seen[b.addr] = true
			out = append(out, b)
		}
	}
	return out
}

// tracked lists the topics whose routes the heartbeats fetch, sorted.
func (hb *producerHeartbeats) tracked() []string {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return slices.Sorted(maps.Keys(hb.topics))
}

// sendHeartbeats sends HEART_BEAT with the producer group to the members
// heartbeatMembers lists.
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

// leaders lists the address each group routing one of topics (cached
// routes) sends to (brokerAddr).
func (r *routeManager) leaders(topics []string) []brokerMember {
	var names []string
	r.mu.Lock()
	for _, topic := range topics {
		if tr := r.topics[topic]; tr != nil {
			for _, bd := range tr.data.BrokerDatas {
				names = append(names, bd.BrokerName)
			}
		}
	}
	r.mu.Unlock()
	slices.Sort(names)
	var out []brokerMember
	for _, name := range slices.Compact(names) {
		if a := r.brokerAddr(name); a != "" {
			out = append(out, brokerMember{name, a})
		}
	}
	return out
}
