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
// offset of its queue and leaves once a broker confirmed it, or, for a
// queue handed over, once its broker group left the cluster: no route
// names it any more (dropOffline).
//
// A queue handed over has a new owner, which commits offsets of its own,
// and brokers keep the last offset they are sent. So the offset of a
// queue handed over is not sent once the group's committed offset reached
// it by another's commit, one other than the committed offset known at the
// hand-over (RemoteOffsetStore.persistUnlessPassed), and the entry is
// dropped. RocketMQ's client sends it once, when it gives the
// queue up. Should the queue come back first, it resumes at the kept
// offset unless the group's committed offset is past it (startOffset), and
// the offset is ours again once the queue started (takeBack).

// pendingOffset is an entry of consumerCore.pending.
type pendingOffset struct {
	seq uint64 // changes whenever the entry does
	// handedOver: the queue is no longer ours, and its offset is sent
	// only while its next owner has not committed (see above).
	handedOver bool
	// known, when hasKnown, is the group's committed offset a remote
	// store knew when the queue was handed over: a different one found
	// later is another owner's commit (persistUnlessPassed).
	known    int64
	hasKnown bool
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
// that hold none. It returns the other queues' failures joined. With
// whileOwned, a queue of mqs without a pending entry is sent only while
// it is still owned: one handed over since mqs was listed is its
// hand-over's to send (handOverOffsets), never over its new owner's
// commit. With once (a persist round's owned queues), each offset goes
// to the group's address once, without riding out an election: the next
// round sends it again, and a retry's answer from a member whose pulls
// were marked down would lift that mark.
func (c *consumerCore) sendOffsets(ctx context.Context, mqs []MessageQueue, whileOwned, once bool) (map[MessageQueue]bool, error) {
	rs, ok := c.store.(*RemoteOffsetStore)
	if !ok {
		return c.sendFile(ctx, mqs)
	}
	ctx, cancel := leaderWait(ctx, c.cfg.common.leaderFollowWait)
	defer cancel()
	groups := byBroker(mqs)
	names := slices.Sorted(maps.Keys(groups))
	errs := make([]error, len(names))
	settled := make(map[MessageQueue]bool, len(mqs))
	var mu sync.Mutex // guards settled
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			s, err := c.sendGroup(ctx, rs, name, groups[name], whileOwned, once)
			errs[i] = err
			mu.Lock()
			maps.Copy(settled, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	return settled, errors.Join(errs...)
}

// sendToken is an entry of consumerCore.sending: a one-slot semaphore
// and the number of sends holding or waiting for it.
type sendToken struct {
	slot  chan struct{}
	users int // guarded by consumerCore.sendingMu
}

// sendToken takes the token of broker group name's offset sends ("" for a
// local store's file) within ctx, and returns its release. The entry
// leaves the table when its last user lets go: with no send holding or
// waiting for it, a new token orders the next sends as well.
func (c *consumerCore) sendToken(ctx context.Context, name string) (func(), error) {
	c.sendingMu.Lock()
	tok := c.sending[name]
	if tok == nil {
		tok = &sendToken{slot: make(chan struct{}, 1)}
		c.sending[name] = tok
	}
	tok.users++
	c.sendingMu.Unlock()
	leave := func() {
		c.sendingMu.Lock()
		if tok.users--; tok.users == 0 {
			delete(c.sending, name)
		}
		c.sendingMu.Unlock()
	}
	select {
	case tok.slot <- struct{}{}:
		return func() { <-tok.slot; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("client: offsets of broker group %q not sent: another send of them did not end in time: %w", name, ctx.Err())
	}
}

// sendFile writes the offsets of mqs to a local store's file (which holds
// them all) and settles them as sendGroup does.
func (c *consumerCore) sendFile(ctx context.Context, mqs []MessageQueue) (map[MessageQueue]bool, error) {
	release, err := c.sendToken(ctx, "")
	if err != nil {
		return nil, err
	}
	defer release()
	seen := make(map[MessageQueue]pendingOffset, len(mqs))
	c.pendingMu.Lock()
	for _, mq := range mqs {
		if e, ok := c.pending[mq]; ok {
			seen[mq] = e
		}
	}
	c.pendingMu.Unlock()
	done := make(map[MessageQueue]int64, len(mqs))
	if err := c.store.Persist(ctx, mqs); err != nil {
		return c.settle(mqs, seen, done), err
	}
	for _, mq := range mqs {
		if off, err := c.store.Read(ctx, mq, ReadFromMemory); err == nil {
			done[mq] = off
		}
	}
	return c.settle(mqs, seen, done), nil
}

// sendGroup sends the offsets of mqs, queues of broker group name, to its
// leader, riding out a leader change within ctx (onLeader:
// UPDATE_CONSUMER_OFFSET is idempotent), after any send of the group's
// offsets in progress. A queue is sent as its pending entry says when it
// is sent: one handed over only while the group's committed offset has
// not moved past the one the store knew at the hand-over
// (persistUnlessPassed; one it was not sent for counts as confirmed); see sendOffsets for whileOwned. It
// settles the queues confirmed (settle).
func (c *consumerCore) sendGroup(ctx context.Context, rs *RemoteOffsetStore, name string, mqs []MessageQueue, whileOwned, once bool) (map[MessageQueue]bool, error) {
	release, err := c.sendToken(ctx, name)
	if err != nil {
		return nil, err
	}
	defer release()
	seen := make(map[MessageQueue]pendingOffset, len(mqs))
	done := make(map[MessageQueue]int64, len(mqs))
	var errs []error
	for _, mq := range mqs {
		c.pendingMu.Lock()
		e, kept := c.pending[mq]
		c.pendingMu.Unlock()
		if kept {
			seen[mq] = e
		} else if whileOwned && !c.isOwned(mq) {
			continue
		}
		var sent int64
		send := func(ctx context.Context, addr string) (err error) {
			if e.handedOver {
				sent, err = rs.persistUnlessPassed(ctx, mq, addr, e.known, e.hasKnown)
			} else {
				sent, err = rs.persistAt(ctx, mq, addr)
			}
			return err
		}
		var err error
		if once {
			err = c.sendOnce(ctx, name, send)
		} else {
			err = onLeader(ctx, c.routes, name, c.cfg.common.requestTimeout, c.cfg.common.leaderFollowWait,
				func(_ context.Context, addr string, err error) bool {
					_, retry := c.noteFailure(name, addr, err)
					return retry
				}, send)
		}
		switch {
		case err != nil:
			errs = append(errs, err)
		case sent >= 0:
			done[mq] = sent
		}
	}
	return c.settle(mqs, seen, done), errors.Join(errs...)
}

// sendOnce runs send at broker group name's address as the routes know
// it, once, within the request timeout.
func (c *consumerCore) sendOnce(ctx context.Context, name string, send func(context.Context, string) error) error {
	addr := c.routes.brokerAddr(name)
	if addr == "" {
		return fmt.Errorf("%w: broker group %q has no known member", ErrNoBroker, name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
	defer cancel()
	return send(ctx, addr)
}

// settle returns the queues of mqs settled once done, the offsets that
// reached their broker, was sent (see sendOffsets), and forgets the
// pending entries (seen, as they were sent) of those that did not change
// meanwhile; the store forgets the offsets of those handed over, too. A
// queue whose stored offset changed since is not settled: an orderly
// listener still running when its queue was handed over stored a later
// one, which the next send takes.
func (c *consumerCore) settle(mqs []MessageQueue, seen map[MessageQueue]pendingOffset, done map[MessageQueue]int64) map[MessageQueue]bool {
	settled := make(map[MessageQueue]bool, len(mqs))
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	for _, mq := range mqs {
		off, err := c.store.Read(context.Background(), mq, ReadFromMemory)
		sent, ok := done[mq]
		if err == nil && (!ok || off != sent) {
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
	return settled
}

// isOwned reports whether mq has a live process queue.
func (c *consumerCore) isOwned(mq MessageQueue) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pqs[mq] != nil
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
	if _, err := c.sendOffsets(cctx, mqs, false, false); err != nil && ctx.Err() == nil {
		c.warnOnce("persistPending", "committing offsets failed; retrying at the next persist interval", zap.Error(err))
	} else {
		c.clearWarn("persistPending")
	}
}

// dropOffline drops the offsets kept for queues handed over whose broker
// group no cached route names any more (routeManager.forgetOffline): they
// can be committed nowhere, and the queues' next owner starts at the
// group's committed offset wherever the group comes back. A queue still
// owned keeps its pending offset (a lite pull Commit's): its group may be
// missing from the routes only for a while, and Commit promises to send
// it until a broker takes it. A local store's file takes its offsets
// wherever the brokers are.
func (c *consumerCore) dropOffline() {
	if _, ok := c.store.(*RemoteOffsetStore); !ok {
		return
	}
	routed := c.routes.routed()
	if routed == nil {
		return
	}
	dropped := map[string][]string{} // broker group → "queue@offset"
	c.pendingMu.Lock()
	for mq, e := range c.pending {
		if routed[mq.BrokerName] || !e.handedOver {
			continue
		}
		off, err := c.store.Read(context.Background(), mq, ReadFromMemory)
		if err != nil {
			off = -1
		}
		delete(c.pending, mq)
		c.store.Remove(mq)
		dropped[mq.BrokerName] = append(dropped[mq.BrokerName], fmt.Sprintf("%s@%d", mq, off))
	}
	c.pendingMu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(dropped)) {
		slices.Sort(dropped[name])
		c.log.Warn("broker group left the cluster (no route names it); dropping the offsets of queues handed over that no broker of it confirmed; their next owners may consume those messages again",
			zap.String("brokerName", name), zap.Strings("offsets", dropped[name]))
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
	rs, _ := c.store.(*RemoteOffsetStore)
	c.pendingMu.Lock()
	for _, mq := range mqs {
		if _, err := c.store.Read(ctx, mq, ReadFromMemory); err == nil {
			c.pendingSeq++
			e := pendingOffset{seq: c.pendingSeq, handedOver: true}
			if rs != nil {
				e.known, e.hasKnown = rs.knownCommitted(mq)
			}
			c.pending[mq] = e
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
	settled, err := c.sendOffsets(pctx, mqs, false, false)
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
	return c.sendOffsets(ctx, all, false, false)
}
