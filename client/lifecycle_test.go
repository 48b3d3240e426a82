package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// allStacks is every goroutine's stack, whole: a buffer too small for the
// dump would cut off the goroutines a test looks for.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// sdkGoroutines returns the stacks of goroutines running code of an SDK
// client (not of the fake brokers or the test itself).
func sdkGoroutines() []string {
	stacks := allStacks()
	owners := []string{"client.(*Producer)", "client.(*consumerCore)", "client.(*PushConsumer)",
		"client.(*LitePullConsumer)", "client.(*routeManager)", "client.waitGroup"}
	var out []string
	for g := range strings.SplitSeq(stacks, "\n\n") {
		for _, o := range owners {
			if strings.Contains(g, "github.com/raftmq/raftmq/"+o) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// noLeakAfter checks that Close left no SDK goroutine running at once,
// and that everything started since before (the fake servers' connection
// goroutines included) ends soon after.
func noLeakAfter(t *testing.T, before goleak.Option) {
	t.Helper()
	// Close returns once the goroutines it waits for signalled their end
	// (WaitGroup.Done, a closed channel); each may still be returning from
	// its function then, so allow them a moment, far shorter than any
	// network or listener wait Close might have skipped.
	var gs []string
	deadline := time.Now().Add(time.Second)
	for gs = sdkGoroutines(); len(gs) > 0 && time.Now().Before(deadline); gs = sdkGoroutines() {
		runtime.Gosched()
	}
	if len(gs) > 0 {
		t.Fatalf("%d SDK goroutines outlived Close:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
	goroutinesEnd(t, before)
}

// goroutinesNow returns the goroutines running now, for goroutinesEnd,
// once the shared clusters are closed. With go test -count a round runs
// while the clusters the earlier round's end-to-end tests started still
// run (they are closed after the last round), and their members open
// connections of their own at any time (a restarted member registering
// again, a redial): goroutines the test did not start, which do not end.
// The next round's end-to-end tests start new clusters, as they would
// anyway.
func goroutinesNow(t *testing.T) goleak.Option {
	t.Helper()
	if err := closeSharedClusters(); err != nil {
		t.Fatal(err)
	}
	return goleak.IgnoreCurrent()
}

// goroutinesEnd waits until every goroutine started since before
// (goroutinesNow) has ended, but the fake broker's suspended pulls (they
// answer on their own timeout).
func goroutinesEnd(t *testing.T, before goleak.Option) {
	t.Helper()
	var err error
	defer func() {
		if t.Failed() && err != nil {
			t.Log(err)
		}
	}()
	testutil.WaitFor(t, 10*time.Second, "every goroutine started by the test ends", func() bool {
		err = goleak.Find(before, goleak.IgnoreAnyFunction("github.com/raftmq/raftmq/client.(*qBroker).pull"))
		return err == nil
	})
}

func TestLifecycleStartAndCloseLeaveNoGoroutine(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2, "%RETRY%LG": 1, "%RETRY%PG": 1})
	before := goroutinesNow(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	p, err := NewProducer(NameServers(ns.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := p.SendSync(ctx, NewMessage("T", []byte("m"))); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	if err := p.SendAsync(ctx, NewMessage("T", []byte("async")), func(_ *SendResult, err error) { sent <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}

	push := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset))
	got := collectAll(t, push, "T")
	if err := push.Start(ctx); err != nil {
		t.Fatal(err)
	}

	lite, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), ConsumeFrom(ConsumeFromFirstOffset))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := lite.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	if err := lite.Start(ctx); err != nil {
		t.Fatal(err)
	}
	polled := 0
	for polled < 5 {
		msgs, err := lite.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		polled += len(msgs)
	}
	testutil.WaitFor(t, 5*time.Second, "push consumer got the 5 messages", func() bool { return got.len() >= 5 })

	for name, c := range map[string]interface{ Close(context.Context) error }{"producer": p, "push": push, "lite": lite} {
		if err := c.Close(ctx); err != nil {
			t.Fatalf("%s: Close: %v", name, err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatalf("%s: second Close: %v", name, err)
		}
	}
	if err := p.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	noLeakAfter(t, before)
}

// A Close whose context has ended returns at once with its error, even
// while a listener call is stuck, and still releases what it can; the
// listener's goroutine ends as soon as the listener returns.
func TestLifecycleCloseWithExpiredContextReturnsPromptly(t *testing.T) {
	ns, before, ctx := oneMessageBroker(t, "stuck")

	p, err := NewProducer(NameServers(ns.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendSync(ctx, NewMessage("T", []byte("m"))); err != nil {
		t.Fatal(err)
	}

	push := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset))
	release := startStuckListener(t, ctx, push)

	expired, cancelExpired := context.WithCancel(context.Background())
	cancelExpired()
	for name, c := range map[string]interface{ Close(context.Context) error }{"producer": p, "push": push} {
		start := time.Now()
		err := c.Close(expired)
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("%s: Close with an expired context took %v", name, took)
		}
		if name == "push" && !errors.Is(err, context.Canceled) {
			t.Fatalf("push: Close with a listener stuck: %v, want context.Canceled", err)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: Close: %v", name, err)
		}
	}
	close(release)
	goroutinesEnd(t, before)
}

// A hand-over that gives up on a busy listener (HandoverTimeout) leaves
// the lock to a goroutine that gives it back once the listener returns;
// that goroutine ends and Close waits for it.
func TestLifecycleHandOverPastTimeoutReleasesTheQueueLock(t *testing.T) {
	ns, before, ctx := oneMessageBroker(t, "busy")

	c := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(20*time.Millisecond))
	release := startStuckListener(t, ctx, c)
	q0 := MessageQueue{"T", "broker-a", 0}
	c.core.mu.Lock()
	pq := c.core.pqs[q0]
	delete(c.core.pqs, q0)
	c.core.mu.Unlock()
	if pq == nil {
		t.Fatal("queue not owned")
	}
	c.core.handOver(ctx, []*processQueue{pq}, nil) // returns after HandoverTimeout, the listener still busy
	if pq.consumeMu.TryLock() {
		t.Fatal("the queue lock was free while the listener ran")
	}
	close(release)
	testutil.WaitFor(t, 5*time.Second, "the queue lock given back once the listener returned", func() bool {
		if pq.consumeMu.TryLock() {
			pq.consumeMu.Unlock()
			return true
		}
		return false
	})
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	noLeakAfter(t, before)
}

// oneMessageBroker starts a name server and a fake broker routing topic T
// (one queue, and group PG's retry topic) that holds one message with
// body; it returns the goroutines running before the test's clients
// start, and a context bounding the test.
func oneMessageBroker(t *testing.T, body string) (*namesrv.NameServer, goleak.Option, context.Context) {
	t.Helper()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, "%RETRY%PG": 1})
	b.put("T", 0, body, nil)
	before := goroutinesNow(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ns, before, ctx
}

// startStuckListener subscribes c to topic T with a listener that blocks
// (ignoring its context, as a listener Close cannot stop does) until the
// returned channel is closed, starts c and returns once the listener runs.
func startStuckListener(t *testing.T, ctx context.Context, c *PushConsumer) chan struct{} {
	t.Helper()
	// entered is buffered so a listener that runs before the wait below
	// still leaves its signal.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	if err := c.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatalf("the listener was never called: %v", ctx.Err())
	}
	return release
}

// A Close whose context has already ended still commits the offsets of
// what the listener consumed (RocketMQ's shutdown persists them always),
// and reports a commit the broker refused in its error: otherwise the
// group would consume those messages again after the restart.
func TestLifecycleCloseWithExpiredContextCommitsConsumed(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refuse), func(t *testing.T) {
			ns := startNameServer(t)
			b := startQBroker(t, "broker-a")
			b.register(t, ns, 0, map[string]int{"T": 1, "%RETRY%PG": 1})
			b.mu.Lock()
			b.noPullCommit = true // only an UPDATE_CONSUMER_OFFSET commits
			b.mu.Unlock()
			b.put("T", 0, "m", nil)
			if refuse {
				b.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
					return remoting.NewResponse(remoting.ResponseSystemError, "disk full")
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			push := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour))
			collectAll(t, push, "T")
			if err := push.Start(ctx); err != nil {
				t.Fatal(err)
			}
			q0 := MessageQueue{"T", "broker-a", 0}
			testutil.WaitFor(t, 5*time.Second, "the message consumed and its offset stored", func() bool {
				off, err := push.core.store.Read(ctx, q0, ReadFromMemory)
				return err == nil && off == 1
			})
			expired, cancelExpired := context.WithCancel(context.Background())
			cancelExpired()
			err := push.Close(expired)
			off, ok := b.offset("PG", "T", 0)
			if refuse {
				if err == nil || !strings.Contains(err.Error(), "disk full") {
					t.Fatalf("Close: %v, want the refused commit reported", err)
				}
				return
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("Close: %v", err)
			}
			if !ok || off != 1 {
				t.Fatalf("committed offset after Close: %d (%v), want 1: the consumed message would be consumed again", off, ok)
			}
		})
	}
}
