package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// LitePullConsumer is the pull-style consumer (RocketMQ's
// DefaultLitePullConsumer): the application calls Poll for messages.
// Queues come from Subscribe (divided among the group by rebalancing, as
// for the push consumer) or from Assign (fixed, no rebalancing). Behind
// Poll, one long-polling loop per queue fills a buffer bounded by the same
// flow-control thresholds as the push consumer. With AutoCommit (the
// default) what Poll returned is committed every PersistInterval, on
// hand-over and on Close, once the application polls again: a Poll says
// it is done with what the Polls before returned, not with what it
// returns. Otherwise call Commit. A message it cannot decode is sent to
// the group's DLQ and logged, as PushConsumer does, and never polled.
type LitePullConsumer struct {
	core  *consumerCore
	ready chan pollBatch

	mu    sync.Mutex
	state producerState // guarded by mu
	// consumedMu is apart from mu, which Start holds while a failed start
	// closes the core and waits for the client's request handlers: a
	// broker's reset among them takes consumedMu (sought).
	consumedMu sync.Mutex
	consumed   map[MessageQueue]int64 // guarded by consumedMu; next offset after what Poll returned
	// unreleased holds, with AutoCommit, the offset after the last batch
	// Poll returned of each queue, stored at the next Poll: until then the
	// application may still be processing the batch, and a commit past it
	// would lose it should the application die (at-least-once; RocketMQ's
	// lite pull consumer commits in poll what earlier polls returned).
	unreleased map[MessageQueue]int64 // guarded by consumedMu
}

// pollBatch is one pull's messages waiting for Poll.
type pollBatch struct {
	pq   *processQueue
	msgs []*MessageExt
}

// NewLitePullConsumer validates the options; ConsumerGroup and NameServers
// are required.
func NewLitePullConsumer(opts ...ConsumerOpt) (*LitePullConsumer, error) {
	cfg, err := newConsumerConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := refuseTrace(cfg.common, "LitePullConsumer"); err != nil {
		return nil, err
	}
	l := &LitePullConsumer{consumed: map[MessageQueue]int64{}, unreleased: map[MessageQueue]int64{}}
	l.ready = make(chan pollBatch, 64)
	l.core = newConsumerCore(cfg, "litePullConsumer", queueHooks{consumeType: wire.ConsumeTypePull, deliver: l.deliver,
		handedOver: l.handedOver, reset: l.sought})
	return l, nil
}

// ClientID is the id this consumer registers with brokers.
func (l *LitePullConsumer) ClientID() string { return l.core.clientID }

// Subscribe adds topic with a tag expression, before Start; the group's
// consumers then share its queues. It excludes Assign.
func (l *LitePullConsumer) Subscribe(topic, expression string) error {
	return l.SubscribeSelector(topic, Tags(expression))
}

// SubscribeSelector adds topic with a selector, Tags(expr) or
// SQL92(condition), before Start, like Subscribe. It excludes Assign.
func (l *LitePullConsumer) SubscribeSelector(topic string, sel MessageSelector) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateNew {
		return fmt.Errorf("%w: Subscribe after Start", ErrInvalidOption)
	}
	if l.core.assigned != nil {
		return fmt.Errorf("%w: Subscribe and Assign exclude each other", ErrInvalidOption)
	}
	return l.core.subscribeSelector(topic, sel)
}

// Assign fixes the queues to read, before Start; no rebalancing happens.
// It excludes Subscribe.
func (l *LitePullConsumer) Assign(queues []MessageQueue) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateNew || len(queues) == 0 {
		return fmt.Errorf("%w: Assign needs queues, before Start", ErrInvalidOption)
	}
	c := l.core
	if len(c.topics()) > 0 && c.assigned == nil {
		return fmt.Errorf("%w: Subscribe and Assign exclude each other", ErrInvalidOption)
	}
	c.mu.Lock()
	c.assigned = map[MessageQueue]bool{}
	for _, mq := range queues {
		c.assigned[mq] = true
	}
	c.mu.Unlock()
	for _, mq := range queues {
		if err := c.subscribe(mq.Topic, wire.SubAll); err != nil {
			return err
		}
	}
	return nil
}

// Start checks the subscriptions' routes, registers with the brokers and
// begins pulling; ctx bounds that work (with Assign, finding each queue's
// start offset too), not the consumer's life.
func (l *LitePullConsumer) Start(ctx context.Context) error {
	c := l.core
	// rebalanceMu comes before l.mu (the lock order in doc.go): the fixed
	// queues start under it, as a rebalance's do. Nothing runs yet that
	// could wait for it, but the rebalance loop c.start begins does.
	c.rebalanceMu.Lock()
	rebalancing := true
	defer func() {
		if rebalancing {
			c.rebalanceMu.Unlock()
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case stateStarted:
		return nil
	case stateClosed:
		return ErrClosed
	}
	if len(c.topics()) == 0 {
		return fmt.Errorf("%w: Subscribe or Assign before Start", ErrInvalidOption)
	}
	if err := c.start(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	var fixed []MessageQueue
	for mq := range c.assigned {
		fixed = append(fixed, mq)
	}
	c.mu.Unlock()
	if fixed != nil {
		SortQueues(fixed)
		for _, mq := range fixed {
			if !c.startQueue(ctx, mq) {
				// close waits for the rebalance loop, which may be
				// waiting for rebalanceMu.
				c.rebalanceMu.Unlock()
				rebalancing = false
				// ctx may have run out, which is why the offset was not
				// found: wait for this start's goroutines on a budget of
				// our own so a later Start can begin afresh.
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.common.requestTimeout)
				// close returns its ctx's own error only when it gave up
				// waiting for them: a new start beside them is refused.
				if err := c.close(cctx); err != nil && err == cctx.Err() {
					l.state = stateClosed
				}
				cancel()
				return fmt.Errorf("client: lite pull consumer: cannot find the start offset of %s", mq)
			}
		}
	}
	l.state = stateStarted
	return nil
}

// Close stops pulling, waits for the pull loops, commits (with
// AutoCommit, what the Polls before the last one returned, the last
// batch's messages being redelivered; otherwise what Commit recorded, and
// what a Commit or a hand-over could not send of queues handed over) and
// unregisters. The commit waits out a group electing a leader as Commit
// does, within ctx or, when ctx has no deadline, for at most 10 s: an
// election takes well under a second, so that covers a slow one or a
// leader handing off, while a group that lost its quorum cannot hold
// Close for good. Offsets still unsent then are reported in Close's error;
// their group delivers the messages after its last committed offsets
// again. ctx bounds the wait for the pull loops: when it ends first,
// Close still commits, closes the connections and returns ctx's error.
// The commit and unregistering are tried even with ctx ended or nearly
// so, within the request timeout (RequestTimeout). Safe to call twice: a
// Close after the first waits within its ctx for the first to end.
func (l *LitePullConsumer) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.state != stateStarted {
		l.state = stateClosed
		l.mu.Unlock()
		return l.core.awaitClosed(ctx)
	}
	l.state = stateClosed
	l.mu.Unlock()
	return l.core.close(ctx)
}

func (l *LitePullConsumer) deliver(pq *processQueue, msgs []*MessageExt) bool {
	pq.put(msgs)
	select {
	case l.ready <- pollBatch{pq: pq, msgs: msgs}:
		return true
	case <-pq.ctx.Done():
		return false
	}
}

// Poll returns the next pulled messages (one queue's batch, in offset
// order), waiting until some arrive or ctx ends (then ctx's error). With
// AutoCommit, calling it releases what the Polls before returned to be
// committed.
func (l *LitePullConsumer) Poll(ctx context.Context) ([]*MessageExt, error) {
	l.mu.Lock()
	st := l.state
	l.mu.Unlock()
	switch st {
	case stateNew:
		return nil, ErrNotStarted
	case stateClosed:
		return nil, ErrClosed
	}
	if l.core.cfg.autoCommit {
		l.release()
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.core.ctx.Done():
			return nil, ErrClosed
		case b := <-l.ready:
			// Under consumedMu so a Seek or a broker's reset (which drop,
			// then record their offset under consumedMu, a reset before
			// storing it) either sees this batch's offset first or makes
			// the batch stale.
			l.consumedMu.Lock()
			if b.pq.dropped.Load() {
				l.consumedMu.Unlock()
				continue // the queue was sought or handed over
			}
			off := b.pq.remove(b.msgs)
			l.consumed[b.pq.mq] = off
			if l.core.cfg.autoCommit {
				l.unreleased[b.pq.mq] = off
			}
			l.consumedMu.Unlock()
			return b.msgs, nil
		}
	}
}

// release stores the offsets after the batches earlier Polls returned,
// for the persist rounds, hand-overs and Close to commit (AutoCommit).
func (l *LitePullConsumer) release() {
	l.consumedMu.Lock()
	defer l.consumedMu.Unlock()
	for mq, off := range l.unreleased {
		l.core.store.Update(mq, off, false)
	}
	clear(l.unreleased)
}

// Commit commits, for every queue this consumer owns, the offset after the
// last message Poll returned, and waits for each group's leader (or the
// offsets file) to take it, after any send of that group's offsets in
// progress (a persist round's), so that no older offset lands after it. A
// leader replicates the offsets it took within its
// consumerOffsetCommitInterval;
// one lost before that has the messages since its last replicated offsets
// delivered again (ADR 0004). A group electing a new leader is waited out
// within ctx (at most 10 s when ctx has no deadline): Commit follows the
// new leader as sends do. When ctx ends first the error says so and the
// offsets are not lost: like RocketMQ's DefaultLitePullConsumer, which
// only records a commit in memory, the consumer keeps them and sends
// them every PersistInterval until a leader takes them (after their queue
// was handed over, only until its new owner commits), and on Close, whose
// error reports any it could not send.
func (l *LitePullConsumer) Commit(ctx context.Context) error {
	c := l.core
	owned := c.owned()
	l.consumedMu.Lock()
	offsets := make(map[MessageQueue]int64, len(owned))
	for _, mq := range owned {
		if off, ok := l.consumed[mq]; ok && off >= 0 {
			offsets[mq] = off
		}
	}
	c.recordCommits(offsets)
	l.consumedMu.Unlock()
	if _, err := c.sendOffsets(ctx, owned, true, false); err != nil {
		return fmt.Errorf("client: commit not confirmed by every broker group (kept, and sent again every PersistInterval and on Close): %w", err)
	}
	return nil
}

// handedOver forgets what Poll returned of mq, a queue handed over: should
// it come back, Commit must not send that, the next owner may have moved
// on.
func (l *LitePullConsumer) handedOver(mq MessageQueue) {
	l.consumedMu.Lock()
	delete(l.consumed, mq)
	delete(l.unreleased, mq)
	l.consumedMu.Unlock()
}

// Seek makes the next messages of mq, an owned queue, start at offset;
// messages of mq already pulled but not yet polled are discarded. An
// offset outside the queue's [min, max] offsets (max: its end, where the
// next message goes) is refused with ErrInvalidOption, as RocketMQ's
// DefaultLitePullConsumer.seek refuses it: the pull there would be
// answered OFFSET_ILLEGAL and moved to the queue's bounds, and with
// AutoCommit the move committed, not what was asked. ctx bounds the
// bounds' lookup.
func (l *LitePullConsumer) Seek(ctx context.Context, mq MessageQueue, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: Seek offset %d", ErrInvalidOption, offset)
	}
	c := l.core
	if !c.isOwned(mq) {
		return fmt.Errorf("%w: Seek: %s is not owned by this consumer", ErrNoQueue, mq)
	}
	lo, err := c.queueOffsetAt(ctx, mq, remoting.RequestGetMinOffset)
	if err != nil {
		return fmt.Errorf("client: Seek: min offset of %s: %w", mq, err)
	}
	hi, err := c.queueOffsetAt(ctx, mq, remoting.RequestGetMaxOffset)
	if err != nil {
		return fmt.Errorf("client: Seek: max offset of %s: %w", mq, err)
	}
	if offset < lo || offset > hi {
		return fmt.Errorf("%w: Seek offset %d of %s is outside the queue's offsets %d..%d", ErrInvalidOption, offset, mq, lo, hi)
	}
	c.rebalanceMu.Lock()
	defer c.rebalanceMu.Unlock()
	c.mu.Lock()
	pq := c.pqs[mq]
	if pq != nil {
		delete(c.pqs, mq)
		c.seeks[mq] = offset
	}
	c.mu.Unlock()
	if pq == nil {
		return fmt.Errorf("%w: Seek: %s is not owned by this consumer", ErrNoQueue, mq)
	}
	pq.drop()
	l.sought(mq, offset)
	c.startQueue(ctx, mq)
	return nil
}

// sought records off as what Poll returned of mq, a queue restarted there
// (Seek, a broker's reset) after its process queue was dropped: Commit
// sends off, not what Poll returned before, and a batch of the dropped
// queue Poll holds is stale (see Poll).
func (l *LitePullConsumer) sought(mq MessageQueue, off int64) {
	l.consumedMu.Lock()
	l.consumed[mq] = off
	delete(l.unreleased, mq) // a release must not undo a reset's stored offset
	l.consumedMu.Unlock()
}

// OwnedQueues lists the queues this consumer reads now.
func (l *LitePullConsumer) OwnedQueues() []MessageQueue { return l.core.owned() }

// Committed returns the consume offset of mq the store holds in memory
// (ErrOffsetNotFound if none).
func (l *LitePullConsumer) Committed(ctx context.Context, mq MessageQueue) (int64, error) {
	return l.core.store.Read(ctx, mq, ReadFromMemory)
}
