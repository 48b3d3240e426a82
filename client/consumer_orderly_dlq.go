package client

import (
	"context"
	"math"
	"strconv"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/wire"
)

// Orderly dead letters (ConsumeMessageOrderlyService.checkReconsumeTimes
// and sendMessageBack). An orderly listener's failed batch is consumed
// again in place, after its pause, so nothing behind it overtakes it; a
// message that keeps failing would block its queue for ever. Once a
// batch's messages have been redelivered MaxReconsumeTimes times, they are
// sent to the group's retry topic with RECONSUME_TIME above
// MAX_RECONSUME_TIMES, which makes the broker store them in %DLQ%group
// instead (its retry-topic send path, as RocketMQ's handleRetryAndDLQ),
// and the queue moves on past them. As in RocketMQ, an orderly consumer
// left at the default MaxReconsumeTimes (-1) never dead-letters.
//
// RocketMQ checks each message of a batch and, when any of them is still
// to be retried, puts the whole batch back, dead-lettered ones included
// (which are then dead-lettered again on the next failure). Here a batch
// is dead-lettered whole, once every one of its messages has exhausted
// its redeliveries: nothing reaches the DLQ twice, and with the default
// batch size of one it is the same rule.

// orderlyMaxReconsumeTimes is the orderly redelivery limit: -1 means
// unlimited (RocketMQ's Integer.MAX_VALUE).
func (c *consumerCore) orderlyMaxReconsumeTimes() int {
	if c.cfg.maxReconsumeTimes < 0 {
		return math.MaxInt32
	}
	return c.cfg.maxReconsumeTimes
}

// deadLetterOrderly sends a failed orderly batch to the DLQ when every
// message in it has exhausted its redeliveries; it reports whether it
// did, so the batch counts as consumed. A failed send leaves the batch to
// be consumed again after the pause.
func (p *PushConsumer) deadLetterOrderly(ctx context.Context, msgs []*MessageExt) bool {
	c := p.core
	limit := c.orderlyMaxReconsumeTimes()
	for _, m := range msgs {
		if int(m.ReconsumeTimes) < limit {
			return false
		}
	}
	for _, m := range msgs {
		sctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
		_, err := p.retry.SendSync(sctx, retryMessage(m, c.cfg.group, limit))
		cancel()
		if err != nil {
			c.log.Warn("orderly message exhausted its redeliveries but could not be sent to the DLQ; consuming it again",
				zap.String("msgId", m.MsgID), zap.Int32("reconsumeTimes", m.ReconsumeTimes), zap.Error(err))
			return false
		}
		c.log.Warn("orderly message exhausted its redeliveries; moved to the DLQ",
			zap.String("msgId", m.MsgID), zap.String("dlq", wire.DLQGroupTopicPrefix+c.cfg.group), zap.Int32("reconsumeTimes", m.ReconsumeTimes))
	}
	return true
}

// retryMessage is the copy of m sent to group's retry topic by a consumer
// itself (DefaultMQPushConsumerImpl.sendMessageBack's fallback and the
// orderly sendMessageBack): the original's properties, where it came from,
// RECONSUME_TIME one above m's count and the limit the broker compares it
// with (above it: the DLQ).
func retryMessage(m *MessageExt, group string, maxTimes int) *Message {
	msg := NewMessage(wire.RetryTopic(group), m.Body)
	msg.Flag = m.Flag
	msg.Properties = make(map[string]string, len(m.Properties)+4)
	for k, v := range m.Properties {
		msg.Properties[k] = v
	}
	if msg.Properties[wire.PropertyRetryTopic] == "" {
		msg.Properties[wire.PropertyRetryTopic] = m.Topic
	}
	if msg.Properties[wire.PropertyOriginMessageID] == "" {
		msg.Properties[wire.PropertyOriginMessageID] = m.MsgID
	}
	msg.Properties[wire.PropertyReconsumeTime] = strconv.Itoa(int(m.ReconsumeTimes) + 1)
	msg.Properties[wire.PropertyMaxReconsumeTimes] = strconv.Itoa(maxTimes)
	delete(msg.Properties, wire.PropertyUniqKey)
	delete(msg.Properties, wire.PropertyTransactionPrep)
	msg.DelayLevel = 3 + int(m.ReconsumeTimes)
	return msg
}
