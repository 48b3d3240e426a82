package broker

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// CONSUMER_SEND_MSG_BACK (36): a consumer failed a message; it goes to
// %RETRY%<group> with delay level 3+reconsumeTimes (RocketMQ's 10 s, 30 s,
// 1 m, …) or, past maxReconsumeTimes, to %DLQ%<group>
// (RocketMQ AbstractSendMessageProcessor.consumerSendMsgBack).

func (c *Controller) processSendBack(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.ConsumerSendMsgBackRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	if !c.rep.IsLeader() {
		return c.notLeader(), nil
	}
	if r := checkGroup(h.Group); r != nil {
		return r, nil
	}
	if r := c.uncreatedGroup(h.Group); r != nil {
		return r, nil
	}
	sg, ok := c.rep.State().SubscriptionGroup(h.Group)
	if !ok {
		sg = c.defaultSubscriptionGroup(h.Group)
	}
	// RocketMQ refuses a send-back, to the DLQ too, once the retry topic
	// is not writable (updateTopicPerm); one that does not exist yet is
	// created writable below.
	if tc, ok := c.rep.State().Topic(wire.RetryTopic(h.Group)); ok && tc.Perm&wire.PermWrite == 0 {
		return response(remoting.ResponseNoPermission, "the topic[%s] sending message is forbidden: perm %d has no write bit on broker %s",
			tc.TopicName, tc.Perm, c.cfg.BrokerName), nil
	}
	orig, err := c.st.LookMessageByOffset(h.Offset)
	if err != nil {
		return response(remoting.ResponseSystemError, "look message by offset %d failed: %v", h.Offset, err), nil
	}
	if r := c.aclStoredMessage(conn, req, orig); r != nil {
		return r, nil
	}
	// Only a message a consumer could have received goes back: copied into
	// the retry topic, a half (undecided or rolled back), an op record or
	// a delayed or timed message not yet due would be delivered though
	// its transaction or its time never let it through, and one with the
	// prepared or rollback sysFlag would be acknowledged yet never
	// delivered (the copy keeps the flag, which gets no ConsumeQueue unit).
	if isSystemTopic(orig.Topic) {
		return response(remoting.ResponseNoPermission,
			"the message at commit log offset %d is in the broker's own topic %s (a transaction half or op record, or a delayed or timed message not yet due), not one a consumer received: it is not sent back",
			h.Offset, orig.Topic), nil
	}
	if uncommittedTransaction(orig.SysFlag) {
		return response(remoting.ResponseNoPermission,
			"the message at commit log offset %d is a transaction message never committed (sysFlag %#x), not one a consumer received: it is not sent back",
			h.Offset, orig.SysFlag), nil
	}
	// Bytes inside another message's body can read as a message of any
	// topic; sent back, they would reach the group as a message of that
	// topic nobody published there.
	if _, _, refusal := c.storedUnit(orig.Topic, orig.QueueID, h.Offset); refusal != nil {
		return refusal, nil
	}
	m := &store.Message{
		Topic: wire.RetryGroupTopicPrefix + h.Group, Flag: orig.Flag, Body: orig.Body,
		Properties: copyProps(orig.Properties), SysFlag: orig.SysFlag &^ (wire.SysFlagBornHostV6 | wire.SysFlagStoreHostV6),
		BornTimestamp: orig.BornTimestamp, BornHost: orig.BornHost, StoreHost: c.storeHost,
		ReconsumeTimes: orig.ReconsumeTimes + 1,
	}
	if m.Properties[wire.PropertyRetryTopic] == "" {
		m.Properties[wire.PropertyRetryTopic] = orig.Topic
	}
	originID := h.OriginMsgID
	if originID == "" {
		originID = orig.MsgID()
	}
	m.Properties[wire.PropertyOriginMessageID] = originID
	delete(m.Properties, wire.PropertyDelayTimeLevel)
	delete(m.Properties, wire.PropertyCRC32)
	dropIdempotence(m.Properties)

	// The consumer's limit, when the header has one, wins over the
	// group's, 0 (no redelivery) included, as in RocketMQ.
	maxTimes := sg.RetryMaxTimes
	if _, ok := req.ExtValue("maxReconsumeTimes"); ok {
		maxTimes = h.MaxReconsumeTimes
	}
	if orig.ReconsumeTimes >= maxTimes || h.DelayLevel < 0 {
		m.Topic, m.QueueID = wire.DLQGroupTopicPrefix+h.Group, 0
		if _, err := c.ensureTopic(ctx, m.Topic, 1, 0, true); err != nil {
			return c.writeError("create DLQ topic", err), nil
		}
	} else {
		n := max(sg.RetryQueueNums, 1)
		tc, err := c.ensureTopic(ctx, m.Topic, int(n), 0, true)
		if err != nil {
			return c.writeError("create retry topic", err), nil
		}
		m.QueueID = rand.Int32N(int32(max(queueCount(tc.WriteQueueNums), 1)))
		level := h.DelayLevel
		if level == 0 {
			level = 3 + orig.ReconsumeTimes
		}
		m.Properties[wire.PropertyDelayTimeLevel] = strconv.Itoa(int(level))
		if r := c.applyDelay(ctx, m); r != nil {
			return r, nil
		}
	}
	wctx, cancel := c.writeCtx(ctx)
	defer cancel()
	if _, err := c.rep.PutMessages(wctx, []*store.Message{m}); err != nil {
		return c.writeError("send back", err), nil
	}
	c.stats.sentBack(h.Group, orig.Topic)
	return success(), nil
}

// handleRetryTopicSend is the path of clients that, when send-back
// fails, send the message to %RETRY%<group> themselves: past the retry
// limit it goes to the DLQ instead (RocketMQ handleRetryAndDLQ). hasMax
// says the header carries maxReconsumeTimes: that limit then wins over
// the group's, 0 included.
func (c *Controller) handleRetryTopicSend(ctx context.Context, m *store.Message, h *wire.SendMessageRequestHeader, hasMax bool) *remoting.RemotingCommand {
	group := strings.TrimPrefix(h.Topic, wire.RetryGroupTopicPrefix)
	dropIdempotence(m.Properties)
	maxTimes := int32(c.live().MaxReconsumeTimes)
	if sg, ok := c.rep.State().SubscriptionGroup(group); ok {
		maxTimes = sg.RetryMaxTimes
	}
	if hasMax {
		maxTimes = h.MaxReconsumeTimes
	}
	if h.ReconsumeTimes < maxTimes {
		return nil
	}
	m.Topic, m.QueueID = wire.DLQGroupTopicPrefix+group, 0
	delete(m.Properties, wire.PropertyDelayTimeLevel)
	if _, err := c.ensureTopic(ctx, m.Topic, 1, 0, true); err != nil {
		return c.writeError("create DLQ topic", err)
	}
	return nil
}

// dropIdempotence removes an idempotent producer's id and sequence from a
// message sent back: they are the original send's, numbered per real
// queue, so in the one retry or DLQ stream of a group the messages of two
// queues (or an old one behind a newer) would be taken for retries of each
// other and dropped while the send-back is answered with success.
func dropIdempotence(props map[string]string) {
	delete(props, wire.PropertyProducerID)
	delete(props, wire.PropertySequence)
}

func copyProps(p map[string]string) map[string]string {
	out := make(map[string]string, len(p)+3)
	for k, v := range p {
		out[k] = v
	}
	return out
}
