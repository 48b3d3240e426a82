package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// TestOrderlyHandOverKeepsLockWhileListenerRuns hands an orderly queue over
// while its listener is stuck past HandoverTimeout: the old owner must keep
// the queue's broker lock until the listener returns, or the next owner
// consumes the same message beside it. Once the listener lets go, the
// queue's offset is committed and the lock released, and the next owner
// goes on from there.
func TestOrderlyHandOverKeepsLockWhileListenerRuns(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("G"): 1})
	q1 := MessageQueue{"T", "broker-a", 1}
	b.put("T", 1, "q1-0", nil)

	var mu sync.Mutex
	inside := map[string]bool{} // consumer → inside a listener call on q1
	var overlap []string
	seen := map[string][]string{}
	release := make(chan struct{})
	listener := func(name string) OrderlyListener {
		return func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
			if oc.Queue != q1 {
				return OrderlySuccess
			}
			mu.Lock()
			for other, in := range inside {
				if in && other != name {
					overlap = append(overlap, fmt.Sprintf("%s consumes %s while %s is inside", name, msgs[0].Body, other))
				}
			}
			inside[name] = true
			for _, m := range msgs {
				seen[name] = append(seen[name], string(m.Body))
			}
			mu.Unlock()
			if name == "A" && string(msgs[0].Body) == "q1-0" {
				<-release
			}
			mu.Lock()
			inside[name] = false
			mu.Unlock()
			return OrderlySuccess
		}
	}
	mk := func(name string) *PushConsumer {
		c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), InstanceName(name),
			HandoverTimeout(50*time.Millisecond), RebalanceInterval(100*time.Millisecond))
		_ = c.Subscribe("T", "*")
		_ = c.RegisterOrderlyListener(listener(name))
		return c
	}
	a := mk("A")
	startPush(t, a)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	testutil.WaitFor(t, 5*time.Second, "A inside q1-0", func() bool { mu.Lock(); defer mu.Unlock(); return inside["A"] })

	c2 := mk("B")
	startPush(t, c2)
	// A's rebalance gives q1 to B, waits HandoverTimeout for the stuck
	// listener and gives up waiting.
	testutil.WaitFor(t, 10*time.Second, "A's hand-over of q1 done", func() bool {
		if slices.Contains(a.OwnedQueues(), q1) || !a.core.rebalanceMu.TryLock() {
			return false
		}
		a.core.rebalanceMu.Unlock()
		return true
	})
	if h := b.lockHolder("G", q1); h != a.ClientID() {
		t.Fatalf("q1 is locked by %q while A's listener still consumes it", h)
	}

	close(release)
	b.put("T", 1, "q1-1", nil)
	testutil.WaitFor(t, 10*time.Second, "B consumes q1-1", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seen["B"], "q1-1")
	})
	mu.Lock()
	defer mu.Unlock()
	if len(overlap) > 0 {
		t.Fatal(overlap)
	}
	if slices.Contains(seen["B"], "q1-0") {
		t.Fatalf("B consumed q1-0 again after A's listener consumed it: %v", seen["B"])
	}
}

// TestOrderlyHandOverRenewsLockWhileListenerRuns: the broker frees a lock
// not renewed for 60 s, so while a listener outlives the hand-over of its
// orderly queue, the old owner must keep renewing that queue's lock, or
// the next owner takes it and consumes beside the listener. The broker's
// lock clock is a test clock moved past the lock lifetime in two steps.
func TestOrderlyHandOverRenewsLockWhileListenerRuns(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	var clockMu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }
	b.mu.Lock()
	b.lockNow = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	b.mu.Unlock()
	b.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("G"): 1})
	q0 := MessageQueue{"T", "broker-a", 0}
	q1 := MessageQueue{"T", "broker-a", 1}
	b.put("T", 1, "q1-0", nil)

	var mu sync.Mutex
	inside := map[string]bool{} // consumer → inside a listener call on q1
	var overlap []string
	seen := map[string][]string{}
	release := make(chan struct{})
	listener := func(name string) OrderlyListener {
		return func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
			if oc.Queue != q1 {
				return OrderlySuccess
			}
			mu.Lock()
			for other, in := range inside {
				if in && other != name {
					overlap = append(overlap, fmt.Sprintf("%s consumes %s while %s is inside", name, msgs[0].Body, other))
				}
			}
			inside[name] = true
			for _, m := range msgs {
				seen[name] = append(seen[name], string(m.Body))
			}
			mu.Unlock()
			if name == "A" && string(msgs[0].Body) == "q1-0" {
				<-release
			}
			mu.Lock()
			inside[name] = false
			mu.Unlock()
			return OrderlySuccess
		}
	}
	mk := func(name string) *PushConsumer {
		c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), InstanceName(name),
			HandoverTimeout(50*time.Millisecond), RebalanceInterval(100*time.Millisecond), LockInterval(50*time.Millisecond))
		_ = c.Subscribe("T", "*")
		_ = c.RegisterOrderlyListener(listener(name))
		return c
	}
	a := mk("A")
	startPush(t, a)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	testutil.WaitFor(t, 5*time.Second, "A inside q1-0", func() bool { mu.Lock(); defer mu.Unlock(); return inside["A"] })

	c2 := mk("B")
	startPush(t, c2)
	testutil.WaitFor(t, 10*time.Second, "A's hand-over of q1 done", func() bool {
		if slices.Contains(a.OwnedQueues(), q1) || !a.core.rebalanceMu.TryLock() {
			return false
		}
		a.core.rebalanceMu.Unlock()
		return true
	})
	// Each step: A renews its locks (q0, which it keeps, is in every round)
	// and B tries q1 again, both after the clock moved.
	step := func(d time.Duration) {
		t.Helper()
		aRounds, bTries := b.lockRequests(a.ClientID(), q0), b.lockRequests(c2.ClientID(), q1)
		advance(d)
		testutil.WaitFor(t, 10*time.Second, "A's renewal and B's lock attempt after the clock moved", func() bool {
			return b.lockRequests(a.ClientID(), q0) >= aRounds+2 && b.lockRequests(c2.ClientID(), q1) >= bTries+2
		})
		if h := b.lockHolder("G", q1); h != a.ClientID() {
			t.Fatalf("q1 is locked by %q while A's listener still consumes it", h)
		}
	}
	step(brokerLockLife * 2 / 3)
	step(brokerLockLife * 2 / 3) // past the lifetime of the hand-over's lock

	close(release)
	b.put("T", 1, "q1-1", nil)
	testutil.WaitFor(t, 10*time.Second, "B consumes q1-1", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seen["B"], "q1-1")
	})
	mu.Lock()
	defer mu.Unlock()
	if len(overlap) > 0 {
		t.Fatal(overlap)
	}
	if slices.Contains(seen["B"], "q1-0") {
		t.Fatalf("B consumed q1-0 again after A's listener consumed it: %v", seen["B"])
	}
}
