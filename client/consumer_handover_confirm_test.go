package client

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestHandOverOffsetOrderlyLockHeldUntilConfirmed: an orderly consumer
// hands queue 1 over while its broker refuses the offset commit; the
// offset (3) is kept. The queue's broker lock stays ours until a broker
// confirms it: released, the next owner would lock the queue, start at
// the group's older committed offset (here none: ConsumeFrom) and consume
// messages 0..2, consumed here in order, again. A persist round that gets
// the offset confirmed releases it.
func TestHandOverOffsetOrderlyLockHeldUntilConfirmed(t *testing.T) {
	r := startHandOverRig(t, "orderly")
	ctx := context.Background()
	if h := r.b.lockHolder("HG", hoQ1); h != r.core.clientID {
		t.Fatalf("queue 1's lock released (holder %q) while its offset 3 is unconfirmed (committed %d)", h, r.committed(1))
	}
	r.core.persistAll(ctx)
	if h := r.b.lockHolder("HG", hoQ1); h != r.core.clientID {
		t.Fatalf("queue 1's lock released (holder %q) by a persist round its broker refused", h)
	}
	r.core.lockAll(ctx)
	if n := r.b.lockRequests(r.core.clientID, hoQ1); n < 2 {
		t.Fatalf("queue 1's lock not renewed while its offset is unconfirmed: %d lock requests name it", n)
	}
	r.accept()
	r.core.persistAll(ctx)
	if got, h := r.committed(1), r.b.lockHolder("HG", hoQ1); got != 3 || h != "" {
		t.Fatalf("after a persist round the broker took: committed %d (want 3), lock holder %q (want none)", got, h)
	}
}

// TestHandOverOffsetOrderlyLockHeldAtMostLockLife: a broker group that
// never confirms the kept offset of an orderly queue handed over holds the
// queue from its next owner no longer than the broker keeps a dead
// consumer's lock: then the lock is released, and the offset still kept.
func TestHandOverOffsetOrderlyLockHeldAtMostLockLife(t *testing.T) {
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	r := startHandOverRig(t, "orderly", WithClock(clock))
	ctx := context.Background()
	skew.Store(int64(unsettledLockHold - time.Second))
	r.core.persistAll(ctx)
	if h := r.b.lockHolder("HG", hoQ1); h != r.core.clientID {
		t.Fatalf("queue 1's lock released (holder %q) before its hold ran out", h)
	}
	skew.Store(int64(unsettledLockHold + time.Second))
	r.core.persistAll(ctx)
	if h := r.b.lockHolder("HG", hoQ1); h != "" {
		t.Fatalf("queue 1's lock still held (holder %q) after its hold ran out", h)
	}
	r.core.pendingMu.Lock()
	_, kept := r.core.pending[hoQ1]
	r.core.pendingMu.Unlock()
	if !kept {
		t.Fatal("queue 1's offset no longer kept once its lock was released")
	}
}

// TestHandOverOffsetOrderlyCloseKeepsLockOfUnconfirmed: Close unlocks only
// the orderly queues whose offset a broker took; the others' locks expire
// at the broker, so their next owner does not start at an older committed
// offset while the lock is free.
func TestHandOverOffsetOrderlyCloseKeepsLockOfUnconfirmed(t *testing.T) {
	r := startHandOverRig(t, "orderly")
	cctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := r.close(cctx); err == nil {
		t.Fatal("Close reported no failure though the broker refused every offset")
	}
	for _, mq := range []MessageQueue{hoQ0, hoQ1} {
		if h := r.b.lockHolder("HG", mq); h != r.core.clientID {
			t.Fatalf("%s unlocked on Close (holder %q) though its offset was refused (committed %d)", mq, h, r.committed(mq.QueueID))
		}
	}
}

// TestHandOverOffsetKeptThroughUnfinishedStart: a queue handed over with
// its offset kept (3) comes back while the group's committed offset is an
// older one (1), and the consumer closes after the queue's start offset
// was read but before the queue started. Reading it must not replace the
// kept offset: Close would send the older one for the queue still handed
// over, and its next owner would consume 1..2 again.
func TestHandOverOffsetKeptThroughUnfinishedStart(t *testing.T) {
	t.Parallel()
	for _, kind := range handOverKinds {
		t.Run(kind, func(t *testing.T) {
			r := startHandOverRig(t, kind)
			r.b.setOffset("HG", "T", 1, 1)
			ctx := context.Background()
			// What startQueue does up to the check that the consumer is
			// not closing.
			kept, _, ok := r.core.keptOffset(hoQ1)
			if !ok || kept != 3 {
				t.Fatalf("rig: kept %d, %v", kept, ok)
			}
			if off, err := r.core.startOffset(ctx, hoQ1, kept, true); err != nil || off != 3 {
				t.Fatalf("start offset %d, %v; want the kept 3", off, err)
			}
			r.accept()
			if err := r.close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := r.committed(1); got != 3 {
				t.Fatalf("committed offset of the queue handed over after Close: %d, want the kept 3", got)
			}
		})
	}
}

// TestHandOverOffsetPersistRoundAfterHandOver: a persist round lists the
// owned queues, then sends their offsets; a queue handed over in between
// (mqs, listed before) must not have its offset sent over the one its new
// owner committed (10): brokers keep the last offset they are sent. Its
// hand-over's commit may have been refused (its offset kept) or not have
// begun (the hand-over waits for a listener call in progress).
func TestHandOverOffsetPersistRoundAfterHandOver(t *testing.T) {
	for _, keptEntry := range []bool{true, false} {
		t.Run(map[bool]string{true: "kept", false: "handingOver"}[keptEntry], func(t *testing.T) {
			r := startHandOverRig(t, "concurrent")
			if !keptEntry {
				// As before the hand-over's commit: dropped, offset stored.
				r.core.pendingMu.Lock()
				delete(r.core.pending, hoQ1)
				r.core.pendingMu.Unlock()
			}
			r.b.setOffset("HG", "T", 1, 10)
			r.accept()
			r.core.persistOwned(context.Background(), []MessageQueue{hoQ0, hoQ1})
			if got := r.committed(1); got != 10 {
				t.Fatalf("committed offset of the queue handed over after a persist round: %d, want the new owner's 10", got)
			}
			if got := r.committed(0); got != 3 {
				t.Fatalf("committed offset of the owned queue after a persist round: %d, want 3", got)
			}
		})
	}
}

// TestHandOverOffsetDeadGroupDoesNotHoldUpCommit: a persist round
// resending the kept offsets of queues handed over to a broker group that
// does not answer (broker-a) must not hold up a Commit of another group's
// queues (broker-b), which answers at once; hand-overs send the same way.
func TestHandOverOffsetDeadGroupDoesNotHoldUpCommit(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	ba, bb := startQBroker(t, "broker-a"), startQBroker(t, "broker-b")
	var hold atomic.Bool // broker-a leaves offset commits unanswered for 1.5 s
	ba.answer(remoting.RequestUpdateConsumerOffset, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if hold.Load() {
			time.Sleep(1500 * time.Millisecond)
		}
		return ba.other(nil, req)
	})
	var split atomic.Bool // "!other" joins and takes broker-a's queues
	var l *LitePullConsumer
	for _, b := range []*qBroker{ba, bb} {
		fillHandOverBroker(t, ns, b)
		b.answer(remoting.RequestGetConsumerListByGroup, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
			ids := []string{l.ClientID()}
			if split.Load() {
				ids = append(ids, "!other") // sorts first: broker-a's queues are its share
			}
			resp := remoting.NewResponse(remoting.ResponseSuccess, "")
			resp.Body, _ = json.Marshal(wire.ConsumerListBody{ConsumerIDList: ids})
			return resp
		})
	}
	var err error
	l, err = NewLitePullConsumer(append(fastConsumerOpts(t, ns, "HG"), ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour),
		RebalanceInterval(time.Hour), RequestTimeout(time.Second), AutoCommit(false))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	c := l.core
	pollN(t, l, 12)
	if err := l.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// broker-a stops answering commits; its queues are handed over, their
	// offsets kept.
	hold.Store(true)
	split.Store(true)
	c.triggerRebalance()
	testutil.WaitFor(t, 10*time.Second, "broker-a's queues handed over", func() bool {
		if len(c.owned()) != 2 || c.owned()[0].BrokerName != "broker-b" || !c.rebalanceMu.TryLock() {
			return false
		}
		c.rebalanceMu.Unlock()
		return true
	})
	c.pendingMu.Lock()
	kept := len(c.pending)
	c.pendingMu.Unlock()
	if kept != 2 {
		t.Fatalf("rig: %d offsets kept, want broker-a's 2", kept)
	}
	// A persist round resends them; broker-a holds the first.
	sent := ba.count(remoting.RequestUpdateConsumerOffset)
	persisted := make(chan struct{})
	go func() { defer close(persisted); c.persistAll(c.ctx) }()
	defer func() { <-persisted }()
	testutil.WaitFor(t, 5*time.Second, "persist round at broker-a", func() bool {
		return ba.count(remoting.RequestUpdateConsumerOffset) > sent
	})
	// broker-b is healthy: a Commit of its queues is confirmed at once.
	bb.put("T", 0, "m", nil)
	pollN(t, l, 1)
	// Behind the persist round it would wait out broker-a's answer
	// (RequestTimeout, 1 s); the bound leaves room for a loaded machine
	// below that.
	cctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = l.Commit(cctx)
	off, _ := bb.offset("HG", "T", 0)
	if err != nil || off != 4 {
		t.Fatalf("Commit of broker-b's queues while a persist round waits on broker-a: %v after %v, broker-b committed %d (want 4)",
			err, time.Since(start).Round(time.Millisecond), off)
	}
}

// TestHandOverOffsetLateListenerOffsetNotForgotten: an orderly queue is
// handed over while its listener is still inside a call (past
// HandoverTimeout). The hand-over commits what was consumed so far (2);
// while that commit is in flight the listener returns and stores 3, and
// the lock waiter commits again. When the first commit's answer is
// processed before the waiter records its entry (forced here by holding
// the waiter in the handedOver hook), the confirmation of 2 must not make
// the store forget 3: the waiter would find nothing to send, and the next
// owner would consume message 2 again.
func TestHandOverOffsetLateListenerOffsetNotForgotten(t *testing.T) {
	ns, b := startHandOverBroker(t)
	var alone atomic.Bool
	alone.Store(true)
	var c *consumerCore
	answerMembers(b, func() string { return c.clientID }, &alone, nil)
	release := make(chan struct{})
	inside := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	p := newTestPush(t, ns, "HG", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour),
		RebalanceInterval(time.Hour), HandoverTimeout(50*time.Millisecond))
	c = p.core
	_ = p.Subscribe("T", "*")
	_ = p.RegisterOrderlyListener(func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
		if oc.Queue == hoQ1 && msgs[0].QueueOffset == 2 {
			close(inside)
			<-release
		}
		return OrderlySuccess
	})
	b.answer(remoting.RequestUpdateConsumerOffset, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		var h wire.UpdateConsumerOffsetRequestHeader
		_ = req.DecodeHeader(&h)
		if h.QueueID == 1 {
			releaseOnce.Do(func() {
				close(release)
				// The listener returns and stores 3 while this commit of 2
				// is in flight.
				if !eventually(5*time.Second, func() bool {
					off, err := c.store.Read(context.Background(), hoQ1, ReadFromMemory)
					return err == nil && off == 3
				}) {
					t.Error("the listener did not store offset 3")
				}
			})
		}
		return b.other(nil, req)
	})
	var calls atomic.Int32
	p.core.hooks.handedOver = func(mq MessageQueue) {
		if mq != hoQ1 || calls.Add(1) == 1 {
			return
		}
		// The lock waiter's hand-over: scheduled after the first commit's
		// answer was processed.
		// The first send holds its group's token until its answer is
		// processed.
		if !eventually(5*time.Second, func() bool { return !sendInProgress(c, "broker-a") }) {
			t.Error("the first commit was not processed")
		}
	}
	startPush(t, p)
	<-inside
	alone.Store(false)
	c.triggerRebalance()
	testutil.WaitFor(t, 10*time.Second, "hand-over and lock waiter done", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return calls.Load() >= 2 && !c.releasing[hoQ1] && c.pqs[hoQ1] == nil
	})
	if off, _ := b.offset("HG", "T", 1); off != 3 {
		c.pendingMu.Lock()
		_, kept := c.pending[hoQ1]
		c.pendingMu.Unlock()
		_, err := c.store.Read(context.Background(), hoQ1, ReadFromMemory)
		t.Fatalf("queue 1 committed %d after the listener consumed message 2 (want 3); kept %v, stored offset: %v", off, kept, err)
	}
}

// eventually is testutil.WaitFor for a goroutine other than the test's
// (a fake broker's handler, a consumer hook), where t.Fatal must not be
// called: it reports whether cond held before timeout.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// sendInProgress reports whether a send of broker group name's offsets
// holds its token.
func sendInProgress(c *consumerCore, name string) bool {
	c.sendingMu.Lock()
	defer c.sendingMu.Unlock()
	tok := c.sending[name]
	return tok != nil && len(tok.slot) > 0
}

// TestHandOverOffsetKeptNotSentBelowCommittedReadAtStart: queue 1's
// offset 3 is kept since its hand-over; its next owner consumed to 10,
// committed it and gave the queue back. Starting it here reads the
// committed 10 and would start there; before the queue started, a persist
// round runs or the consumer closes. Neither may move the group's offset
// back to the kept 3, for 3..9 were consumed by the other owner: the
// committed offset this consumer knew when it handed the queue over is
// not 10, so another committed since.
func TestHandOverOffsetKeptNotSentBelowCommittedReadAtStart(t *testing.T) {
	for _, kind := range handOverKinds {
		for _, then := range []string{"close", "persist"} {
			t.Run(kind+"/"+then, func(t *testing.T) {
				r := startHandOverRig(t, kind)
				r.b.setOffset("HG", "T", 1, 10)
				ctx := context.Background()
				kept, _, ok := r.core.keptOffset(hoQ1)
				if !ok || kept != 3 {
					t.Fatalf("rig: kept %d, %v", kept, ok)
				}
				if off, err := r.core.startOffset(ctx, hoQ1, kept, true); err != nil || off != 10 {
					t.Fatalf("start offset %d, %v; want the committed 10", off, err)
				}
				r.accept()
				if then == "persist" {
					r.core.persistAll(ctx)
				} else if err := r.close(ctx); err != nil {
					t.Fatal(err)
				}
				if got := r.committed(1); got != 10 {
					t.Fatalf("committed offset after %s: %d, want the other owner's 10", then, got)
				}
			})
		}
	}
}

// TestHandOverOffsetOrderlyCloseUnlocksConfirmedNotYetUnlocked: an
// orderly queue handed over with its offset unconfirmed (queue 1) keeps
// its lock. A persist round gets the offset confirmed while a rebalance
// runs, which defers the unlock to the next round; the consumer closes
// first. Close unlocks it, though it sends nothing for it: left locked,
// its next owner would wait for the broker to free it (60 s after the
// last renewal) with nothing unconfirmed.
func TestHandOverOffsetOrderlyCloseUnlocksConfirmedNotYetUnlocked(t *testing.T) {
	r := startHandOverRig(t, "orderly")
	ctx := context.Background()
	r.accept()
	r.core.rebalanceMu.Lock() // a rebalance in progress
	r.core.persistAll(ctx)
	r.core.rebalanceMu.Unlock()
	if got := r.committed(1); got != 3 {
		t.Fatalf("rig: committed %d, want 3", got)
	}
	if err := r.close(ctx); err != nil {
		t.Fatal(err)
	}
	if h := r.b.lockHolder("HG", hoQ1); h != "" {
		t.Fatalf("queue 1 still locked by %q after Close though its offset 3 was confirmed", h)
	}
}

// TestHandOverOffsetOrderlyUnlocksAtOnce: with no fault, once the
// rebalance that hands an orderly consumer's queue 1 over is done, the
// queue's offset is committed and its lock free for the next owner.
func TestHandOverOffsetOrderlyUnlocksAtOnce(t *testing.T) {
	ns, b := startHandOverBroker(t)
	var alone atomic.Bool
	alone.Store(true)
	var c *consumerCore
	answerMembers(b, func() string { return c.clientID }, &alone, nil)
	p := newTestPush(t, ns, "HG", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour), RebalanceInterval(time.Hour))
	c = p.core
	_ = p.Subscribe("T", "*")
	_ = p.RegisterOrderlyListener(func(context.Context, *ConsumeOrderlyContext, []*MessageExt) OrderlyResult { return OrderlySuccess })
	startPush(t, p)
	testutil.WaitFor(t, 5*time.Second, "queue 1 consumed", func() bool {
		off, err := c.store.Read(context.Background(), hoQ1, ReadFromMemory)
		return err == nil && off == 3
	})
	alone.Store(false)
	c.triggerRebalance()
	testutil.WaitFor(t, 5*time.Second, "queue 1 handed over", func() bool { return !c.isOwned(hoQ1) })
	c.rebalanceMu.Lock()
	c.rebalanceMu.Unlock()
	off, _ := b.offset("HG", "T", 1)
	if h := b.lockHolder("HG", hoQ1); h != "" || off != 3 {
		t.Fatalf("after a fault-free hand-over: holder %q (want none), committed %d (want 3)", h, off)
	}
	c.mu.Lock()
	n := len(c.unsettled)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d queues unsettled after a fault-free hand-over", n)
	}
}
