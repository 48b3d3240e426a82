package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// processQueue is the consumer-side cache of one assigned queue
// (RocketMQ's ProcessQueue): messages pulled but not yet consumed, ordered
// by queue offset. Its counts drive flow control, and its lowest
// unconsumed offset is what gets committed, so a crash redelivers rather
// than loses messages consumed out of order.
type processQueue struct {
	mq MessageQueue

	// ctx is cancelled when the queue is dropped (handed over, or the
	// consumer closes); the queue's pull loop and consume goroutine end.
	ctx    context.Context
	cancel context.CancelFunc

	// consumeMu is held (read) by concurrent listener calls and (write)
	// by orderly ones and by the hand-over, which thus waits for calls in
	// progress before the queue's offset is committed and its lock freed.
	consumeMu sync.RWMutex

	dropped atomic.Bool

	mu sync.Mutex
	// abandoned is set when a hand-over stopped waiting for the queue's
	// concurrent listener calls (HandoverTimeout) and commits its offset
	// without them: the next owner starts from that offset, so a call
	// returning later settles nothing (ConsumeMessageConcurrentlyService
	// discards the result of a dropped queue). A call that began settling
	// before (settling) is waited for instead: its send-backs may land at
	// any moment, and the offset committed must count them. One decision
	// under mu, so a call is either counted or abandoned, never both.
	abandoned bool                  // guarded by mu
	settling  int                   // guarded by mu; concurrent calls settling their result
	settled   chan struct{}         // guarded by mu; closed when settling drops to 0 after abandon
	msgs      map[int64]*MessageExt // guarded by mu; cached, not consuming
	order     []int64               // guarded by mu; offsets put, ascending; may hold removed ones
	consuming map[int64]*MessageExt // guarded by mu; orderly: taken by the listener
	size      int64                 // guarded by mu; body bytes of msgs + consuming
	maxOffset int64                 // guarded by mu; highest offset put
	locked    bool                  // guarded by mu; orderly: the broker lock is held
	// started holds, for each message a concurrent listener call is
	// consuming, when the call began: ConsumeTimeout's clock. timedOut
	// holds the messages the consume timeout took from their call
	// (claimTimedOut): the call's result no longer settles them. One
	// whose send-back failed goes back to its call if that still runs
	// (unclaim), else it stays held until a send-back succeeds.
	started  map[int64]time.Time // guarded by mu
	timedOut map[int64]bool      // guarded by mu
	lockedAt time.Time           // guarded by mu

	// dlqWarn rate-limits the warning of an orderly batch whose
	// dead-letter send keeps failing; guarded by consumeMu (held for
	// writing by the orderly consume loop).
	dlqWarn dlqWarning
	// deadLettered holds the offsets of the orderly batch in progress
	// that reached the DLQ while a later one of the batch could not: the
	// batch is consumed again, and if it is dead-lettered again those are
	// not sent twice. Guarded by consumeMu, as dlqWarn.
	deadLettered map[int64]bool

	// kick wakes the orderly consume goroutine when messages arrive.
	kick chan struct{}
}

func newProcessQueue(parent context.Context, mq MessageQueue) *processQueue {
	ctx, cancel := context.WithCancel(parent)
	return &processQueue{mq: mq, ctx: ctx, cancel: cancel, msgs: map[int64]*MessageExt{}, consuming: map[int64]*MessageExt{},
		started: map[int64]time.Time{}, timedOut: map[int64]bool{}, maxOffset: -1, kick: make(chan struct{}, 1)}
}

// drop marks the queue dropped and stops its goroutines.
func (pq *processQueue) drop() {
	pq.dropped.Store(true)
	pq.cancel()
}

// beginSettle registers a concurrent call about to settle its result
// (send back failed messages, store the offset); false when the queue was
// abandoned first: the call settles nothing. endSettle ends it.
func (pq *processQueue) beginSettle() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if pq.abandoned {
		return false
	}
	pq.settling++
	return true
}

// endSettle ends what beginSettle began, once the call's offset is stored.
func (pq *processQueue) endSettle() {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if pq.settling--; pq.settling == 0 && pq.settled != nil {
		close(pq.settled)
		pq.settled = nil
	}
}

// abandon makes the calls that have not begun settling settle nothing,
// and returns a channel closed once those settling have ended.
func (pq *processQueue) abandon() <-chan struct{} {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.abandoned = true
	if pq.settling == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	if pq.settled == nil {
		pq.settled = make(chan struct{})
	}
	return pq.settled
}

// put caches pulled messages (ascending offsets) and reports whether the
// queue had nothing in flight before, which orderly consumption uses.
func (pq *processQueue) put(msgs []*MessageExt) {
	pq.mu.Lock()
	for _, m := range msgs {
		if _, dup := pq.msgs[m.QueueOffset]; dup || m.QueueOffset <= pq.maxOffset {
			continue
		}
		pq.msgs[m.QueueOffset] = m
		pq.order = append(pq.order, m.QueueOffset)
		m.cachedSize = int64(len(m.Body))
		pq.size += m.cachedSize
		pq.maxOffset = m.QueueOffset
	}
	pq.mu.Unlock()
	select {
	case pq.kick <- struct{}{}:
	default:
	}
}

// trimLocked drops removed offsets from the head of order.
func (pq *processQueue) trimLocked() {
	i := 0
	for i < len(pq.order) {
		o := pq.order[i]
		if _, ok := pq.msgs[o]; ok {
			break
		}
		if _, ok := pq.consuming[o]; ok {
			break
		}
		i++
	}
	if i > 0 {
		pq.order = slices.Delete(pq.order, 0, i)
	}
}

// remove forgets consumed messages and returns the offset to commit: the
// lowest offset still cached, or one past the highest put when nothing is
// (ProcessQueue.removeMessage). -1 means nothing was ever put.
func (pq *processQueue) remove(msgs []*MessageExt) int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if old, ok := pq.msgs[m.QueueOffset]; ok {
			delete(pq.msgs, m.QueueOffset)
			delete(pq.started, m.QueueOffset)
			delete(pq.timedOut, m.QueueOffset)
			pq.size -= old.cachedSize
		}
	}
	return pq.commitOffsetLocked()
}

// beginCall records that a concurrent listener call consuming msgs began
// at (PROPERTY_CONSUME_START_TIME's role in RocketMQ's cleanExpiredMsg).
func (pq *processQueue) beginCall(msgs []*MessageExt, at time.Time) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if pq.msgs[m.QueueOffset] == m && !pq.timedOut[m.QueueOffset] {
			pq.started[m.QueueOffset] = at
		}
	}
}

// endCall ends what beginCall began and returns the messages of msgs the
// consume timeout took from the call meanwhile (nil: none), which the
// call's result must not settle: those it let go already (only the call
// itself or the timeout lets go of a message in a call) and those it
// claimed and holds, its send-back in flight or failed after the call
// ended. One decision under mu with claimTimedOut and unclaim, so a
// message is settled by one of them only.
func (pq *processQueue) endCall(msgs []*MessageExt) (taken map[*MessageExt]bool) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		delete(pq.started, m.QueueOffset)
		if pq.msgs[m.QueueOffset] != m || pq.timedOut[m.QueueOffset] {
			if taken == nil {
				taken = map[*MessageExt]bool{}
			}
			taken[m] = true
		}
	}
	return taken
}

// claimTimedOut returns the lowest-offset message held when its listener
// call began before deadline, or the consume timeout took it already and
// its send-back failed; it is the consume timeout's from then on. nil
// when the lowest is not such a message (ProcessQueue.cleanExpiredMsg
// looks at msgTreeMap's first entry only: the messages behind it do not
// hold the offset).
func (pq *processQueue) claimTimedOut(deadline time.Time) *MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.trimLocked()
	if len(pq.order) == 0 {
		return nil
	}
	o := pq.order[0]
	m := pq.msgs[o]
	if m == nil {
		return nil
	}
	if began, ok := pq.started[o]; pq.timedOut[o] || ok && began.Before(deadline) {
		pq.timedOut[o] = true
		return m
	}
	return nil
}

// unclaim gives back to its call a message claimTimedOut returned whose
// send-back failed: nothing was sent, so the call's result, when it
// returns, settles it (RocketMQ's processConsumeResult removes it), and
// the next round claims it again if the call is still running then. A
// call that ended meanwhile left it to the consume timeout (endCall), so
// it stays claimed, for the next round to send back.
func (pq *processQueue) unclaim(m *MessageExt) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if _, running := pq.started[m.QueueOffset]; running && pq.msgs[m.QueueOffset] == m {
		delete(pq.timedOut, m.QueueOffset)
	}
}

func (pq *processQueue) commitOffsetLocked() int64 {
	pq.trimLocked()
	if len(pq.order) > 0 {
		return pq.order[0]
	}
	if pq.maxOffset < 0 {
		return -1
	}
	return pq.maxOffset + 1
}

// stats returns the cached count, body bytes and offset span, for flow control.
func (pq *processQueue) stats() (count int, size int64, span int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.trimLocked()
	count = len(pq.msgs) + len(pq.consuming)
	if len(pq.order) > 0 {
		span = pq.maxOffset - pq.order[0]
	}
	return count, pq.size, span
}

// take moves up to n of the lowest-offset cached messages to the
// consuming set (orderly; ProcessQueue.takeMessages).
func (pq *processQueue) take(n int) []*MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.trimLocked()
	var out []*MessageExt
	for _, o := range pq.order {
		if len(out) == n {
			break
		}
		if m, ok := pq.msgs[o]; ok {
			delete(pq.msgs, o)
			pq.consuming[o] = m
			out = append(out, m)
		}
	}
	return out
}

// commitConsuming forgets the consuming set (orderly success) and returns
// the offset to commit.
func (pq *processQueue) commitConsuming() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for o, m := range pq.consuming {
		pq.size -= m.cachedSize
		delete(pq.consuming, o)
	}
	return pq.commitOffsetLocked()
}

// requeueConsuming puts the consuming set back to be consumed again
// (orderly failure; makeMessageToConsumeAgain).
func (pq *processQueue) requeueConsuming() {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for o, m := range pq.consuming {
		pq.msgs[o] = m
		delete(pq.consuming, o)
	}
}

// setLocked records the broker lock state.
func (pq *processQueue) setLocked(locked bool, at time.Time) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.locked = locked
	if locked {
		pq.lockedAt = at
	}
}

// isLocked reports whether the lock is held and younger than maxAge
// (RocketMQ's REBALANCE_LOCK_MAX_LIVE_TIME: the client stops trusting a
// lock it has not renewed well before the broker's 60 s expiry).
func (pq *processQueue) isLocked(now time.Time, maxAge time.Duration) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.locked && now.Sub(pq.lockedAt) < maxAge
}

// pass records the message at off as settled without being cached (an
// undecodable message sent to the DLQ): the offset committed moves past it
// once the messages before it are consumed.
func (pq *processQueue) pass(off int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.maxOffset = max(pq.maxOffset, off)
}

// highest returns the highest queue offset put (-1: none).
func (pq *processQueue) highest() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.maxOffset
}

// hasMessages reports whether anything is cached or being consumed.
func (pq *processQueue) hasMessages() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return len(pq.msgs)+len(pq.consuming) > 0
}
