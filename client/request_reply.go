package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Request-reply (RocketMQ 4.6+). Producer.Request sends a request message
// carrying a correlation id, the producer's client id (REPLY_TO_CLIENT)
// and its timeout (TTL, milliseconds as the Java client sends it); the
// broker that stores it adds its cluster (CLUSTER). A consumer answers
// with Producer.Reply (or NewReplyMessage and a send), which goes to the
// cluster's reply topic with SEND_REPLY_MESSAGE_V2; the broker receiving
// it pushes it (PUSH_REPLY_MESSAGE_TO_CLIENT) to the requester's
// connection, found by its client id in the producer table that
// heartbeats fill.
//
// So a requesting producer must be known to whichever broker group takes
// the reply. Once it sends a request, the producer heartbeats
// (producer_heartbeat.go) every member of every group routing the request
// topic and the reply topic of each cluster those groups belong to. Reply
// prefers the reply-topic queue of the group that stored the request (the
// requester just sent there), and falls back to any other group on
// failure, where a broker that does not know the requester answers
// SYSTEM_ERROR.

// ErrRequestTimeout is returned by Request when no reply came in time.
var ErrRequestTimeout = errors.New("client: request timed out waiting for the reply")

// requester is a Producer's request-reply state, built by its first
// Request.
type requester struct {
	mu      sync.Mutex
	waiting map[string]chan *MessageExt // guarded by mu; by correlation id
	topics  map[string]bool             // guarded by mu; request topics whose groups know the producer
}

// requesterState returns the request-reply state, starting it (the
// PUSH_REPLY_MESSAGE_TO_CLIENT handler) on first use.
func (p *Producer) requesterState() (*requester, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.runningLocked(); err != nil {
		return nil, err
	}
	if p.req != nil {
		return p.req, nil
	}
	rq := &requester{waiting: map[string]chan *MessageExt{}, topics: map[string]bool{}}
	p.req = rq
	p.rc.RegisterProcessor(remoting.RequestPushReplyMessageToClient, func(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return p.pushReplyHandler(rq, conn, req), nil
	})
	return rq, nil
}

// Request sends msg as a request and waits up to timeout (and ctx) for the
// reply, which it returns. msg is not modified: the request properties go
// on a copy. The send itself is SendSync's (retries, leader following); a
// failed send is returned as SendSync returns it, no reply in time as
// ErrRequestTimeout; a Close while it waits ends the wait with ErrClosed.
func (p *Producer) Request(ctx context.Context, msg *Message, timeout time.Duration) (*MessageExt, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: request timeout %v", ErrInvalidMessage, timeout)
	}
	// Checked before the copy below and before the route of its topic is
	// fetched; the send checks the copy again.
	if err := msg.validate(p.cfg.maxMessageSize); err != nil {
		return nil, err
	}
	if msg.half() {
		return nil, errHalfOutsideTransaction(msg)
	}
	rq, err := p.requesterState()
	if err != nil {
		return nil, err
	}
	// Close ends the wait: the reply would come on a connection Close
	// closes.
	closed := p.baseContext().Done()
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	req := *msg
	req.Properties = make(map[string]string, len(msg.Properties)+3)
	maps.Copy(req.Properties, msg.Properties)
	corr := newCorrelationID()
	req.Properties[wire.PropertyCorrelationID] = corr
	req.Properties[wire.PropertyReplyToClient] = p.clientID
	req.Properties[wire.PropertyMessageTTL] = strconv.FormatInt(timeout.Milliseconds(), 10)

	if err := p.trackRequestTopic(ctx, rq, msg.Topic); err != nil {
		return nil, err
	}
	ch := make(chan *MessageExt, 1)
	rq.mu.Lock()
	rq.waiting[corr] = ch
	rq.mu.Unlock()
	defer func() {
		rq.mu.Lock()
		delete(rq.waiting, corr)
		rq.mu.Unlock()
	}()
	if _, err := p.SendSync(ctx, &req); err != nil {
		return nil, err
	}
	return awaitReply(ctx, ch, closed, func() error {
		if time.Now().Before(deadline) {
			return ctx.Err()
		}
		return fmt.Errorf("%w: topic %s, correlation id %s, after %v", ErrRequestTimeout, msg.Topic, corr, timeout)
	})
}

// awaitReply waits for the reply on ch until closed is closed (ErrClosed)
// or ctx ends (ended's error). A reply already there is the answer even
// when the wait ended at the same moment: select picks among ready cases
// at random.
func awaitReply(ctx context.Context, ch <-chan *MessageExt, closed <-chan struct{}, ended func() error) (*MessageExt, error) {
	select {
	case reply := <-ch:
		return reply, nil
	case <-closed:
	case <-ctx.Done():
	}
	select {
	case reply := <-ch:
		return reply, nil
	default:
	}
	select {
	case <-closed:
		return nil, fmt.Errorf("client: Request: waiting for the reply: %w", ErrClosed)
	default:
		return nil, ended()
	}
}

// trackRequestTopic makes sure every member of the groups that may take
// a reply to a request on topic has this producer's heartbeat before the
// request is sent: the groups of topic's route and of the reply topic of
// each of their clusters (RocketMQ's prepareSendRequest heartbeats the
// request topic's brokers when it first meets the topic).
func (p *Producer) trackRequestTopic(ctx context.Context, rq *requester, topic string) error {
	rq.mu.Lock()
	known := rq.topics[topic]
	rq.mu.Unlock()
	if known {
		return nil
	}
	routes, err := p.running()
	if err != nil {
		return err
	}
	if _, err := routes.publishInfo(ctx, topic, p.cfg.autoCreate, p.cfg.defaultTopicQueueNums); err != nil {
		return err
	}
	add := []string{topic}
	for _, cluster := range routes.clusters(topic) {
		rt := wire.ReplyTopic(cluster)
		if _, err := routes.publishInfo(ctx, rt, false, 0); err != nil {
			// A broker without request-reply routes no reply topic;
			// replies can then only come through the request's groups.
			p.log.Debug("no route for the reply topic", zap.String("topic", rt), zap.Error(err))
			continue
		}
		add = append(add, rt)
	}
	if added, err := p.trackHeartbeat(add...); err != nil {
		return err
	} else if added {
		p.sendHeartbeats(ctx)
	}
	rq.mu.Lock()
	rq.topics[topic] = true
	rq.mu.Unlock()
	return nil
}

// pushReplyHandler takes PUSH_REPLY_MESSAGE_TO_CLIENT: it hands the reply
// to the Request waiting for its correlation id. A reply nobody waits for
// (it came after its timeout) is dropped and still acknowledged, as the
// official clients do.
func (p *Producer) pushReplyHandler(rq *requester, conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	m, err := decodePushedReply(req, time.Now())
	if err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error())
	}
	corr := m.Properties[wire.PropertyCorrelationID]
	rq.mu.Lock()
	ch := rq.waiting[corr]
	delete(rq.waiting, corr)
	rq.mu.Unlock()
	if ch == nil {
		p.log.Debug("reply matches no waiting request", zap.String("correlationId", corr), zap.String("broker", conn.RemoteAddr()))
	} else {
		ch <- m
	}
	return remoting.NewResponse(remoting.ResponseSuccess, "")
}

// decodePushedReply builds the reply message of a PUSH_REPLY_MESSAGE_TO_CLIENT
// request (ClientRemotingProcessor.receiveReplyMessage).
func decodePushedReply(req *remoting.RemotingCommand, now time.Time) (*MessageExt, error) {
	var h wire.ReplyMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, fmt.Errorf("bad reply header: %v", err)
	}
	m := &MessageExt{
		QueueID: h.QueueID, SysFlag: h.SysFlag, BornTimestamp: h.BornTimestamp, StoreTimestamp: h.StoreTimestamp,
		BornHost: h.BornHost, StoreHost: h.StoreHost, ReconsumeTimes: h.ReconsumeTimes,
	}
	m.Topic, m.Flag, m.Body = h.Topic, h.Flag, req.Body
	if h.SysFlag&wire.SysFlagCompressed != 0 && len(req.Body) > 0 {
		body, err := inflateBody(req.Body, h.SysFlag, 8*DefaultMaxMessageSize)
		if err != nil {
			return nil, err
		}
		m.Body = body
		m.SysFlag &^= wire.SysFlagCompressed
	}
	m.Properties = wire.DecodeProperties(h.Properties)
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	m.Properties[wire.PropertyReplyArriveTime] = strconv.FormatInt(now.UnixMilli(), 10)
	m.Tags = m.Properties[wire.PropertyTags]
	if keys := m.Properties[wire.PropertyKeys]; keys != "" {
		m.Keys = strings.Fields(keys)
	}
	m.MsgID = m.Properties[wire.PropertyUniqKey]
	return m, nil
}

// NewReplyMessage builds the reply to a request message
// (MessageUtil.createReplyMessage): topic "<cluster>_REPLY_TOPIC" from the
// request's CLUSTER, the request's correlation id, requester and TTL, and
// the reply flag that makes the producer send it with
// SEND_REPLY_MESSAGE_V2. It fails when request carries no CLUSTER (it was
// not sent by Request, or its broker does not support request-reply).
func NewReplyMessage(request *MessageExt, body []byte) (*Message, error) {
	if request == nil {
		return nil, fmt.Errorf("%w: create reply message: nil request", ErrInvalidMessage)
	}
	cluster := request.Properties[wire.PropertyCluster]
	if cluster == "" {
		return nil, fmt.Errorf("%w: create reply message: the request has no %s property (not a request, or its broker does not support request-reply)",
			ErrInvalidMessage, wire.PropertyCluster)
	}
	return &Message{Topic: wire.ReplyTopic(cluster), Body: body, Properties: map[string]string{
		wire.PropertyMessageType:   wire.ReplyMessageFlag,
		wire.PropertyCorrelationID: request.Properties[wire.PropertyCorrelationID],
		wire.PropertyReplyToClient: request.Properties[wire.PropertyReplyToClient],
		wire.PropertyMessageTTL:    request.Properties[wire.PropertyMessageTTL],
	}}, nil
}

// Reply answers request with body: it sends NewReplyMessage's reply
// through the group that stored the request (the requester is connected
// there) and, if that fails, through any group of the reply topic with
// SendSync's retries.
func (p *Producer) Reply(ctx context.Context, request *MessageExt, body []byte) (*SendResult, error) {
	reply, err := NewReplyMessage(request, body)
	if err != nil {
		return nil, err
	}
	routes, err := p.running()
	if err != nil {
		return nil, err
	}
	if _, err := routes.publishInfo(ctx, reply.Topic, false, 0); err != nil {
		return nil, err
	}
	if name := routes.brokerNameOf(reply.Topic, request.StoreHost); name != "" {
		res, err := p.SendWithSelector(ctx, reply, SelectorFunc(func(_ *Message, qs []MessageQueue) (MessageQueue, bool) {
			for _, q := range qs {
				if q.BrokerName == name {
					return q, true
				}
			}
			return MessageQueue{}, false
		}))
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		p.log.Debug("reply through the request's group failed; trying the others", zap.String("broker", name), zap.Error(err))
	}
	return p.SendSync(ctx, reply)
}

// sendCode is the request code of a single message: replies go with
// SEND_REPLY_MESSAGE_V2, everything else with SEND_MESSAGE_V2.
func sendCode(m *Message) int16 {
	if isReply(m) {
		return remoting.RequestSendReplyMessageV2
	}
	return remoting.RequestSendMessageV2
}

// isReply reports whether m is a reply (NewReplyMessage), which never
// shares a batch: a batch goes with SEND_BATCH_MESSAGE.
func isReply(m *Message) bool { return m.Properties[wire.PropertyMessageType] == wire.ReplyMessageFlag }

// newCorrelationID is a random 128-bit id in UUID form, as the clients'
// CorrelationIdUtil makes.
func newCorrelationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// clusters lists the clusters of the groups routing topic (cached route).
func (r *routeManager) clusters(topic string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := r.topics[topic]
	if tr == nil {
		return nil
	}
	var out []string
	for _, bd := range tr.data.BrokerDatas {
		if bd.Cluster != "" && !slices.Contains(out, bd.Cluster) {
			out = append(out, bd.Cluster)
		}
	}
	slices.Sort(out)
	return out
}

// brokerNameOf names the group of topic's route that has addr as a member
// ("" if none).
func (r *routeManager) brokerNameOf(topic, addr string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := r.topics[topic]
	if tr == nil || addr == "" {
		return ""
	}
	for _, bd := range tr.data.BrokerDatas {
		for _, a := range bd.BrokerAddrs {
			if a == addr {
				return bd.BrokerName
			}
		}
	}
	return ""
}
