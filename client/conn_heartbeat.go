package client

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/wire"
)

// Heartbeats on a new connection. A broker drops a client from its
// consumer and producer groups as soon as the client's connection to it
// closes (RocketMQ's doChannelCloseEvent), while the client, redialing on
// its next call (after the remoting client gave up a silent connection, a
// network blip, a broker that closed it), would stay out of the groups
// until its next heartbeat: the other consumers of its group would take
// its queues while it still consumes them, and a transaction producer's
// broker would find no connection to check a transaction back on. So, as
// RocketMQ's MQClientInstance does on onChannelActive (its
// enableHeartbeatChannelEventListener, on by default), a client that
// heartbeats at all sends its heartbeat to a broker member as soon as a
// new connection to that member's address opens, and a consumer
// rebalances at once when the broker took it.

// connHeartbeats heartbeats, on one goroutine (run), the broker members
// whose address the remoting client opened a new connection to (opened,
// its OnConnOpen listener); addresses that are no member (a name server)
// are skipped. A connection a heartbeat dialed carries that heartbeat and
// wants no other, or a broker that closes every connection would be
// heartbeaten without end; one any other call dialed gets one, even while
// a heartbeat to the same member is in flight (it may have gone on the
// connection that closed).
type connHeartbeats struct {
	members func() []brokerMember
	send    func(ctx context.Context, b brokerMember) error
	took    func() // after a round in which a member took a heartbeat; nil for none
	wakeCh  chan struct{}

	mu     sync.Mutex
	opened map[string]bool // guarded by mu; addresses with a new connection to heartbeat
}

func newConnHeartbeats(members func() []brokerMember, send func(context.Context, brokerMember) error, took func()) *connHeartbeats {
	return &connHeartbeats{members: members, send: send, took: took, wakeCh: make(chan struct{}, 1), opened: map[string]bool{}}
}

// heartbeatCallKey marks the context of a HEART_BEAT request
// (sendHeartbeat), so that connOpened knows the connections it dials.
type heartbeatCallKey struct{}

// heartbeatCall marks ctx as a heartbeat's.
func heartbeatCall(ctx context.Context) context.Context {
	return context.WithValue(ctx, heartbeatCallKey{}, true)
}

// connOpened is the remoting client's OnConnOpen listener: it only notes
// the address (it runs on the dialing goroutine, which must not wait),
// unless a heartbeat dialed it.
func (h *connHeartbeats) connOpened(ctx context.Context, addr string) {
	if ctx.Value(heartbeatCallKey{}) != nil {
		return
	}
	h.mu.Lock()
	h.opened[addr] = true
	h.mu.Unlock()
	wake(h.wakeCh)
}

// run heartbeats the members noted by connOpened until ctx ends.
func (h *connHeartbeats) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wakeCh:
		}
		h.mu.Lock()
		opened := h.opened
		h.opened = map[string]bool{}
		h.mu.Unlock()
		took := false
		for _, b := range h.members() {
			if opened[b.addr] && h.send(ctx, b) == nil {
				took = true
			}
		}
		if took && h.took != nil {
			h.took()
		}
	}
}

// startConnHeartbeats makes the consumer heartbeat a member of its
// brokers' groups on every new connection to it, and rebalance when one
// took it (a broker that had dropped the consumer notified the others of
// the group, which rebalanced without it).
func (c *consumerCore) startConnHeartbeats() {
	h := newConnHeartbeats(c.brokerMembers, func(ctx context.Context, b brokerMember) error {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
		defer cancel()
		err := sendHeartbeat(cctx, c.rc, b.name, b.addr, c.heartbeatData())
		if err != nil && ctx.Err() == nil {
			c.log.Debug("heartbeat on a new connection failed", zap.String("broker", b.addr), zap.Error(err))
		}
		return err
	}, c.triggerRebalance)
	c.rc.OnConnOpen(h.connOpened)
	c.goTracked(func() { h.run(c.ctx) })
}

// startConnHeartbeatsLocked makes the producer heartbeat a member of its
// routes' groups on every new connection to it; p.mu is held.
func (p *Producer) startConnHeartbeatsLocked() {
	routes := p.routes
	h := newConnHeartbeats(func() []brokerMember { return routes.members(routes.cachedTopics()) }, func(ctx context.Context, b brokerMember) error {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.common.requestTimeout)
		defer cancel()
		err := sendHeartbeat(cctx, p.rc, b.name, b.addr, p.heartbeatData())
		if err != nil && ctx.Err() == nil {
			p.log.Debug("producer heartbeat on a new connection failed", zap.String("broker", b.addr), zap.Error(err))
		}
		return err
	}, nil)
	p.rc.OnConnOpen(h.connOpened)
	p.wg.Add(1)
	go func() { defer p.wg.Done(); h.run(p.ctx) }()
}

// heartbeatData is the producer's heartbeat: its group under its client
// id.
func (p *Producer) heartbeatData() *wire.HeartbeatData {
	return &wire.HeartbeatData{
		ClientID:        p.clientID,
		ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: p.cfg.group}},
		ConsumerDataSet: []wire.HeartbeatConsumerData{},
	}
}
