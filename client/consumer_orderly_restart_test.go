package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// stuckOrderly is an orderly listener whose first call on body "1" blocks
// until unblock, and which counts calls that overlap.
type stuckOrderly struct {
	got               collector
	inFlight, overlap atomic.Int32
	stuck, returned   chan struct{}
	release           chan struct{}
	once, unblockOnce sync.Once
}

func newStuckOrderly() *stuckOrderly {
	return &stuckOrderly{stuck: make(chan struct{}), returned: make(chan struct{}), release: make(chan struct{})}
}

func (s *stuckOrderly) unblock() { s.unblockOnce.Do(func() { close(s.release) }) }

func (s *stuckOrderly) listen(_ context.Context, _ *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
	if s.inFlight.Add(1) > 1 {
		s.overlap.Add(1)
	}
	defer s.inFlight.Add(-1)
	s.got.add(msgs...)
	block := false
	if string(msgs[0].Body) == "1" {
		s.once.Do(func() { block = true })
	}
	if block {
		close(s.stuck)
		<-s.release
		close(s.returned)
	}
	return OrderlySuccess
}

// switchStrategy allocates every queue to the one consumer of its tests
// until none is set.
type switchStrategy struct{ none atomic.Bool }

func (*switchStrategy) Name() string { return "SWITCH" }

func (s *switchStrategy) Allocate(_, _ string, mqAll []MessageQueue, _ []string) ([]MessageQueue, error) {
	if s.none.Load() {
		return nil, nil
	}
	return mqAll, nil
}

// startStuckOrderlyReset starts an orderly consumer of T's one queue
// holding 0..4 whose call on 1 sticks, and has the broker reset T/0 to 0
// beside that call: the queue then waits to restart until the call
// returns.
func startStuckOrderlyReset(t *testing.T, opts ...ConsumerOpt) (*qBroker, *PushConsumer, *stuckOrderly) {
	t.Helper()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	s := newStuckOrderly()
	c := newTestPush(t, ns, "G", append([]ConsumerOpt{ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(300 * time.Millisecond),
		LockInterval(50 * time.Millisecond)}, opts...)...)
	_ = c.Subscribe("T", "*")
	_ = c.RegisterOrderlyListener(s.listen)
	startPush(t, c)
	t.Cleanup(s.unblock) // before Close, which waits for the call
	<-s.stuck
	testutil.WaitFor(t, 5*time.Second, "T/0's offset committed at 1", func() bool { off, _ := b.offset("G", "T", 0); return off == 1 })
	resetByBroker(t, b, c, "G", 0)
	return b, c, s
}

// awaitRestartDue unblocks s's stuck call and waits until c let go of the
// queue's restart wait (c.releasing) and a rebalance ran after it.
func awaitRestartDue(t *testing.T, c *PushConsumer, s *stuckOrderly) {
	t.Helper()
	q0 := MessageQueue{"T", "broker-a", 0}
	s.unblock()
	<-s.returned
	testutil.WaitFor(t, 5*time.Second, "the stuck call let go of T/0", func() bool {
		c.core.mu.Lock()
		defer c.core.mu.Unlock()
		return !c.core.releasing[q0]
	})
	rebalanceWithin(t, c, 5*time.Second)
}

// TestOrderlyRestartTakesLockAgain: an orderly queue whose restart waited
// for a stuck listener call starts, once the call returned, only with its
// broker lock taken again: another consumer that took it meanwhile (ours
// expired while renewals failed) keeps it, and the queue restarts at the
// reset offset once the lock is ours again.
func TestOrderlyRestartTakesLockAgain(t *testing.T) {
	t.Parallel()
	b, c, s := startStuckOrderlyReset(t)
	q0 := MessageQueue{"T", "broker-a", 0}
	b.mu.Lock()
	b.locks["G|T|0"] = "someone-else"
	b.mu.Unlock()
	awaitRestartDue(t, c, s)
	if slices.Contains(c.core.owned(), q0) {
		t.Fatal("T/0 restarted while another consumer holds its broker lock")
	}
	if n := s.got.len(); n != 2 {
		t.Fatalf("%d deliveries, want 2 (0, 1): consumed without the lock", n)
	}
	b.mu.Lock()
	delete(b.locks, "G|T|0")
	b.mu.Unlock()
	testutil.WaitFor(t, 5*time.Second, "0..4 again from the reset offset", func() bool { return s.got.len() == 7 })
	testutil.WaitFor(t, 5*time.Second, "T/0's offset committed at 5", func() bool { off, _ := b.offset("G", "T", 0); return off == 5 })
	if got := b.lockHolder("G", q0); got != c.ClientID() {
		t.Fatalf("T/0's lock held by %q", got)
	}
	if n := s.overlap.Load(); n != 0 {
		t.Fatalf("%d listener calls overlapped on the orderly queue", n)
	}
}

// TestOrderlyRestartNotStartedOnceMovedAway: an orderly queue whose
// restart waited for a stuck listener call and which a rebalance gave
// away meanwhile does not start once the call returned: it is handed
// over, its reset offset committed and its broker lock released.
func TestOrderlyRestartNotStartedOnceMovedAway(t *testing.T) {
	t.Parallel()
	strategy := &switchStrategy{}
	b, c, s := startStuckOrderlyReset(t, Strategy(strategy))
	q0 := MessageQueue{"T", "broker-a", 0}
	strategy.none.Store(true)
	rebalanceWithin(t, c, 5*time.Second)
	awaitRestartDue(t, c, s)
	if slices.Contains(c.core.owned(), q0) {
		t.Fatal("T/0 restarted though the rebalance gave it away")
	}
	if got := b.lockHolder("G", q0); got != "" {
		t.Fatalf("T/0's lock still held by %q after the hand-over", got)
	}
	if off, _ := b.offset("G", "T", 0); off != 0 {
		t.Fatalf("T/0's committed offset %d, want the reset offset 0", off)
	}
	if n := s.got.len(); n != 2 {
		t.Fatalf("%d deliveries, want 2 (0, 1)", n)
	}
}

// TestOrderlyCloseSettlesQueueWaitingToRestart: Close while an orderly
// queue waits for its stuck listener call to restart sends the queue's
// reset offset, which the reset could not commit, and releases its
// broker lock once the call returned.
func TestOrderlyCloseSettlesQueueWaitingToRestart(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	s := newStuckOrderly()
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(300*time.Millisecond))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterOrderlyListener(s.listen)
	startPush(t, c)
	t.Cleanup(s.unblock)
	<-s.stuck
	q0 := MessageQueue{"T", "broker-a", 0}
	testutil.WaitFor(t, 5*time.Second, "T/0's offset committed at 1", func() bool { off, _ := b.offset("G", "T", 0); return off == 1 })
	b.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "offset store unavailable")
	})
	resetByBroker(t, b, c, "G", 0)
	b.answer(remoting.RequestUpdateConsumerOffset, nil)
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- c.Close(ctx)
	}()
	testutil.WaitFor(t, 5*time.Second, "close begun", func() bool {
		c.core.mu.Lock()
		defer c.core.mu.Unlock()
		return c.core.closing
	})
	s.unblock()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("G", "T", 0); off != 0 {
		t.Fatalf("T/0's committed offset %d after close, want the reset offset 0", off)
	}
	if got := b.lockHolder("G", q0); got != "" {
		t.Fatalf("T/0's lock still held by %q after close", got)
	}
}
