package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// ConsumeResult is a concurrent listener's verdict on a batch
// (ConsumeConcurrentlyStatus).
type ConsumeResult int

const (
	// ConsumeSuccess: the batch is consumed (up to AckIndex).
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: redeliver the batch later, through the group's
	// retry topic, after the context's DelayLevel.
	ConsumeRetryLater
)

// ConsumeConcurrentlyContext is what a concurrent listener learns about a
// batch and may adjust.
type ConsumeConcurrentlyContext struct {
	// Queue is the queue the batch came from.
	Queue MessageQueue
	// DelayLevel is the redelivery delay level of failed messages: 0 lets
	// the broker pick (3 + reconsume times), -1 sends them straight to the
	// dead-letter queue.
	DelayLevel int
	// AckIndex, on ConsumeSuccess, is the index of the last message
	// consumed; later ones are redelivered. It starts at len(msgs)-1.
	AckIndex int
}

// ConcurrentListener consumes a batch of at most ConsumeMessageBatchMaxSize
// messages; calls run in parallel on the consume pool. ctx is cancelled
// when the queue is handed to another consumer or the consumer closes:
// finish soon. A result returned within HandoverTimeout still counts, and
// the hand-over waits for its send-backs (up to the request timeout) to
// commit an offset that counts them; one returned after the hand-over gave
// up waiting is discarded (no offset committed, no send-back), for the
// queue's next owner consumes the batch again.
type ConcurrentListener func(ctx context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult

// OrderlyResult is an orderly listener's verdict (ConsumeOrderlyStatus).
type OrderlyResult int

const (
	// OrderlySuccess: the batch is consumed; its offset is committed.
	OrderlySuccess OrderlyResult = iota
	// SuspendCurrentQueueAMoment: consume the same batch again after the
	// context's SuspendTime; nothing behind it is delivered meanwhile.
	SuspendCurrentQueueAMoment
)

// ConsumeOrderlyContext is what an orderly listener learns and may adjust.
type ConsumeOrderlyContext struct {
	// Queue is the queue the batch came from.
	Queue MessageQueue
	// SuspendTime is the pause after SuspendCurrentQueueAMoment (default
	// the SuspendCurrentQueueTime option).
	SuspendTime time.Duration
}

// OrderlyListener consumes the messages of one queue strictly in order:
// at most one call per queue at a time, and in clustering mode only while
// this consumer holds the queue's broker lock.
type OrderlyListener func(ctx context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult

// PushConsumer delivers the messages of its subscriptions to a listener
// (RocketMQ's DefaultMQPushConsumer): it long-polls the queues this
// consumer owns, hands messages to the listener, commits offsets and
// redelivers failures. Build it with NewPushConsumer, Subscribe, register
// one listener, Start; Close stops it.
//
// A message it cannot decode (compressed with a type it does not know,
// corrupt, or inflating past the bound) never reaches the listener: it is
// sent to the group's DLQ (%DLQ%group) as stored, an error log names it
// (topic, queue, offset, msgId), and its queue goes on. Until a broker
// takes it into the DLQ the queue does not move past it. A broadcasting
// consumer logs the error and goes on.
type PushConsumer struct {
	core *consumerCore

	mu         sync.Mutex
	state      producerState // guarded by mu
	concurrent ConcurrentListener
	orderly    OrderlyListener

	work     *workQueue // concurrent: batches for the pool
	retry    *Producer  // fallback path of send-back
	tracer   *tracer    // nil unless WithTrace
	workerWG sync.WaitGroup
}

// consumeRequest is one batch for the concurrent pool.
type consumeRequest struct {
	pq   *processQueue
	msgs []*MessageExt
}

// NewPushConsumer validates the options; ConsumerGroup and NameServers are
// required.
func NewPushConsumer(opts ...ConsumerOpt) (*PushConsumer, error) {
	cfg, err := newConsumerConfig(opts)
	if err != nil {
		return nil, err
	}
	p := &PushConsumer{}
	p.core = newConsumerCore(cfg, "pushConsumer", queueHooks{consumeType: wire.ConsumeTypePush, deliver: p.deliver, started: p.queueStarted,
		direct: p.consumeDirectly})
	return p, nil
}

// ClientID is the id this consumer registers with brokers (ip@instance).
func (p *PushConsumer) ClientID() string { return p.core.clientID }

// Subscribe adds topic with a tag expression ("*", "TagA || TagB");
// call it before Start.
func (p *PushConsumer) Subscribe(topic, expression string) error {
	return p.SubscribeSelector(topic, Tags(expression))
}

// SubscribeSelector adds topic with a selector, Tags(expr) or
// SQL92(condition); call it before Start.
func (p *PushConsumer) SubscribeSelector(topic string, sel MessageSelector) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateNew {
		return fmt.Errorf("%w: Subscribe after Start", ErrInvalidOption)
	}
	return p.core.subscribeSelector(topic, sel)
}

// RegisterConcurrentListener sets the listener (before Start).
func (p *PushConsumer) RegisterConcurrentListener(l ConcurrentListener) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateNew || l == nil || p.orderly != nil {
		return fmt.Errorf("%w: one non-nil listener, before Start", ErrInvalidOption)
	}
	p.concurrent = l
	return nil
}

// RegisterOrderlyListener sets an orderly listener (before Start).
func (p *PushConsumer) RegisterOrderlyListener(l OrderlyListener) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateNew || l == nil || p.concurrent != nil {
		return fmt.Errorf("%w: one non-nil listener, before Start", ErrInvalidOption)
	}
	p.orderly = l
	p.core.hooks.orderly = true
	return nil
}

// Start checks the subscriptions' routes, registers with the brokers and
// begins consuming; ctx bounds that work, not the consumer's life. In
// clustering mode the group's retry topic is subscribed too.
func (p *PushConsumer) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case stateStarted:
		return nil
	case stateClosed:
		return ErrClosed
	}
	if p.concurrent == nil && p.orderly == nil {
		return fmt.Errorf("%w: register a listener before Start", ErrInvalidOption)
	}
	c := p.core
	if len(c.topics()) == 0 {
		return fmt.Errorf("%w: no subscription", ErrInvalidOption)
	}
	if c.cfg.model == Clustering {
		if err := c.subscribe(wire.RetryTopic(c.cfg.group), wire.SubAll); err != nil {
			return err
		}
	}
	retry, err := NewProducer(innerProducer(c.cfg.common), ProducerGroup("CLIENT_INNER_PRODUCER"),
		AutoCreateTopic(false, 1), SendTimeout(c.cfg.common.requestTimeout))
	if err != nil {
		return err
	}
	if err := retry.Start(ctx); err != nil {
		return err
	}
	p.retry = retry
	if p.tracer, err = startTracer(ctx, c.cfg.common, c.cfg.group); err != nil {
		_ = retry.Close(context.WithoutCancel(ctx))
		return err
	}
	p.work = newWorkQueue()
	if err := c.start(ctx); err != nil {
		_ = retry.Close(context.WithoutCancel(ctx))
		_ = p.tracer.close(context.WithoutCancel(ctx))
		return err
	}
	if p.concurrent != nil {
		c.goTracked(p.timeoutLoop)
		for range c.cfg.consumeGoroutines {
			p.workerWG.Add(1)
			go c.listeners.run(&p.workerWG, p.worker)
		}
	}
	p.state = stateStarted
	return nil
}

// Close stops pulling, waits for listener calls in progress (a batch
// pulled and not yet handed to the listener is not delivered: its messages
// stay uncommitted, for the group's next consumer), commits the offsets,
// those calls' results included, as the group's last (those of queues
// handed over that no broker took yet too), releases orderly locks and
// unregisters from the brokers. The commit waits out a group electing a
// leader within ctx or, when ctx has no deadline, for at most 10 s;
// offsets still unsent then are reported in Close's error, and their
// orderly queues stay locked until the broker frees the lock (60 s), so
// that their next owner does not start at an older committed offset
// meanwhile. ctx bounds the wait for listener calls: when it ends first (a
// listener that does not return), Close still commits what was consumed,
// closes the connections and returns ctx's error (with the commit's, if
// it failed); the listener's goroutine ends when the listener returns.
// The commit, unlocks and unregistering are tried even with ctx ended or
// nearly so, within the request timeout (RequestTimeout): consumed
// offsets left uncommitted would be consumed again. Called from the
// listener, Close waits for the other listener calls but not the
// caller's: that call's batch is not committed, and the group consumes it
// again. Safe to call twice: a Close after the first waits within its
// ctx for the first to end, unless the listener makes it.
func (p *PushConsumer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.state != stateStarted {
		p.state = stateClosed
		p.mu.Unlock()
		return p.core.awaitClosed(ctx)
	}
	p.state = stateClosed
	p.mu.Unlock()
	// Called by the listener, Close waits for every other call, not for
	// the caller's, which is still running: its batch is not committed
	// and the group consumes it again.
	p.core.listeners.leave()
	p.core.cancel()
	waitErr := waitGroup(ctx, &p.workerWG)
	err := p.core.close(ctx)
	if rerr := errors.Join(p.retry.Close(ctx), p.tracer.close(ctx)); rerr != nil && waitErr == nil && err == nil {
		err = rerr
	}
	if waitErr != nil && !errors.Is(err, waitErr) {
		err = errors.Join(waitErr, err)
	}
	return err
}

// OwnedQueues lists the queues this consumer consumes now.
func (p *PushConsumer) OwnedQueues() []MessageQueue { return p.core.owned() }

// deliver caches pulled messages and queues them for the listener.
func (p *PushConsumer) deliver(pq *processQueue, msgs []*MessageExt) bool {
	pq.put(msgs)
	if p.orderly != nil {
		return true
	}
	// The pool's queue is unbounded: what bounds memory is flow control,
	// which stops pulling a queue whose cache is over its thresholds.
	n := p.core.cfg.batchMaxSize
	for i := 0; i < len(msgs); i += n {
		p.work.push(consumeRequest{pq: pq, msgs: msgs[i:min(i+n, len(msgs))]})
	}
	return true
}

func (p *PushConsumer) queueStarted(pq *processQueue) {
	if p.orderly != nil {
		p.core.goListener(func() { p.orderlyLoop(pq) })
	}
}

// worker is one goroutine of the concurrent consume pool.
func (p *PushConsumer) worker() {
	for {
		r, ok := p.work.pop(p.core.ctx)
		if !ok {
			return
		}
		p.consumeConcurrently(r)
	}
}

// consumeConcurrently runs the listener on one batch and settles it
// (ConsumeMessageConcurrentlyService.ConsumeRequest + processConsumeResult).
func (p *PushConsumer) consumeConcurrently(r consumeRequest) {
	pq := r.pq
	// The write lock is only ever wanted for a dropped queue (a hand-over,
	// reset or restart awaiting its calls), and that waiter may wait on a
	// stuck call for good: RLock would queue behind it, and every pool
	// goroutine taking a batch of the dropped queue would stall with it.
	if !pq.consumeMu.TryRLock() {
		if pq.dropped.Load() {
			return
		}
		pq.consumeMu.RLock()
	}
	defer pq.consumeMu.RUnlock()
	if pq.dropped.Load() {
		return // handed over: the next owner consumes it
	}
	began := p.core.cfg.common.now()
	now := strconv.FormatInt(began.UnixMilli(), 10)
	for _, m := range r.msgs {
		m.Properties[wire.PropertyConsumeStartTime] = now
	}
	pq.beginCall(r.msgs, began)
	cc := &ConsumeConcurrentlyContext{Queue: pq.mq, AckIndex: len(r.msgs) - 1}
	res := p.callConcurrent(pq.ctx, cc, r.msgs)
	if !pq.beginSettle() {
		p.core.log.Info("listener returned after its queue was handed over without it; result discarded, the next owner consumes the batch",
			zap.Stringer("queue", pq.mq), zap.Int64("firstOffset", r.msgs[0].QueueOffset), zap.Int("messages", len(r.msgs)))
		return
	}
	defer pq.endSettle()
	// The messages the consume timeout took meanwhile are its to settle:
	// sent back already, or to be.
	taken := pq.endCall(r.msgs)
	if len(taken) > 0 {
		p.core.log.Info("listener returned after ConsumeTimeout; its result is ignored for the messages sent back meanwhile",
			zap.Stringer("queue", pq.mq), zap.Int64("firstOffset", r.msgs[0].QueueOffset), zap.Int("timedOut", len(taken)),
			zap.Duration("took", p.core.cfg.common.now().Sub(began)))
	}
	ack := -1
	if res == ConsumeSuccess {
		ack = min(max(cc.AckIndex, -1), len(r.msgs)-1)
	}
	var failed []*MessageExt
	for _, m := range r.msgs[ack+1:] {
		if !taken[m] {
			failed = append(failed, m)
		}
	}
	var again []*MessageExt
	if len(failed) > 0 {
		if p.core.cfg.model == Broadcasting {
			for _, m := range failed {
				p.core.log.Warn("broadcast message failed and is dropped (broadcasting does not redeliver)", zap.String("msgId", m.MsgID))
			}
		} else {
			// One deadline for all the batch's send-backs: a hand-over that
			// gave up waiting for this call waits for its settle
			// (awaitListener), and this bounds that wait. Close does not
			// cut it short: it commits the results of the calls it waits for.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(p.core.ctx), p.core.cfg.common.requestTimeout)
			defer cancel()
			for _, m := range failed {
				if err := p.sendBack(ctx, pq.mq, m, cc.DelayLevel); err != nil {
					p.core.log.Warn("send-back failed; consuming again here later", zap.String("msgId", m.MsgID), zap.Error(err))
					m.ReconsumeTimes++
					again = append(again, m)
				}
			}
		}
	}
	done := r.msgs
	if len(again) > 0 || len(taken) > 0 {
		done = make([]*MessageExt, 0, len(r.msgs))
		for _, m := range r.msgs {
			if !containsMsg(again, m) && !taken[m] {
				done = append(done, m)
			}
		}
	}
	if len(again) > 0 {
		p.core.goTracked(func() {
			if wait(pq.ctx, p.core.cfg.sendBackRetry) {
				p.work.push(consumeRequest{pq: pq, msgs: again})
			}
		})
	}
	if off := pq.remove(done); off >= 0 {
		p.core.store.Update(pq.mq, off, true)
	}
}

func containsMsg(list []*MessageExt, m *MessageExt) bool {
	for _, x := range list {
		if x == m {
			return true
		}
	}
	return false
}

// callConcurrent runs the listener; a panic counts as RECONSUME_LATER.
func (p *PushConsumer) callConcurrent(ctx context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) (res ConsumeResult) {
	if st := p.tracer.subBefore(p.core.cfg.group, msgs); st != nil {
		defer func() { st.after(p.core.cfg.group, res == ConsumeSuccess) }()
	}
	defer func() {
		if v := recover(); v != nil {
			p.core.log.Error("listener panicked; messages will be redelivered", zap.Any("panic", v), zap.Stringer("queue", cc.Queue))
			res = ConsumeRetryLater
		}
	}()
	return p.concurrent(ctx, cc, msgs)
}

// sendBack returns a failed message to the broker for redelivery through
// the retry topic (CONSUMER_SEND_MSG_BACK, 36); when the broker cannot be
// asked, the message is sent to %RETRY%group directly, as
// DefaultMQPushConsumerImpl.sendMessageBack falls back to. ctx bounds
// both.
func (p *PushConsumer) sendBack(ctx context.Context, mq MessageQueue, m *MessageExt, delayLevel int) error {
	c := p.core
	maxTimes := c.cfg.maxReconsumeTimes
	if maxTimes < 0 {
		maxTimes = 16
	}
	addr := c.routes.brokerAddr(mq.BrokerName)
	var err error
	if addr != "" {
		h := &wire.ConsumerSendMsgBackRequestHeader{Offset: m.CommitLogOffset, Group: c.cfg.group, DelayLevel: int32(delayLevel),
			OriginMsgID: m.MsgID, OriginTopic: m.Topic, MaxReconsumeTimes: int32(maxTimes), BrokerName: mq.BrokerName}
		_, err = invokeOK(ctx, c.rc, mq.BrokerName, addr, remoting.NewRequest(remoting.RequestConsumerSendMsgBack, h, nil))
		if err == nil {
			return nil
		}
		c.followLeader(mq.BrokerName, addr, err)
	}
	if perr := p.sendRetry(ctx, retryMessage(m, c.cfg.group, maxTimes)); perr != nil {
		return fmt.Errorf("client: send-back of %s: broker: %v; retry topic: %w", m.MsgID, err, perr)
	}
	return nil
}

// workQueue is the concurrent pool's FIFO of batches.
type workQueue struct {
	mu    sync.Mutex
	items []consumeRequest // guarded by mu
	ready chan struct{}    // one token while items is non-empty
}

func newWorkQueue() *workQueue { return &workQueue{ready: make(chan struct{}, 1)} }

func (q *workQueue) push(r consumeRequest) {
	q.mu.Lock()
	q.items = append(q.items, r)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop waits for a batch until ctx ends (false). Once it ended, batches
// still queued are left: Close waits for the listener calls in progress
// only, and their messages, never handed to the listener, stay
// uncommitted (ConsumeMessageConcurrentlyService's shutdown drops its
// pool's queue too).
func (q *workQueue) pop(ctx context.Context) (consumeRequest, bool) {
	for ctx.Err() == nil {
		q.mu.Lock()
		if len(q.items) > 0 {
			r := q.items[0]
			q.items[0] = consumeRequest{}
			q.items = q.items[1:]
			more := len(q.items) > 0
			q.mu.Unlock()
			if more {
				// Pass the wake-up on to another worker.
				select {
				case q.ready <- struct{}{}:
				default:
				}
			}
			return r, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
		}
	}
	return consumeRequest{}, false
}
