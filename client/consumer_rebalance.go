package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// rebalanceLoop rebalances every RebalanceInterval, at once when a broker
// says the group changed, and soon again when a rebalance could not finish:
// an orderly lock refused (its previous owner still held it) or a topic
// without a route yet (a retry topic the broker creates on the first
// heartbeat). Those retries start at 1 s and double up to the interval.
func (c *consumerCore) rebalanceLoop() {
	t := time.NewTicker(c.cfg.rebalanceInterval)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	delay := c.cfg.lockRetryDelay
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.rebalanceCh:
		case <-retry.C:
		}
		if c.rebalance(c.ctx) {
			retry.Reset(delay)
			delay = min(2*delay, c.cfg.rebalanceInterval)
		} else {
			delay = c.cfg.lockRetryDelay
		}
	}
}

// rebalance recomputes this consumer's queues of every subscribed topic
// and applies the change; it reports whether something is left to do (a
// topic that failed, an orderly lock refused).
func (c *consumerCore) rebalance(ctx context.Context) (pending bool) {
	c.rebalanceMu.Lock()
	defer c.rebalanceMu.Unlock()
	c.mu.Lock()
	fixed := c.assigned != nil
	c.mu.Unlock()
	if fixed {
		return false
	}
	for _, topic := range c.topics() {
		alloc, err := c.allocate(ctx, topic)
		if err != nil {
			if ctx.Err() == nil {
				c.warnOnce("rebalance:"+topic, "rebalance failed; keeping the current queues", zap.String("topic", topic), zap.Error(err))
			}
			pending = true
			continue
		}
		c.clearWarn("rebalance:" + topic)
		if c.updateQueues(ctx, topic, alloc) {
			pending = true
		}
	}
	return pending
}

// allocate returns the queues of topic this consumer should own
// (RebalanceImpl.rebalanceByTopic).
func (c *consumerCore) allocate(ctx context.Context, topic string) ([]MessageQueue, error) {
	mqAll, err := c.routes.subscribeInfo(ctx, topic)
	if err != nil {
		return nil, err
	}
	if c.cfg.model == Broadcasting {
		return mqAll, nil
	}
	if len(mqAll) == 0 {
		return nil, nil
	}
	SortQueues(mqAll)
	cids, err := c.groupMembers(ctx, mqAll)
	if err != nil {
		return nil, err
	}
	if len(cids) == 0 {
		return nil, fmt.Errorf("client: broker knows no consumer of group %s yet", c.cfg.group)
	}
	slices.Sort(cids)
	return c.allocateBy(mqAll, cids)
}

// allocateBy runs the strategy, user code that may panic: a panic is this
// rebalance's error (the queues stay as they are, the rebalance is
// retried), as RocketMQ's rebalanceByTopic catches a Throwable from
// allocate, rather than the end of the process.
func (c *consumerCore) allocateBy(mqAll []MessageQueue, cids []string) (alloc []MessageQueue, err error) {
	defer func() {
		if v := recover(); v != nil {
			alloc, err = nil, fmt.Errorf("client: allocation strategy %s panicked: %v", c.cfg.strategy.Name(), v)
		}
	}()
	return c.cfg.strategy.Allocate(c.cfg.group, c.clientID, mqAll, cids)
}

// groupMembers asks one broker of the topic for the group's client ids,
// trying the next broker group when one fails.
func (c *consumerCore) groupMembers(ctx context.Context, mqAll []MessageQueue) ([]string, error) {
	var errs []error
	for _, broker := range slices.Sorted(maps.Keys(byBroker(mqAll))) {
		var ids []string
		err := c.onBroker(ctx, broker, func(ctx context.Context, addr string) error {
			var err error
			ids, err = consumerIDs(ctx, c.rc, broker, addr, c.cfg.group)
			return err
		})
		if err == nil {
			return ids, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("client: consumer list of group %s: %w", c.cfg.group, errors.Join(errs...))
}

// updateQueues makes the process-queue table of topic match alloc
// (updateProcessQueueTableInRebalance). Queues leaving are handed over
// first — dropped, their in-flight listener calls awaited, their offset
// committed, their orderly lock released once the offset is — so the next
// owner never overlaps with us; then new queues start at their computed
// offset.
func (c *consumerCore) updateQueues(ctx context.Context, topic string, alloc []MessageQueue) (pending bool) {
	want := map[MessageQueue]bool{}
	for _, mq := range alloc {
		want[mq] = true
	}
	c.mu.Lock()
	var leaving []*processQueue
	var adding, idle []MessageQueue
	for mq, pq := range c.pqs {
		if mq.Topic == topic && !want[mq] {
			leaving = append(leaving, pq)
			delete(c.pqs, mq)
			if c.hooks.orderly && c.cfg.model == Clustering {
				c.releasing[mq] = true // lockAll renews it until handOver unlocks it
			}
		}
	}
	for mq := range c.restarting {
		// Waiting to restart, its call returned (not releasing): it leaves
		// without a process queue, its new offset committed and its lock
		// released as any queue's.
		if mq.Topic == topic && !want[mq] && !c.releasing[mq] {
			idle = append(idle, mq)
			delete(c.restarting, mq)
			delete(c.seeks, mq)
		}
	}
	for _, mq := range alloc {
		switch {
		case c.releasing[mq]:
			// Our listener still runs on it from before (handOver).
			pending = true
		case c.pqs[mq] == nil:
			adding = append(adding, mq)
		}
	}
	c.mu.Unlock()
	if len(leaving) > 0 || len(idle) > 0 {
		c.handOver(ctx, leaving, idle)
	}
	if len(leaving) > 0 || len(idle) > 0 || len(adding) > 0 {
		c.log.Info("rebalance changed queues", zap.String("topic", topic),
			zap.Int("dropped", len(leaving)+len(idle)), zap.Int("adding", len(adding)), zap.Int("owned", len(alloc)))
	}
	SortQueues(adding)
	for broker, mqs := range byBroker(adding) {
		granted := map[MessageQueue]bool{}
		if c.hooks.orderly && c.cfg.model == Clustering {
			g, err := c.lock(ctx, broker, mqs)
			if err != nil {
				c.warnOnce("lock:"+broker, "locking new queues failed", zap.String("broker", broker), zap.Error(err))
			}
			granted = g
		}
		for _, mq := range mqs {
			if c.hooks.orderly && c.cfg.model == Clustering && !granted[mq] {
				// Its previous owner still holds it (handing over, or
				// gone without unlocking: the broker frees it after 60 s).
				pending = true
				continue
			}
			if !c.startQueue(ctx, mq) {
				pending = true
			}
		}
	}
	return pending
}

// startQueue computes mq's start offset and launches its pull loop.
func (c *consumerCore) startQueue(ctx context.Context, mq MessageQueue) bool {
	c.mu.Lock()
	seek, sought := c.seeks[mq]
	delete(c.seeks, mq)
	c.mu.Unlock()
	kept, keptSeq, wasKept := c.keptOffset(mq)
	offset := seek
	if !sought {
		var err error
		c.mu.Lock()
		c.starting[mq.BrokerName]++
		c.mu.Unlock()
		offset, err = c.startOffset(ctx, mq, kept, wasKept)
		c.mu.Lock()
		if c.starting[mq.BrokerName]--; c.starting[mq.BrokerName] == 0 {
			delete(c.starting, mq.BrokerName)
		}
		if err != nil {
			c.unstarted[mq] = true
		} else {
			delete(c.unstarted, mq)
		}
		c.mu.Unlock()
		if err != nil {
			c.warnOnce("offset:"+mq.String(), "cannot find where to start; will retry", zap.Stringer("queue", mq), zap.Error(err))
			return false
		}
		c.clearWarn("offset:" + mq.String())
	}
	pq := newProcessQueue(c.ctx, mq)
	if c.hooks.orderly && c.cfg.model == Clustering {
		pq.setLocked(true, c.cfg.common.now())
	}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return true
	}
	c.pqs[mq] = pq
	delete(c.restarting, mq)
	delete(c.unsettled, mq) // its lock is ours as an owned queue's again
	c.mu.Unlock()
	// Drop any stale in-memory offset: the queue may come back to us after
	// another consumer moved it on. A sought offset is where pulls start,
	// not a commit (RocketMQ's seek leaves the offset store alone); a reset
	// stored its own before it came here.
	switch {
	case wasKept:
		c.takeBack(mq, keptSeq, offset)
	case !sought:
		c.store.Update(mq, offset, false)
	}
	if c.hooks.started != nil {
		c.hooks.started(pq)
	}
	c.goTracked(func() { c.pullLoop(pq, offset) })
	return true
}

// handOver stops consuming pqs, the queues leaving, for good before their
// next owners start: it drops them, waits for their listener calls in
// progress, commits their offsets (handOverOffsets: side by side per
// broker group, so one that cannot answer does not use up the others'
// time) and, for an orderly consumer, unlocks at their brokers those whose
// offset a broker took. idle are queues leaving too, with no process
// queue and no listener call (orderly queues waiting to restart): only
// committed and unlocked. An orderly queue whose offset no broker took keeps
// its lock (c.unsettled) until one does: its next owner would start at the
// older committed offset and consume the range again, in order
// (RocketMQ's removeUnnecessaryMessageQueue persists, then unlocks).
func (c *consumerCore) handOver(ctx context.Context, pqs []*processQueue, idle []MessageQueue) {
	locked := c.hooks.orderly && c.cfg.model == Clustering
	for _, pq := range pqs {
		pq.drop()
	}
	mqs := slices.Clone(idle)
	released := slices.Clone(idle) // no listener of ours runs on them any more
	var held []*processQueue       // consumeMu taken: unlocked once handed over
	defer func() {
		for _, pq := range held {
			pq.consumeMu.Unlock()
		}
	}()
	for _, pq := range pqs {
		mqs = append(mqs, pq.mq)
		acquired := c.awaitListener(ctx, pq, locked)
		if acquired {
			held = append(held, pq)
		}
		if acquired || !locked {
			released = append(released, pq.mq)
		}
	}
	// An orderly queue whose listener still runs has its offset committed
	// too, what is consumed so far; its lock waiter commits again after.
	settled := c.handOverOffsets(ctx, mqs)
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	if locked {
		c.unlockHandedOver(ctx, settledOf(released, settled))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, mq := range released {
		delete(c.releasing, mq)
		if locked && !settled[mq] {
			c.unsettled[mq] = c.cfg.common.now().Add(unsettledLockHold)
		}
	}
}

// settledOf lists the queues of mqs in settled.
func settledOf(mqs []MessageQueue, settled map[MessageQueue]bool) []MessageQueue {
	var out []MessageQueue
	for _, mq := range mqs {
		if settled[mq] {
			out = append(out, mq)
		}
	}
	return out
}

// unsettledLockHold bounds how long an orderly queue handed over keeps
// its broker lock while no broker confirms its offset (c.unsettled): as
// long as a broker keeps the lock of a consumer that died holding it
// (REBALANCE_LOCK_MAX_LIVE_TIME), so a group whose leader cannot take
// offsets holds the queue from its next owner no longer than a crash
// would.
const unsettledLockHold = 60 * time.Second

// unlockSettled releases the broker locks of the queues in c.unsettled
// whose offset a broker confirmed since, or whose kept offset was dropped,
// or whose time ran out (their next owner may then consume again what was
// consumed here). It runs in the persist and lock rounds; a rebalance in
// progress, which may be taking such a queue back, defers it to the next.
func (c *consumerCore) unlockSettled(ctx context.Context) {
	if !c.rebalanceMu.TryLock() {
		return
	}
	defer c.rebalanceMu.Unlock()
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	c.mu.Lock()
	held := maps.Clone(c.unsettled)
	c.mu.Unlock()
	if len(held) == 0 {
		return
	}
	unlock := c.unsettledDone(held)
	c.unlockHandedOver(ctx, unlock)
	c.mu.Lock()
	for _, mq := range unlock {
		delete(c.unsettled, mq)
	}
	c.mu.Unlock()
}

// unsettledDone lists the queues of held, a copy of c.unsettled, whose
// lock may go: their kept offset confirmed or dropped, or their time run
// out.
func (c *consumerCore) unsettledDone(held map[MessageQueue]time.Time) []MessageQueue {
	now := c.cfg.common.now()
	var unlock, expired []MessageQueue
	c.pendingMu.Lock()
	for mq, until := range held {
		e, kept := c.pending[mq]
		switch {
		case !kept || !e.handedOver:
			unlock = append(unlock, mq)
		case !now.Before(until):
			unlock = append(unlock, mq)
			expired = append(expired, mq)
		}
	}
	c.pendingMu.Unlock()
	if len(expired) > 0 {
		c.log.Warn("offsets of orderly queues handed over not confirmed in time; unlocking them, their next owner may consume again what was consumed here",
			zap.Stringers("queues", expired), zap.Duration("held", unsettledLockHold))
	}
	return unlock
}

// awaitListener waits up to HandoverTimeout for pq's listener calls in
// progress, if any: their results still count. It reports whether it took
// pq.consumeMu, which the caller then holds. When it gave up on a
// concurrent queue, the calls still in the listener settle nothing, and
// those already settling are waited for (pq.abandon). Once the listeners
// let go, an orderly queue (locked) has its offset committed and its lock
// released as handOver does: until then the queue's broker lock stays
// ours (lockAll renews it, c.releasing) and we do not take the queue
// back, for the next owner would consume it beside the listener.
func (c *consumerCore) awaitListener(ctx context.Context, pq *processQueue, locked bool) (acquired bool) {
	gaveUp := func() {
		if ctx.Err() == nil {
			c.log.Warn("listener still busy on a queue being handed over; the next owner may redeliver", zap.Stringer("queue", pq.mq))
		}
		if !locked && c.cfg.model == Clustering {
			// Its offset is committed without the calls still running,
			// but with the results of those already settling: a
			// send-back of theirs may land at any moment, and an offset
			// left before its message would have the next owner consume
			// it too. Their send-backs share one request timeout, which
			// bounds the wait. An orderly queue's offset is committed
			// again once its call ends (its broker lock keeps the next
			// owner out meanwhile), and a broadcasting queue has no next
			// owner.
			<-pq.abandon()
		}
		if locked {
			c.mu.Lock()
			c.releasing[pq.mq] = true
			c.mu.Unlock()
		}
	}
	var released func()
	if locked {
		released = func() {
			settled := c.handOverOffsets(ctx, []MessageQueue{pq.mq})
			c.releaseMu.Lock()
			c.unlockHandedOver(ctx, settledOf([]MessageQueue{pq.mq}, settled))
			c.mu.Lock()
			delete(c.releasing, pq.mq)
			if !settled[pq.mq] {
				c.unsettled[pq.mq] = c.cfg.common.now().Add(unsettledLockHold)
			}
			c.mu.Unlock()
			c.releaseMu.Unlock()
			c.triggerRebalance()
		}
	}
	return c.awaitCalls(ctx, pq, gaveUp, released)
}

// awaitCalls takes pq.consumeMu for writing, waiting for pq's listener
// calls in progress up to HandoverTimeout or until ctx ends; acquired
// means the caller holds it. Otherwise gaveUp runs, and then released
// (if not nil) once the calls let go of the lock, from a goroutine that
// gives it back first. The goroutine is counted in c.lockWaiters, which
// close waits for once c.wg is done (the listeners end on their own;
// close waits for them too), unless the listener closes, whose own call
// the goroutine may wait for: the callers run in tracked goroutines (the
// rebalance and pull loops, a broker's reset), so it is counted before
// that wait begins.
func (c *consumerCore) awaitCalls(ctx context.Context, pq *processQueue, gaveUp, released func()) (acquired bool) {
	done := make(chan struct{})
	keep := make(chan bool, 1)
	c.lockWaiters.Add(1)
	go func() {
		defer c.lockWaiters.Done()
		pq.consumeMu.Lock()
		close(done)
		if <-keep {
			return
		}
		pq.consumeMu.Unlock()
		if released != nil {
			released()
		}
	}()
	t := time.NewTimer(c.cfg.handoverTimeout)
	select {
	case <-done:
		acquired = true
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	if !acquired {
		gaveUp()
	}
	keep <- acquired
	return acquired
}

// unlockHandedOver releases the broker locks of mqs, orderly queues handed
// over, per broker group side by side; a lock left the broker frees after
// 60 s.
func (c *consumerCore) unlockHandedOver(ctx context.Context, mqs []MessageQueue) {
	var wg sync.WaitGroup
	for broker, qs := range byBroker(mqs) {
		addr := c.routes.brokerAddr(broker)
		if addr == "" {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.common.requestTimeout)
			defer cancel()
			if err := unlockQueues(pctx, c.rc, broker, addr, c.cfg.group, c.clientID, qs); err != nil {
				c.log.Warn("unlocking queues handed over failed; the broker frees them after 60 s",
					zap.String("broker", broker), zap.Int("queues", len(qs)), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

// startOffset is computePullFromWhere: the committed offset if there is
// one, else where ConsumeFromWhere says (a retry queue: its start). A
// queue that comes back with an offset kept since it was handed over
// (kept, when hasKept; keptOffset) resumes there unless the committed
// offset is past it, which only the queue's next owner can have consumed
// to: what was consumed here and no broker confirmed is newer than a
// committed offset below it, and stands in for a missing one
// (ConsumeFromWhere is for a queue the group never consumed, and would
// skip or repeat messages).
func (c *consumerCore) startOffset(ctx context.Context, mq MessageQueue, kept int64, hasKept bool) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
	defer cancel()
	off, err := c.readCommitted(cctx, mq)
	for hop := 0; hop < maxBrokerHops && err != nil; hop++ {
		// A remote store asks the route's address; follow a leader it names.
		var be *BrokerError
		if !errors.As(err, &be) || be.LeaderAddr == "" || be.LeaderAddr == be.Addr {
			break
		}
		c.followLeader(mq.BrokerName, be.Addr, err)
		off, err = c.readCommitted(cctx, mq)
	}
	if err == nil && off >= 0 {
		if hasKept && kept > off {
			return kept, nil
		}
		return off, nil
	}
	if err != nil && !errors.Is(err, ErrOffsetNotFound) {
		return 0, err
	}
	if hasKept {
		return kept, nil
	}
	var res int64
	switch {
	case isRetryTopic(mq.Topic):
		// A retry queue the group never committed an offset of is read
		// from its start: what is there was sent back by this group and
		// not consumed since. Unlike RocketMQ, which starts a
		// ConsumeFromTimestamp consumer at its end: a send-back stored
		// before the consumer starts reading the queue (the retry topic's
		// route comes after the first heartbeat created it) would be lost.
		return 0, nil
	case c.cfg.fromWhere == ConsumeFromTimestamp:
		ts := c.cfg.consumeTimestamp
		if ts.IsZero() {
			ts = c.cfg.common.now().Add(-30 * time.Minute)
		}
		err = c.onBroker(ctx, mq.BrokerName, func(ctx context.Context, addr string) error {
			var err error
			res, err = searchOffset(ctx, c.rc, addr, mq, ts.UnixMilli())
			return err
		})
	case c.cfg.fromWhere == ConsumeFromFirstOffset:
		res, err = c.queueOffsetAt(ctx, mq, remoting.RequestGetMinOffset)
	default:
		res, err = c.queueOffsetAt(ctx, mq, remoting.RequestGetMaxOffset)
	}
	return res, err
}

// readCommitted reads the group's committed offset of mq (a broadcasting
// consumer's: its own, in memory, else its file's). The store does not
// keep the answer in memory (RemoteOffsetStore.readCommitted,
// LocalOffsetStore.readStored): an offset kept there for mq since it was
// handed over must stay until the queue started and took it back, or,
// should the consumer close first, Close sends the older committed offset
// for it. A broadcasting consumer's memory is never behind its file
// (LocalOffsetStore.Remove keeps a queue that left), and the file may
// have been rewritten by another writer since.
func (c *consumerCore) readCommitted(ctx context.Context, mq MessageQueue) (int64, error) {
	switch s := c.store.(type) {
	case *RemoteOffsetStore:
		return s.readCommitted(ctx, mq)
	case *LocalOffsetStore:
		if off, err := s.Read(ctx, mq, ReadFromMemory); err == nil {
			return off, nil
		}
		return s.readStored(mq)
	}
	return c.store.Read(ctx, mq, ReadFromStore)
}

// owned lists the queues with a live process queue.
func (c *consumerCore) owned() []MessageQueue {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Collect(maps.Keys(c.pqs))
	SortQueues(out)
	return out
}

// resetOffsetHandler serves RESET_CONSUMER_CLIENT_OFFSET (220), which a
// broker relays after an admin's INVOKE_BROKER_TO_RESET_OFFSET: the body
// maps queues to new offsets (ResetOffsetBody); every owned queue listed
// restarts there (ClientRemotingProcessor.resetOffset).
func (c *consumerCore) resetOffsetHandler(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.ResetOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	if h.Group != c.cfg.group {
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}
	entries, err := decodeQueueTable(req.Body, "offsetTable")
	if err != nil {
		return nil, err
	}
	offsets := map[MessageQueue]int64{}
	for _, e := range entries {
		off, err := strconv.ParseInt(string(e.Value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("client: reset offset of %s: %q is not a number", e.Queue, e.Value)
		}
		offsets[e.Queue] = off
	}
	// In a tracked goroutine, which close waits for, as for those it
	// starts (awaitCalls); answered once done, as RocketMQ's resetOffset.
	done := make(chan struct{})
	c.goTracked(func() { defer close(done); c.resetOffsets(c.ctx, offsets) })
	select {
	case <-done:
	case <-c.ctx.Done(): // closing: goTracked started nothing, or it ends soon
	}
	return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
}

// resetOffsets restarts every owned queue in offsets at its new offset:
// its process queue is dropped (cached messages discarded, calls in
// progress awaited as restartAt says), the offset stored and committed
// (once, after the group's offset sends in progress), and a new pull loop
// started there. An orderly queue whose restart waits for its listener
// call has its new offset replaced.
func (c *consumerCore) resetOffsets(ctx context.Context, offsets map[MessageQueue]int64) {
	c.rebalanceMu.Lock()
	defer c.rebalanceMu.Unlock()
	for mq, off := range offsets {
		c.mu.Lock()
		pq := c.pqs[mq]
		waiting := pq == nil && c.restarting[mq]
		if pq != nil || waiting {
			delete(c.pqs, mq)
			c.seeks[mq] = off
		}
		c.mu.Unlock()
		if waiting {
			// Its call was abandoned or returned: nothing but us stores
			// its offset.
			c.store.Update(mq, off, false)
			c.commitReset(ctx, mq)
			continue
		}
		if pq == nil {
			continue
		}
		pq.drop()
		// Before the store's update: the hook waits out a lite Poll of
		// the dropped queue in progress, which stores its older offset.
		if c.hooks.reset != nil {
			c.hooks.reset(mq, off)
		}
		c.restartAt(ctx, pq, func() { c.store.Update(mq, off, false) }, func() {
			c.commitReset(ctx, mq)
			c.log.Info("offset reset by the broker", zap.Stringer("queue", mq), zap.Int64("offset", off))
		})
	}
}

// commitReset sends mq's offset, stored by a reset or restart, after the
// group's sends in progress (sendOffsets): a persist round's older offset
// landing after this one would undo it. The queue is not owned here at
// this point, so whileOwned is off.
func (c *consumerCore) commitReset(ctx context.Context, mq MessageQueue) {
	pctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
	defer cancel()
	if _, err := c.sendOffsets(pctx, []MessageQueue{mq}, false, true); err != nil {
		c.log.Warn("committing a reset offset failed", zap.Stringer("queue", mq), zap.Error(err))
	}
}

// restartAt starts pq's queue afresh, pq dropped and out of c.pqs, with
// c.seeks holding where: once pq's listener calls in progress ended,
// store stores the new offset (over a later one a call stored), commit
// sends it, and the queue starts. The calls are waited for up to
// HandoverTimeout, as a hand-over waits, so that one that does not return
// holds neither c.rebalanceMu nor the reset: past it they settle nothing
// (pq.abandon; a late commit would undo the new offset), store and commit
// run at once, and the queue starts beside them, unless it is orderly:
// it stays in c.restarting, and in c.releasing until its call returned
// (no rebalance starts it, its broker lock is renewed), so that no two
// calls run on one orderly queue. Then a rebalance starts it as any
// queue it gains: only while it is still assigned here and with its
// broker lock taken again (another consumer may hold it by then), so
// that no two consumers run it; or hands it over. The caller holds
// c.rebalanceMu.
func (c *consumerCore) restartAt(ctx context.Context, pq *processQueue, store, commit func()) {
	mq := pq.mq
	orderly := c.hooks.orderly
	gaveUp := func() {
		// Past the calls settling now, whose offsets store must follow.
		<-pq.abandon()
		if ctx.Err() == nil {
			c.log.Warn("listener still busy on a queue restarting at a new offset; its result will be ignored",
				zap.Stringer("queue", mq), zap.Bool("orderly", orderly))
		}
		if orderly {
			c.mu.Lock()
			c.restarting[mq] = true
			c.releasing[mq] = true
			c.mu.Unlock()
		}
	}
	var released func()
	if orderly {
		released = func() {
			c.mu.Lock()
			delete(c.releasing, mq)
			c.mu.Unlock()
			c.triggerRebalance()
		}
	}
	acquired := c.awaitCalls(ctx, pq, gaveUp, released)
	store()
	if acquired {
		pq.consumeMu.Unlock()
	}
	commit()
	if acquired || !orderly {
		c.startQueue(ctx, mq)
	}
}
