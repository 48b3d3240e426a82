package client

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// orderlyLoop consumes one queue serially (ConsumeMessageOrderlyService's
// per-queue ConsumeRequest): one listener call at a time, in offset order,
// only while the broker lock is held in clustering mode; a suspended batch
// is retried after its pause with nothing behind it delivered first.
func (p *PushConsumer) orderlyLoop(pq *processQueue) {
	c := p.core
	for {
		select {
		case <-pq.ctx.Done():
			return
		case <-pq.kick:
		}
		for pq.ctx.Err() == nil {
			if c.cfg.model == Clustering && !pq.isLocked(c.cfg.common.now(), lockMaxLiveTime) {
				// Lost or expired lock: try to get it back before going on
				// (tryLockLaterAndReconsume).
				granted, err := c.lock(pq.ctx, pq.mq.BrokerName, []MessageQueue{pq.mq})
				if err == nil && granted[pq.mq] {
					pq.setLocked(true, c.cfg.common.now())
					continue
				}
				if !wait(pq.ctx, c.cfg.lockRetryDelay) {
					return
				}
				continue
			}
			suspend, more := p.consumeOrderlyOnce(pq)
			if !more {
				break
			}
			if suspend > 0 && !wait(pq.ctx, suspend) {
				return
			}
		}
	}
}

// consumeOrderlyOnce runs the listener on the next batch under the
// queue's consume lock; more is false when nothing was left.
func (p *PushConsumer) consumeOrderlyOnce(pq *processQueue) (suspend time.Duration, more bool) {
	c := p.core
	pq.consumeMu.Lock()
	defer pq.consumeMu.Unlock()
	if pq.dropped.Load() {
		return 0, false
	}
	msgs := pq.take(c.cfg.batchMaxSize)
	if len(msgs) == 0 {
		return 0, false
	}
	oc := &ConsumeOrderlyContext{Queue: pq.mq, SuspendTime: c.cfg.suspendCurrentTime}
	res := p.callOrderly(pq.ctx, oc, msgs)
	if !pq.beginSettle() {
		// A reset or restart gave up waiting for this call and moved the
		// queue's offset: what it would commit must not undo that.
		c.log.Info("orderly listener returned after its queue restarted at a new offset; result discarded",
			zap.Stringer("queue", pq.mq), zap.Int64("firstOffset", msgs[0].QueueOffset))
		return 0, false
	}
	defer pq.endSettle()
	if res == OrderlySuccess || p.deadLetterOrderly(pq, msgs) {
		pq.deadLettered = nil
		if off := pq.commitConsuming(); off >= 0 {
			c.store.Update(pq.mq, off, false)
		}
		return 0, true
	}
	for _, m := range msgs {
		m.ReconsumeTimes++
	}
	pq.requeueConsuming()
	return max(oc.SuspendTime, time.Millisecond), true
}

// callOrderly runs the listener; a panic suspends the queue.
func (p *PushConsumer) callOrderly(ctx context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) (res OrderlyResult) {
	if st := p.tracer.subBefore(p.core.cfg.group, msgs); st != nil {
		defer func() { st.after(p.core.cfg.group, res == OrderlySuccess) }()
	}
	defer func() {
		if v := recover(); v != nil {
			p.core.log.Error("orderly listener panicked; the batch will be consumed again", zap.Any("panic", v), zap.Stringer("queue", oc.Queue))
			res = SuspendCurrentQueueAMoment
		}
	}()
	return p.orderly(ctx, oc, msgs)
}
