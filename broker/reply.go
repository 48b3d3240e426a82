package broker

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// SEND_REPLY_MESSAGE (324), SEND_REPLY_MESSAGE_V2 (325) and
// PUSH_REPLY_MESSAGE_TO_CLIENT (326) (RocketMQ ReplyMessageProcessor).
//
// A replier sends its reply to "<cluster>_REPLY_TOPIC"; the broker looks
// up the requester's connection by the reply's REPLY_TO_CLIENT in its
// producer table (as RocketMQ) or else among the connections that carried
// that client's requests to this node (requesterTable), and pushes the
// reply there. The answer says whether the push was taken: SUCCESS, or
// SYSTEM_ERROR with RocketMQ's remarks when the property is missing, the
// requester has no connection to this node ("channel of <id> not found")
// or the push failed — so the replier's producer retries on another
// broker group, where the requester may be connected. With storeReplyMessageEnable (default true) a pushed reply is
// also stored in the reply topic through Raft, as RocketMQ stores it, and
// the answer carries the stored position; a store failure after a
// successful push is logged and answered SUCCESS with msgId "0", as
// RocketMQ does (the reply was delivered). Unlike RocketMQ, a reply whose
// push failed is not stored: the replier retries it elsewhere, and a
// stored copy here would be a duplicate that nobody was pushed.
//
// The reply topic and (with traceTopicEnable) the trace topic are routed
// from the start without a replicated topic entry, like TBW102
// (routedSystemTopics), and created through Raft on their first write.

// replyPushTimeout bounds one PUSH_REPLY_MESSAGE_TO_CLIENT call (the
// requester's client answers at once; RocketMQ's callClient waits up to
// its default invoke timeout).
const replyPushTimeout = 3 * time.Second

// replyTopic is this cluster's reply topic.
func (c *Controller) replyTopic() string { return wire.ReplyTopic(c.cfg.BrokerClusterName) }

// routedSystemTopics are the topics registered with the name servers
// before any message created them: the cluster's reply topic (RocketMQ's
// TopicConfigManager creates it at start, one queue) and, with
// traceTopicEnable, the trace topic (one queue).
func (c *Controller) routedSystemTopics() []wire.TopicConfig {
	one := func(name string) wire.TopicConfig {
		return wire.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1,
			Perm: wire.PermRead | wire.PermWrite, TopicFilterType: "SINGLE_TAG"}
	}
	out := []wire.TopicConfig{one(c.replyTopic())}
	if cfg := c.live(); cfg.TraceTopicEnable && cfg.MsgTraceTopicName != "" {
		out = append(out, one(cfg.MsgTraceTopicName))
	}
	return out
}

// routedSystemTopic reports whether topic is one of routedSystemTopics,
// which a send creates on demand whatever autoCreateTopicEnable says.
func (c *Controller) routedSystemTopic(topic string) bool {
	if topic == c.replyTopic() {
		return true
	}
	cfg := c.live()
	return cfg.TraceTopicEnable && topic == cfg.MsgTraceTopicName
}

// stampRequest adds CLUSTER to a stored request message (one that names
// its requester), which a replier reads to name the reply topic, and
// remembers the connection it came on as its requester's. RocketMQ stamps
// every message; only requests need it, so the others keep their
// properties untouched on the send path.
func (c *Controller) stampRequest(props map[string]string, conn *remoting.Conn) {
	id := props[wire.PropertyReplyToClient]
	if id == "" || props[wire.PropertyMessageType] == wire.ReplyMessageFlag {
		return
	}
	props[wire.PropertyCluster] = c.cfg.BrokerClusterName
	if conn != nil {
		c.reqs.learn(id, conn)
	}
}

// registerReply installs the reply processors on s and drops the
// requesters learned on a connection when it closes.
func (c *Controller) registerReply(s *remoting.Server, workers, queue int) {
	s.Register(remoting.RequestSendReplyMessage, c.instrument(c.processReply), workers, queue)
	s.Register(remoting.RequestSendReplyMessageV2, c.instrument(c.processReply), workers, queue)
	s.OnConnClose(c.reqs.connClosed)
}

// requesterTable maps a requester's client id to the connection its
// latest request came on. RocketMQ finds a requester only in the
// producer table, which heartbeats fill; but the official Go client
// heartbeats a request topic's brokers only on its 30 s timer (its
// prepareSendRequest asks the name server whether the topic has a route,
// which it has, so it skips the heartbeat RocketMQ's Java client sends),
// so its first requests would find no channel. The connection that
// carried the request reaches the requester just as well. Entries go when
// their connection closes; a connection keeps at most
// maxRequestersPerConn ids (a client has one), so a peer inventing ids
// cannot grow the table.
type requesterTable struct {
	mu     sync.Mutex
	conns  map[string]*remoting.Conn   // guarded by mu; by client id
	byConn map[*remoting.Conn][]string // guarded by mu; ids learned per connection, oldest first
}

// maxRequestersPerConn bounds the client ids remembered per connection.
const maxRequestersPerConn = 4

func newRequesterTable() *requesterTable {
	return &requesterTable{conns: map[string]*remoting.Conn{}, byConn: map[*remoting.Conn][]string{}}
}

func (t *requesterTable) learn(id string, conn *remoting.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A request waits in a worker queue while its connection closes: the
	// close's removal (connClosed) has run, or runs after this under mu,
	// so an id learned on a closed connection would never go (closedConn).
	if closedConn(conn) {
		return
	}
	old := t.conns[id]
	if old == conn {
		return
	}
	if old != nil {
		t.forget(old, id)
	}
	ids := t.byConn[conn]
	if len(ids) >= maxRequestersPerConn {
		delete(t.conns, ids[0])
		ids = ids[1:]
	}
	t.conns[id] = conn
	t.byConn[conn] = append(ids, id)
}

// forget removes id from conn's list; mu held.
func (t *requesterTable) forget(conn *remoting.Conn, id string) {
	ids := t.byConn[conn]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(t.byConn, conn)
	} else {
		t.byConn[conn] = ids
	}
}

func (t *requesterTable) find(id string) *remoting.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.conns[id]; c != nil && !c.Closed() {
		return c
	}
	return nil
}

func (t *requesterTable) connClosed(conn *remoting.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range t.byConn[conn] {
		if t.conns[id] == conn {
			delete(t.conns, id)
		}
	}
	delete(t.byConn, conn)
}

// isRequestMessage is the send path's quick test for stampRequest: a
// substring match on the wire properties (a false positive only costs the
// property map).
func isRequestMessage(props string) bool {
	return strings.Contains(props, wire.PropertyReplyToClient+"\x01")
}

// findProducerConn returns the connection of a producer client id in any
// producer group (ProducerManager.findChannel), the most recently
// heartbeating one if the id shows up in several groups.
func (m *clientManager) findProducerConn(clientID string) *remoting.Conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best *clientChannel
	for _, g := range m.producers {
		if ch := channelOf(g, clientID); ch != nil && !ch.Conn.Closed() && (best == nil || ch.LastUpdate.After(best.LastUpdate)) {
			best = ch
		}
	}
	if best == nil {
		return nil
	}
	return best.Conn
}

// processReply handles SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2.
func (c *Controller) processReply(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	as := asSendRequest(req)
	h, err := decodeSendHeader(as)
	if err != nil {
		return headerError(req, err), nil
	}
	if h.Batch {
		return response(remoting.ResponseMessageIllegal, "a reply is one message, not a batch"), nil
	}
	store := c.live().StoreReplyMessageEnable
	if !store {
		if r := checkTopic(h.Topic); r != nil {
			return r, nil
		}
	}
	props := wire.ParseProperties(h.Properties)
	clientID := props[wire.PropertyReplyToClient]
	if clientID == "" {
		return response(remoting.ResponseSystemError, "reply message properties[%s] is null", wire.PropertyReplyToClient), nil
	}
	var stored func() *remoting.RemotingCommand
	queueID := h.QueueID
	if store {
		// Validate (leader, topic, size) and build the stored message
		// before anything is pushed: a refusal then leaves nothing behind.
		sm, resp := c.prepareSend(ctx, conn, as, false)
		if resp != nil {
			return resp, nil
		}
		queueID = sm[0].QueueID
		stored = func() *remoting.RemotingCommand {
			wctx, cancel := c.writeCtx(ctx)
			defer cancel()
			results, err := c.rep.PutMessages(wctx, sm)
			if err != nil {
				c.log.Warn("reply pushed but not stored", zap.String("topic", h.Topic), zap.Error(err))
				return nil
			}
			c.countPut(sm)
			return sendResponse(results)
		}
	}
	if r := c.pushReply(ctx, conn, &h, props, clientID, req.Body); r != nil {
		return r, nil
	}
	if stored != nil {
		if r := stored(); r != nil {
			return r, nil
		}
	}
	// RocketMQ answers msgId "0" when the reply was pushed, not stored
	// ("to avoid client decoding exception").
	return sendResponse([]PutResult{{MsgID: "0", QueueID: max(queueID, 0)}}), nil
}

// pushReply sends PUSH_REPLY_MESSAGE_TO_CLIENT to the requester's
// connection; nil means the client took it.
func (c *Controller) pushReply(ctx context.Context, from *remoting.Conn, h *wire.SendMessageRequestHeader, props map[string]string, clientID string, body []byte) *remoting.RemotingCommand {
	target := c.clients.findProducerConn(clientID)
	if target == nil {
		target = c.reqs.find(clientID)
	}
	if target == nil {
		if ok, held := c.replyWarn.Allow(); ok {
			c.log.Warn("reply for a client not connected here", zap.String("client", clientID), zap.Int64("replyWarningsNotLogged", held))
		}
		return response(remoting.ResponseSystemError, "push reply message fail, channel of <%s> not found.", clientID)
	}
	now := time.Now()
	props[wire.PropertyPushReplyTime] = strconv.FormatInt(now.UnixMilli(), 10)
	ph := &wire.ReplyMessageRequestHeader{
		ProducerGroup: h.ProducerGroup, Topic: h.Topic, DefaultTopic: h.DefaultTopic,
		DefaultTopicQueueNums: h.DefaultTopicQueueNums, QueueID: h.QueueID, SysFlag: h.SysFlag,
		BornTimestamp: h.BornTimestamp, Flag: h.Flag, Properties: wire.EncodeProperties(props),
		ReconsumeTimes: h.ReconsumeTimes, UnitMode: h.UnitMode,
		BornHost: hostPort(bornHost(from)), StoreHost: hostPort(c.storeHost), StoreTimestamp: now.UnixMilli(),
	}
	pctx, cancel := context.WithTimeout(ctx, replyPushTimeout)
	defer cancel()
	resp, err := target.InvokeSync(pctx, remoting.NewRequest(remoting.RequestPushReplyMessageToClient, ph, body))
	if err == nil && resp.Code == remoting.ResponseSuccess {
		return nil
	}
	if ok, held := c.replyWarn.Allow(); ok {
		if err != nil {
			c.log.Warn("push reply failed", zap.String("client", clientID), zap.String("conn", target.RemoteAddr()), zap.Error(err),
				zap.Int64("replyWarningsNotLogged", held))
		} else {
			c.log.Warn("push reply refused", zap.String("client", clientID), zap.Int16("code", resp.Code), zap.String("remark", resp.Remark),
				zap.Int64("replyWarningsNotLogged", held))
		}
	}
	return response(remoting.ResponseSystemError, "push reply message to %s fail.", clientID)
}

// hostPort renders an address as RocketMQ's reply header does: "ip:port",
// IPv4 without brackets.
func hostPort(ap netip.AddrPort) string {
	return ap.Addr().Unmap().String() + ":" + strconv.Itoa(int(ap.Port()))
}
