package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.uber.org/zap"
)

// Offsets a broker has not confirmed. A consumer keeps, per queue, the
// offset no broker has taken yet — a lite pull Commit's that could not be
// sent, a queue's handed over (rebalancing gave it to another consumer)
// that could not be — and sends it every PersistInterval and on Close
// until one does: a dropped offset would have the queue's next owner
// consume again what was consumed here. An entry is replaced by a newer
// offset of its queue and leaves once a broker confirmed it.
//
// A queue handed over has a new owner, which commits offsets of its own,
// and brokers keep the last offset they are sent. So the offset of a
// queue handed over is not sent once the group's committed offset reached
// it by another's commit (RemoteOffsetStore.persistUnlessPassed), and the
// entry is dropped. RocketMQ's client sends it once, when it gives the
// queue up. Should the queue come back first, it resumes at the kept
// offset unless the group's committed offset is past it (startOffset), and
// the offset is ours again once the queue started (takeBack).

// pendingOffset is an entry of consumerCore.pending.
type pendingOffset struct {
	seq uint64 // changes whenever the entry does
	// handedOver: the queue is no longer ours, and its offset is sent
	// only while its next owner has not committed (see above).
	handedOver bool
}

// recordCommits stores offsets and makes them pending (a lite pull
// Commit); the caller sends them with sendOffsets.
func (c *consumerCore) recordCommits(offsets map[MessageQueue]int64) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	for mq, off := range offsets {
		c.store.Update(mq, off, false)
		c.pendingSeq++
		c.pending[mq] = pendingOffset{seq: c.pendingSeq}
	}
}

// sendOffsets sends the offsets the store holds for mqs, riding out an
// election within ctx, to their broker groups side by side (sendGroup), so
// one that cannot answer does not use up the others' time, and returns
// the queues settled: those whose stored offset a broker confirmed (or,
// for a queue handed over, did not need: persistUnlessPassed), and those
// that hold none. It returns the other queues' failures joined.
func (c *consumerCore) sendOffsets(ctx context.Context, mqs []MessageQueue) (map[MessageQueue]bool, error) {
	rs, ok := c.store.(*RemoteOffsetStore)
	if !ok {
		// One file holds them all.
		return c.sendGroup(ctx, "", mqs, func(ctx context.Context, mqs []MessageQueue, _ map[MessageQueue]bool) (map[MessageQueue]int64, error) {
			done := make(map[MessageQueue]int64, len(mqs))
			if err := c.store.Persist(ctx, mqs); err != nil {
				return done, err
			}
			for _, mq := range mqs {
				if off, err := c.store.Read(ctx, mq, ReadFromMemory); err == nil {
					done[mq] = off
				}
			}
			return done, nil
		})
	}
	ctx, cancel := leaderWait(ctx)
	defer cancel()
	groups := byBroker(mqs)
	names := slices.Sorted(maps.Keys(groups))
	errs := make([]error, len(names))
	settled := make(map[MessageQueue]bool, len(mqs))
	var mu sync.Mutex // guards settled
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			s, err := c.sendGroup(ctx, name, groups[name], func(ctx context.Context, mqs []MessageQueue, handedOver map[MessageQueue]bool) (map[MessageQueue]int64, error) {
				return c.commitOffsets(ctx, rs, name, mqs, handedOver)
			})
			errs[i] = err
			mu.Lock()
			maps.Copy(settled, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	return settled, errors.Join(errs...)
}

// sendToken returns the token (a one-slot semaphore) of broker group
// name's offset sends ("" for a local store's file).
func (c *consumerCore) sendToken(name string) chan struct{} {
	c.sendingMu.Lock()
	defer c.sendingMu.Unlock()
	tok := c.sending[name]
	if tok == nil {
		tok = make(chan struct{}, 1)
		c.sending[name] = tok
	}
	return tok
}

// sendGroup sends the offsets of mqs, queues of broker group name, with
// send, after any send of the group's offsets in progress, and forgets the
// pending entries of mqs a broker confirmed and that did not change
// meanwhile, nor their stored offset (the store forgets those of queues
// handed over, too). It returns the queues settled (see sendOffsets).
func (c *consumerCore) sendGroup(ctx context.Context, name string, mqs []MessageQueue,
	send func(ctx context.Context, mqs []MessageQueue, handedOver map[MessageQueue]bool) (map[MessageQueue]int64, error)) (map[MessageQueue]bool, error) {
	tok := c.sendToken(name)
	select {
	case tok <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("client: offsets of broker group %q not sent: another send of them did not end in time: %w", name, ctx.Err())
	}
	defer func() { <-tok }()
	c.pendingMu.Lock()
	seen := make(map[MessageQueue]pendingOffset, len(mqs))
	handedOver := map[MessageQueue]bool{}
	for _, mq := range mqs {
		if e, ok := c.pending[mq]; ok {
			seen[mq] = e
			handedOver[mq] = e.handedOver
		}
	}
	c.pendingMu.Unlock()
	done, err := send(ctx, mqs, handedOver)
	settled := make(map[MessageQueue]bool, len(mqs))
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	for _, mq := range mqs {
		off, rerr := c.store.Read(ctx, mq, ReadFromMemory)
		sent, ok := done[mq]
		switch {
		case rerr != nil:
			// Nothing stored, nothing to lose.
		case !ok:
			continue
		case off != sent:
			// Stored since (an orderly listener still running when its
			// queue was handed over): the next send takes it.
			continue
		}
		settled[mq] = true
		if e, ok := seen[mq]; ok && c.pending[mq] == e {
			delete(c.pending, mq)
			if e.handedOver {
				c.store.Remove(mq)
			}
		}
	}
	return settled, err
}

// persistPending is the persist round's send of the pending offsets,
// those of queues handed over since included. An entry leaves only once a
// broker confirmed it: a queue taken since the round began may already
// hold a Commit's.
func (c *consumerCore) persistPending(ctx context.Context) {
	c.pendingMu.Lock()
	mqs := slices.Collect(maps.Keys(c.pending))
	c.pendingMu.Unlock()
	if len(mqs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
	defer cancel()
	if _, err := c.sendOffsets(cctx, mqs); err != nil && ctx.Err() == nil {
		c.warnOnce("persistPending", "committing offsets failed; retrying at the next persist interval", zap.Error(err))
	} else {
		c.clearWarn("persistPending")
	}
}

// handOverOffsets commits the offsets of mqs, queues handed over, riding
// out an election within ctx, and keeps pending those no broker took: the
// persist rounds and Close send them again (while a queue's next owner
// has not committed). The queues of one rebalance share one request
// timeout and go to their broker groups side by side (sendOffsets). A
// hand-over during close still commits, so ctx's cancellation is not
// followed; its deadline, or the request timeout, bounds the wait. It
// returns the queues settled (sendOffsets).
func (c *consumerCore) handOverOffsets(ctx context.Context, mqs []MessageQueue) map[MessageQueue]bool {
	if c.hooks.handedOver != nil {
		for _, mq := range mqs {
			c.hooks.handedOver(mq)
		}
	}
	c.pendingMu.Lock()
	for _, mq := range mqs {
		if _, err := c.store.Read(ctx, mq, ReadFromMemory); err == nil {
			c.pendingSeq++
			c.pending[mq] = pendingOffset{seq: c.pendingSeq, handedOver: true}
		} else {
			c.store.Remove(mq)
		}
	}
	c.pendingMu.Unlock()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.common.requestTimeout)
	if d, ok := ctx.Deadline(); ok {
		cancel()
		pctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
	}
	defer cancel()
	settled, err := c.sendOffsets(pctx, mqs)
	if err != nil {
		c.log.Warn("committing the offsets of queues handed over failed; kept, and sent again every PersistInterval and on Close",
			zap.Int("queues", len(mqs)), zap.Error(err))
	}
	return settled
}

// keptOffset returns the offset kept for mq since it was handed over,
// and its entry's sequence for takeBack; ok is false when none is kept.
func (c *consumerCore) keptOffset(mq MessageQueue) (off int64, seq uint64, ok bool) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	e, ok := c.pending[mq]
	if !ok || !e.handedOver {
		return 0, 0, false
	}
	off, err := c.store.Read(context.Background(), mq, ReadFromMemory)
	return off, e.seq, err == nil
}

// takeBack stores off, where mq, a queue handed over that came back,
// started again, and makes the entry kept for it (seq, from keptOffset)
// ours: sent as the owned queues' offsets are, with no check for another
// owner's commit. Only a queue that started takes it back: one whose start
// failed may yet go to another consumer first, and its kept offset must
// not be sent over that one's commits. An entry that changed or left
// meanwhile is not touched.
func (c *consumerCore) takeBack(mq MessageQueue, seq uint64, off int64) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	// Under pendingMu, so that a send confirming the kept entry meanwhile
	// (which forgets the queue's stored offset) comes before.
	c.store.Update(mq, off, false)
	if e, ok := c.pending[mq]; ok && e.handedOver && e.seq == seq {
		c.pendingSeq++
		c.pending[mq] = pendingOffset{seq: c.pendingSeq}
	}
}

// closeCommit is close's commit: the offsets of mqs, the queues owned when
// close began, and the pending ones, each sent to its group's leader
// riding out an election (sendOffsets) within ctx, or leaderFollowWait
// when ctx has no deadline. It returns the queues settled.
func (c *consumerCore) closeCommit(ctx context.Context, mqs []MessageQueue) (map[MessageQueue]bool, error) {
	all := slices.Clone(mqs)
	c.pendingMu.Lock()
	for mq := range c.pending {
		if !slices.Contains(mqs, mq) {
			all = append(all, mq)
		}
	}
	c.pendingMu.Unlock()
	return c.sendOffsets(ctx, all)
}

// commitOffsets sends the offsets the store holds for mqs to the leader of
// their broker group, name, riding out a leader change within ctx
// (onLeader: UPDATE_CONSUMER_OFFSET is idempotent). It returns the offset
// that reached the broker per queue, and the other queues' failures
// joined. The offset of a queue in handedOver is sent only while the
// group's committed offset has not moved past the one the store knew
// (persistUnlessPassed); one it was not sent for counts as reached.
func (c *consumerCore) commitOffsets(ctx context.Context, rs *RemoteOffsetStore, name string, mqs []MessageQueue, handedOver map[MessageQueue]bool) (map[MessageQueue]int64, error) {
	done := make(map[MessageQueue]int64, len(mqs))
	var errs []error
	for _, mq := range mqs {
		var sent int64
		err := onLeader(ctx, c.routes, name, c.cfg.common.requestTimeout,
			func(_ context.Context, addr string, err error) bool {
				_, retry := c.noteFailure(name, addr, err)
				return retry
			},
			func(ctx context.Context, addr string) (err error) {
				if handedOver[mq] {
					sent, err = rs.persistUnlessPassed(ctx, mq, addr)
				} else {
					sent, err = rs.persistAt(ctx, mq, addr)
				}
				return err
			})
		switch {
		case err != nil:
			errs = append(errs, err)
		case sent >= 0:
			done[mq] = sent
		}
	}
	return done, errors.Join(errs...)
}
