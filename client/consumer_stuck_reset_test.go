package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// resetByBroker sends c the RESET_CONSUMER_CLIENT_OFFSET a broker relays
// for an admin's reset of T/0 to off, and fails unless c answers within
// 5 s.
func resetByBroker(t *testing.T, b *qBroker, c *PushConsumer, group string, off int64) {
	t.Helper()
	b.mu.Lock()
	conn := b.members[group][c.ClientID()].conn
	b.mu.Unlock()
	req := remoting.NewRequest(remoting.RequestResetConsumerClientOffset, &wire.ResetOffsetRequestHeader{Topic: "T", Group: group, Timestamp: 1, IsForce: true},
		fmt.Appendf(nil, `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:%d}}`, off))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := conn.InvokeSync(ctx, req); err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("reset not answered in time (a stuck listener held it): %v %v", resp, err)
	}
}

// rebalanceWithin fails unless a rebalance of c completes within d.
func rebalanceWithin(t *testing.T, c *PushConsumer, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); c.core.rebalance(c.core.ctx) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("a rebalance did not complete in %v: a stuck listener holds the rebalance lock", d)
	}
}

// TestPushConsumerResetBesideStuckListener: a broker's reset of a queue
// whose concurrent listener call never returns waits for that call no
// longer than HandoverTimeout, as a hand-over does: the reset is answered,
// rebalances go on, the queue restarts at the reset offset, and the stuck
// call's result, when it returns, settles nothing.
func TestPushConsumerResetBesideStuckListener(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	s := newStuckListener(ConsumeRetryLater)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(300*time.Millisecond))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(s.listen)
	startPush(t, c)
	t.Cleanup(s.unblock) // before Close, which waits for the call
	<-s.inside
	testutil.WaitFor(t, 5*time.Second, "0, 2, 3, 4 consumed", func() bool { return s.got.len() == 4 })
	resetByBroker(t, b, c, "G", 0)
	rebalanceWithin(t, c, 5*time.Second)
	testutil.WaitFor(t, 5*time.Second, "0..4 again from the reset offset", func() bool { return s.got.len() == 9 })
	testutil.WaitFor(t, 5*time.Second, "T/0's offset committed at 5", func() bool { off, _ := b.offset("G", "T", 0); return off == 5 })
	s.unblock()
	<-s.returned
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(sendBacksOf(b)); n != 0 {
		t.Fatalf("%d send-backs: the stuck call's late RECONSUME_LATER was settled", n)
	}
}

// TestPushConsumerOrderlyResetBesideStuckListener: the same for an
// orderly listener, whose queue must not restart beside the stuck call
// (one call per orderly queue at a time): the reset is answered and
// rebalances go on within the bound; the queue restarts at the reset
// offset once the call returned, and that call's late result does not
// move the committed offset off the reset one.
func TestPushConsumerOrderlyResetBesideStuckListener(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	var (
		got                 collector
		inFlight, overlap   atomic.Int32
		stuck, again        = make(chan struct{}), make(chan struct{})
		release, release2   = make(chan struct{}), make(chan struct{})
		stuckOnce, zeroOnce sync.Once
		returned            = make(chan struct{})
		zeros               atomic.Int32
	)
	unblock := func(ch chan struct{}) func() {
		var once sync.Once
		return func() { once.Do(func() { close(ch) }) }
	}
	unblock1, unblock2 := unblock(release), unblock(release2)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(300*time.Millisecond))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterOrderlyListener(func(_ context.Context, _ *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
		if inFlight.Add(1) > 1 {
			overlap.Add(1)
		}
		defer inFlight.Add(-1)
		got.add(msgs...)
		switch string(msgs[0].Body) {
		case "1":
			block := false
			stuckOnce.Do(func() { block = true })
			if block {
				close(stuck)
				<-release
				close(returned)
			}
		case "0":
			if zeros.Add(1) == 2 { // the first delivery after the reset
				zeroOnce.Do(func() { close(again) })
				<-release2
			}
		}
		return OrderlySuccess
	})
	startPush(t, c)
	t.Cleanup(unblock2)
	t.Cleanup(unblock1) // before Close, which waits for the call
	<-stuck
	resetByBroker(t, b, c, "G", 0)
	rebalanceWithin(t, c, 5*time.Second)
	if n := got.len(); n != 2 {
		t.Fatalf("%d deliveries while the stuck call runs, want 2 (0, 1): the queue restarted beside it", n)
	}
	unblock1()
	<-returned
	<-again
	// The restarted queue's first call holds 0; the persist rounds must
	// commit the reset offset, not the one the stuck call's late success
	// would (2).
	commits := b.count(remoting.RequestUpdateConsumerOffset)
	testutil.WaitFor(t, 5*time.Second, "persist rounds", func() bool { return b.count(remoting.RequestUpdateConsumerOffset) > commits+2 })
	if off, _ := b.offset("G", "T", 0); off != 0 {
		t.Fatalf("T/0's committed offset %d after the reset to 0", off)
	}
	unblock2()
	testutil.WaitFor(t, 5*time.Second, "T/0 consumed to its end again", func() bool { off, _ := b.offset("G", "T", 0); return off == 5 })
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d listener calls overlapped on the orderly queue", n)
	}
}

// TestPushConsumerRestartBesideStuckListener: the same for a queue that
// started over (an OFFSET_ILLEGAL answer below the offsets held,
// restartQueue) while a concurrent listener call on it never returns:
// the queue starts afresh within the bound, rebalances go on, and the
// stuck call's late result settles nothing.
func TestPushConsumerRestartBesideStuckListener(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	s := newStuckListener(ConsumeRetryLater)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(300*time.Millisecond))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(s.listen)
	startPush(t, c)
	t.Cleanup(s.unblock) // before Close, which waits for the call
	<-s.inside
	testutil.WaitFor(t, 5*time.Second, "0, 2, 3, 4 consumed", func() bool { return s.got.len() == 4 })
	wipeAndRefill(t, b, "a", "b")
	rebalanceWithin(t, c, 5*time.Second)
	testutil.WaitFor(t, 5*time.Second, "the new queue's a, b", func() bool { return s.got.len() == 6 })
	testutil.WaitFor(t, 5*time.Second, "T/0's offset committed at 2", func() bool { off, _ := b.offset("G", "T", 0); return off == 2 })
	s.unblock()
	<-s.returned
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(sendBacksOf(b)); n != 0 {
		t.Fatalf("%d send-backs: the stuck call's late RECONSUME_LATER was settled", n)
	}
	if off, _ := b.offset("G", "T", 0); off != 2 {
		t.Fatalf("T/0's committed offset %d after close, want 2", off)
	}
}

// TestPushConsumerResetBesideStuckListenerKeepsPoolConsuming: once a reset
// gave up on a stuck concurrent call, the batches of the dropped queue
// still in the pool's queue must not hold the pool's goroutines: each is
// skipped, and the restarted queue is consumed while the call stays
// stuck (Go's RWMutex blocks a reader behind the waiting writer, which
// waits for the stuck call).
func TestPushConsumerResetBesideStuckListenerKeepsPoolConsuming(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 6 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	var (
		got                collector
		stuckOnce, gateOne sync.Once
		stuck, gated       = make(chan struct{}), make(chan struct{})
		release, gate      = make(chan struct{}), make(chan struct{})
	)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(300*time.Millisecond),
		ConsumeGoroutines(2))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		switch string(msgs[0].Body) {
		case "1":
			block := false
			stuckOnce.Do(func() { block = true })
			if block {
				close(stuck)
				<-release
				return ConsumeSuccess
			}
		case "0":
			block := false
			gateOne.Do(func() { block = true })
			if block {
				close(gated)
				<-gate
				return ConsumeSuccess
			}
		}
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the call
	<-stuck
	<-gated
	// Both goroutines are in the listener; 2..5 wait in the pool's queue.
	resetByBroker(t, b, c, "G", 0)
	close(gate)
	testutil.WaitFor(t, 5*time.Second, "the restarted queue's 0..5 consumed beside the stuck call", func() bool {
		return got.len() == 6
	})
}
