package client

import (
	"context"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Messages the SDK cannot decode (an unknown compression type, a corrupt
// compressed body, one inflating past the bound). RocketMQ's clients drop
// such a message without a word and go on; here it is neither lost nor
// left to block its queue: a clustering consumer hands it to the group's
// DLQ with CONSUMER_SEND_MSG_BACK at delay level -1, which makes the
// broker copy the stored message, body and sysFlag as they are, into
// %DLQ%group (the way a message past its max reconsume times goes there),
// logs an error naming it, and goes on past it. Until a broker takes it
// the queue does not move past it: the hand-over is retried every
// sendBackRetry (5 s), and warned of once until it works. A broadcasting
// consumer does not redeliver or dead-letter anything: it logs the error
// and goes on (the message stays in its topic).

// settleUndecodable decides what becomes of ue's message, the first of a
// pull of pq's queue, and reports whether the queue may move past it.
func (c *consumerCore) settleUndecodable(pq *processQueue, ue *UndecodableMessageError) bool {
	m := ue.Message
	fields := []zap.Field{zap.String("topic", m.Topic), zap.Stringer("queue", pq.mq), zap.Int64("queueOffset", m.QueueOffset),
		zap.String("msgId", m.MsgID), zap.String("offsetMsgId", m.OffsetMsgID), zap.Int64("commitLogOffset", m.CommitLogOffset),
		zap.Int32("sysFlag", m.SysFlag), zap.Int("storedBodyBytes", len(m.Body)), zap.String("reason", ue.Err.Reason)}
	if c.cfg.model == Broadcasting {
		c.log.Error("message cannot be decoded; skipped (broadcasting neither redelivers nor dead-letters)", fields...)
		return true
	}
	dlq := wire.DLQGroupTopicPrefix + c.cfg.group
	maxTimes := c.cfg.maxReconsumeTimes
	if maxTimes < 0 {
		maxTimes = 16
	}
	key := "undecodable:" + pq.mq.String()
	err := c.onBroker(pq.ctx, pq.mq.BrokerName, func(ctx context.Context, addr string) error {
		h := &wire.ConsumerSendMsgBackRequestHeader{Offset: m.CommitLogOffset, Group: c.cfg.group, DelayLevel: -1,
			OriginMsgID: m.MsgID, OriginTopic: m.Topic, MaxReconsumeTimes: int32(maxTimes), BrokerName: pq.mq.BrokerName}
		_, err := invokeOK(ctx, c.rc, pq.mq.BrokerName, addr, remoting.NewRequest(remoting.RequestConsumerSendMsgBack, h, nil))
		return err
	})
	if err != nil {
		if pq.ctx.Err() == nil {
			c.warnOnce(key, "message cannot be decoded and could not be sent to the DLQ; the queue waits for it and tries again",
				append(fields, zap.String("dlq", dlq), zap.Error(err))...)
		}
		return false
	}
	c.clearWarn(key)
	c.log.Error("message cannot be decoded; sent to the DLQ as stored and skipped", append(fields, zap.String("dlq", dlq))...)
	return true
}
