package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/wire"
)

// stuckHandOver is the scenario of the hand-over tests: consumer A's
// orderly listener is stuck on q1-0 when B joins the group, and A's
// rebalance hands q1 to B, gives up waiting for the listener after
// HandoverTimeout and is done.
type stuckHandOver struct {
	a, b    *PushConsumer
	q1      MessageQueue
	release func() // lets A's listener return

	mu      sync.Mutex
	inside  map[string]bool // consumer → inside a listener call on q1
	overlap []string
	seen    map[string][]string
}

func startStuckHandOver(t *testing.T, ns *namesrv.NameServer, br *qBroker, opts ...ConsumerOpt) *stuckHandOver {
	t.Helper()
	s := &stuckHandOver{q1: MessageQueue{"T", "broker-a", 1}, inside: map[string]bool{}, seen: map[string][]string{}}
	br.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("G"): 1})
	br.put("T", 1, "q1-0", nil)
	stuck := make(chan struct{})
	var once sync.Once
	s.release = func() { once.Do(func() { close(stuck) }) }
	listener := func(name string) OrderlyListener {
		return func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
			if oc.Queue != s.q1 {
				return OrderlySuccess
			}
			s.mu.Lock()
			for other, in := range s.inside {
				if in && other != name {
					s.overlap = append(s.overlap, fmt.Sprintf("%s consumes %s while %s is inside", name, msgs[0].Body, other))
				}
			}
			s.inside[name] = true
			for _, m := range msgs {
				s.seen[name] = append(s.seen[name], string(m.Body))
			}
			s.mu.Unlock()
			if name == "A" && string(msgs[0].Body) == "q1-0" {
				<-stuck
			}
			s.mu.Lock()
			s.inside[name] = false
			s.mu.Unlock()
			return OrderlySuccess
		}
	}
	mk := func(name string) *PushConsumer {
		c := newTestPush(t, ns, "G", append([]ConsumerOpt{ConsumeFrom(ConsumeFromFirstOffset), InstanceName(name),
			HandoverTimeout(50 * time.Millisecond), RebalanceInterval(100 * time.Millisecond)}, opts...)...)
		_ = c.Subscribe("T", "*")
		_ = c.RegisterOrderlyListener(listener(name))
		return c
	}
	s.a = mk("A")
	startPush(t, s.a)
	t.Cleanup(s.release) // before A's close, which waits for the listener
	testutil.WaitFor(t, 5*time.Second, "A inside q1-0", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.inside["A"] })
	s.b = mk("B")
	startPush(t, s.b)
	testutil.WaitFor(t, 10*time.Second, "A's hand-over of q1 done", func() bool {
		if slices.Contains(s.a.OwnedQueues(), s.q1) || !s.a.core.rebalanceMu.TryLock() {
			return false
		}
		s.a.core.rebalanceMu.Unlock()
		return true
	})
	return s
}

// finish lets A's listener return and checks that B goes on with q1-1,
// never consumed q1 beside A, and did not consume q1-0 again.
func (s *stuckHandOver) finish(t *testing.T, br *qBroker) {
	t.Helper()
	s.release()
	br.put("T", 1, "q1-1", nil)
	testutil.WaitFor(t, 10*time.Second, "B consumes q1-1", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Contains(s.seen["B"], "q1-1")
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.overlap) > 0 {
		t.Fatal(s.overlap)
	}
	if slices.Contains(s.seen["B"], "q1-0") {
		t.Fatalf("B consumed q1-0 again after A's listener consumed it: %v", s.seen["B"])
	}
}

// TestOrderlyHandOverKeepsLockWhileListenerRuns hands an orderly queue over
// while its listener is stuck past HandoverTimeout: the old owner must keep
// the queue's broker lock until the listener returns, or the next owner
// consumes the same message beside it. Once the listener lets go, the
// queue's offset is committed and the lock released, and the next owner
// goes on from there.
func TestOrderlyHandOverKeepsLockWhileListenerRuns(t *testing.T) {
	ns := startNameServer(t)
	br := startQBroker(t, "broker-a")
	s := startStuckHandOver(t, ns, br)
	if h := br.lockHolder("G", s.q1); h != s.a.ClientID() {
		t.Fatalf("q1 is locked by %q while A's listener still consumes it", h)
	}
	s.finish(t, br)
}

// TestOrderlyHandOverRenewsLockWhileListenerRuns: the broker frees a lock
// not renewed for 60 s, so while a listener outlives the hand-over of its
// orderly queue, the old owner must keep renewing that queue's lock, or
// the next owner takes it and consumes beside the listener. The broker's
// lock clock is a test clock moved past the lock lifetime in two steps.
func TestOrderlyHandOverRenewsLockWhileListenerRuns(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	br := startQBroker(t, "broker-a")
	advance := lockClock(br)
	s := startStuckHandOver(t, ns, br, LockInterval(50*time.Millisecond))
	q0 := MessageQueue{"T", "broker-a", 0} // A keeps it: in every renewal round
	step := func(d time.Duration) {
		stepLockClock(t, br, advance, d, s.a.ClientID(), q0, s.b.ClientID(), []MessageQueue{s.q1})
	}
	step(brokerLockLife * 2 / 3)
	step(brokerLockLife * 2 / 3) // past the lifetime of the hand-over's lock
	s.finish(t, br)
}

// TestOrderlyHandOversRenewLocksWhileQueued: a rebalance hands its leaving
// orderly queues over one after another, each waiting up to
// HandoverTimeout for its listener. A queue still waiting for its turn
// must have its lock renewed too, or with enough busy queues ahead of it
// the broker frees it and the next owner consumes it beside the listener.
func TestOrderlyHandOversRenewLocksWhileQueued(t *testing.T) {
	ns := startNameServer(t)
	br := startQBroker(t, "broker-a")
	advance := lockClock(br)
	br.register(t, ns, 0, map[string]int{"T": 8, wire.RetryTopic("G"): 1})
	for q := 0; q < 8; q++ {
		br.put("T", q, fmt.Sprintf("q%d-0", q), nil)
	}
	var mu sync.Mutex
	inside := map[MessageQueue]string{} // queue → consumer inside a listener call
	var overlap []string
	stuck := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(stuck) }) }
	listener := func(name string) OrderlyListener {
		return func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
			mu.Lock()
			if o := inside[oc.Queue]; o != "" && o != name {
				overlap = append(overlap, fmt.Sprintf("%s consumes %s while %s is inside", name, msgs[0].Body, o))
			}
			inside[oc.Queue] = name
			mu.Unlock()
			if name == "A" {
				<-stuck
			}
			mu.Lock()
			if inside[oc.Queue] == name {
				delete(inside, oc.Queue)
			}
			mu.Unlock()
			return OrderlySuccess
		}
	}
	mk := func(name string) *PushConsumer {
		c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), InstanceName(name),
			HandoverTimeout(time.Second), RebalanceInterval(100*time.Millisecond), LockInterval(50*time.Millisecond))
		_ = c.Subscribe("T", "*")
		_ = c.RegisterOrderlyListener(listener(name))
		return c
	}
	a := mk("A")
	startPush(t, a)
	t.Cleanup(release) // before A's close, which waits for the listeners
	testutil.WaitFor(t, 5*time.Second, "A inside all 8 queues", func() bool { mu.Lock(); defer mu.Unlock(); return len(inside) == 8 })
	b := mk("B")
	startPush(t, b)
	var kept MessageQueue
	var leaving []MessageQueue
	testutil.WaitFor(t, 10*time.Second, "A's rebalance drops 4 queues", func() bool {
		owned := a.OwnedQueues()
		leaving = leaving[:0]
		for q := 0; q < 8; q++ {
			mq := MessageQueue{"T", "broker-a", q}
			if slices.Contains(owned, mq) {
				kept = mq
			} else {
				leaving = append(leaving, mq)
			}
		}
		return len(leaving) == 4
	})
	// The hand-overs take about 4 s, so in each step most leaving queues
	// are still waiting their turn.
	step := func(d time.Duration) { stepLockClock(t, br, advance, d, a.ClientID(), kept, b.ClientID(), leaving) }
	step(brokerLockLife * 2 / 3)
	step(brokerLockLife * 2 / 3) // past the lifetime of the locks taken before the rebalance
	release()
	mu.Lock()
	defer mu.Unlock()
	if len(overlap) > 0 {
		t.Fatal(overlap)
	}
}

// lockClock gives br a test clock for its lock lifetime and returns the
// function that moves it.
func lockClock(br *qBroker) func(time.Duration) {
	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	br.mu.Lock()
	br.lockNow = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	br.mu.Unlock()
	return func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
}

// stepLockClock moves the broker's lock clock by d, waits until the old
// owner renewed its locks (kept, which it keeps, is in every round) and
// the next owner tried every queue of taking twice more, and checks that
// the old owner, whose listeners still run on them, holds them all.
func stepLockClock(t *testing.T, br *qBroker, advance func(time.Duration), d time.Duration,
	owner string, kept MessageQueue, next string, taking []MessageQueue) {
	t.Helper()
	rounds := br.lockRequests(owner, kept)
	tries := map[MessageQueue]int{}
	for _, mq := range taking {
		tries[mq] = br.lockRequests(next, mq)
	}
	advance(d)
	testutil.WaitFor(t, 10*time.Second, "the owner's renewals and the next owner's lock attempts after the clock moved", func() bool {
		if br.lockRequests(owner, kept) < rounds+2 {
			return false
		}
		for _, mq := range taking {
			if br.lockRequests(next, mq) < tries[mq]+2 {
				return false
			}
		}
		return true
	})
	for _, mq := range taking {
		if h := br.lockHolder("G", mq); h != owner {
			t.Fatalf("%v is locked by %q while the old owner's listener still consumes it", mq, h)
		}
	}
}
