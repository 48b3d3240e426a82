package client

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
)

// timeoutScanMax is how many of a queue's lowest offsets one consume
// timeout round looks at (ProcessQueue.cleanExpiredMsg's 16).
const timeoutScanMax = 16

// timeoutDelayLevel is the delay level of a timed-out message's
// send-back, RocketMQ's (cleanExpiredMsg: sendMessageBack(msg, 3)).
const timeoutDelayLevel = 3

// timeoutLoop runs a consume timeout round every ConsumeTimeout
// (ConsumeMessageConcurrentlyService's cleanExpireMsg schedule).
func (p *PushConsumer) timeoutLoop() {
	every(p.core.ctx, p.core.cfg.consumeTimeout, nil, p.timeoutRound)
}

// timeoutRound lets go of the messages whose concurrent listener call
// began more than ConsumeTimeout ago, in every owned queue.
func (p *PushConsumer) timeoutRound(ctx context.Context) {
	c := p.core
	c.mu.Lock()
	pqs := slices.Collect(maps.Values(c.pqs))
	c.mu.Unlock()
	deadline := c.cfg.common.now().Add(-c.cfg.consumeTimeout)
	for _, pq := range pqs {
		p.timeOutQueue(ctx, pq, deadline)
	}
}

// timeOutQueue sends back, lowest offset first, the messages of pq whose
// listener call began before deadline, and lets go of each one sent back
// so that the queue's offset moves past it (ProcessQueue.cleanExpiredMsg);
// a broadcasting consumer, which never redelivers, lets go of it as of a
// failed message. It stops at the first message not timed out, and at a
// send-back that failed: that message stays held, the offset before it;
// its call settles it if it returns first (unclaim), else the next round
// tries again.
//
// It settles as a listener call does, holding pq.consumeMu for reading:
// a hand-over or reset waiting for the queue's calls waits for it too
// (its send-backs share one request timeout), and one that gave up
// (pq.abandon) has it settle nothing. TryRLock, for RLock would wait
// behind such a writer, itself waiting for the stuck call.
func (p *PushConsumer) timeOutQueue(ctx context.Context, pq *processQueue, deadline time.Time) {
	c := p.core
	if !pq.consumeMu.TryRLock() {
		return
	}
	defer pq.consumeMu.RUnlock()
	if pq.dropped.Load() || !pq.beginSettle() {
		return
	}
	defer pq.endSettle()
	sctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
	defer cancel()
	for range timeoutScanMax {
		m := pq.claimTimedOut(deadline)
		if m == nil {
			return
		}
		if c.cfg.model == Broadcasting {
			c.log.Warn("listener call past ConsumeTimeout; broadcast message let go without redelivery (broadcasting does not redeliver)",
				zap.Stringer("queue", pq.mq), zap.Int64("offset", m.QueueOffset), zap.String("msgId", m.MsgID))
		} else {
			if err := p.sendBack(sctx, pq.mq, m, timeoutDelayLevel); err != nil {
				pq.unclaim(m)
				c.log.Warn("listener call past ConsumeTimeout and its message's send-back failed; the message stays held, trying again in ConsumeTimeout",
					zap.Stringer("queue", pq.mq), zap.Int64("offset", m.QueueOffset), zap.String("msgId", m.MsgID), zap.Error(err))
				return
			}
			c.log.Warn("listener call past ConsumeTimeout; message sent back for redelivery, the call's result will be ignored",
				zap.Stringer("queue", pq.mq), zap.Int64("offset", m.QueueOffset), zap.String("msgId", m.MsgID),
				zap.Duration("consumeTimeout", c.cfg.consumeTimeout))
		}
		if off := pq.remove([]*MessageExt{m}); off >= 0 {
			c.store.Update(pq.mq, off, true)
		}
	}
}
