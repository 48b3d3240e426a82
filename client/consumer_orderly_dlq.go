package client

import (
	"context"
	"math"
	"strconv"
	"time"

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

// deadLetterOrderly sends a failed orderly batch of pq to the DLQ when
// every message in it has exhausted its redeliveries; it reports whether
// it did, so the batch counts as consumed. A failed send leaves the batch
// to be consumed again after the pause; the messages sent before it are
// not sent again (pq.deadLettered). The caller holds pq.consumeMu.
func (p *PushConsumer) deadLetterOrderly(pq *processQueue, msgs []*MessageExt) bool {
	c := p.core
	limit := c.orderlyMaxReconsumeTimes()
	for _, m := range msgs {
		if int(m.ReconsumeTimes) < limit {
			return false
		}
	}
	for _, m := range msgs {
		if pq.deadLettered[m.QueueOffset] {
			continue
		}
		sctx, cancel := context.WithTimeout(pq.ctx, c.cfg.common.requestTimeout)
		err := p.sendRetry(sctx, retryMessage(m, c.cfg.group, limit))
		cancel()
		if err != nil {
			c.dlqSendFailed(pq, m, err)
			return false
		}
		pq.dlqWarn = dlqWarning{}
		if pq.deadLettered == nil {
			pq.deadLettered = map[int64]bool{}
		}
		pq.deadLettered[m.QueueOffset] = true
		c.log.Warn("orderly message exhausted its redeliveries; moved to the DLQ",
			zap.String("msgId", m.MsgID), zap.String("dlq", wire.DLQGroupTopicPrefix+c.cfg.group), zap.Int32("reconsumeTimes", m.ReconsumeTimes))
	}
	pq.deadLettered = nil
	return true
}

// dlqWarnEvery is how often at most a queue warns that its dead-letter
// sends keep failing: each failure is retried after the queue's pause
// (SuspendCurrentQueueTime, a second by default), and a warning per
// attempt would flood the log while the group cannot store.
const dlqWarnEvery = time.Minute

// dlqWarning is a queue's record of failed dead-letter sends since its
// last warning.
type dlqWarning struct {
	failures int       // failed sends not yet reported
	warnedAt time.Time // zero until the first failure since a send worked
}

// dlqSendFailed records a failed dead-letter send of pq's message m and
// warns on the first failure since a send worked, then at most every
// dlqWarnEvery with the number of failed attempts since the warning
// before; the others are logged at debug level. The caller holds
// pq.consumeMu.
func (c *consumerCore) dlqSendFailed(pq *processQueue, m *MessageExt, err error) {
	w := &pq.dlqWarn
	w.failures++
	now := c.cfg.common.now()
	fields := []zap.Field{zap.Stringer("queue", pq.mq), zap.String("msgId", m.MsgID), zap.Int32("reconsumeTimes", m.ReconsumeTimes),
		zap.Int("failedAttempts", w.failures), zap.Error(err)}
	const msg = "orderly message exhausted its redeliveries but could not be sent to the DLQ; consuming it again"
	if !w.warnedAt.IsZero() && now.Sub(w.warnedAt) < dlqWarnEvery {
		c.log.Debug(msg, fields...)
		return
	}
	c.log.Warn(msg+" (warned at most once a minute per queue; failedAttempts counts those since the last warning)", fields...)
	w.failures, w.warnedAt = 0, now
}

// retryMessage is the copy of m sent to group's retry topic by a consumer
// itself (DefaultMQPushConsumerImpl.sendMessageBack's fallback and the
// orderly sendMessageBack): the original's properties, its msgId
// (UNIQ_KEY) among them, where it came from, RECONSUME_TIME one above m's
// count and the limit the broker compares it with (above it: the DLQ).
// Send it with sendRetry, which keeps that msgId as RocketMQ's clients do
// (a consumer deduplicating by msgId, or a look-up of the dead-lettered
// message by the id it was sent with, needs the same id).
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
	delete(msg.Properties, wire.PropertyTransactionPrep)
	msg.DelayLevel = 3 + int(m.ReconsumeTimes)
	return msg
}

// sendRetry sends a retryMessage to the retry topic with its msgId kept.
func (p *PushConsumer) sendRetry(ctx context.Context, msg *Message) error {
	_, err := p.retry.Resend(ctx, &MessageExt{Message: *msg})
	return err
}
