package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// warmAsync makes the route and the connection to the broker known, so
// the next SendAsync takes the callback path.
func warmAsync(t *testing.T, p *Producer, topic string) {
	t.Helper()
	if _, err := p.SendSync(context.Background(), NewMessage(topic, []byte("warm"))); err != nil {
		t.Fatal(err)
	}
}

// callbackErr is the next outcome a test's callbacks put on done; the
// test fails with what if none comes within d.
func callbackErr(t *testing.T, done <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatal(what)
		return nil
	}
}

// countCallbackPath counts p's sends that take SendAsync's callback path
// from now on.
func countCallbackPath(p *Producer) *atomic.Int64 {
	n := &atomic.Int64{}
	p.callbackStarts = n
	return n
}

// TestSendAsyncCallbackPathRetries: the first answer of callback-path
// sends is a retriable refusal; the attempt loop continues from it (one
// more request per message, on the other group) and every callback gets
// the stored result.
func TestSendAsyncCallbackPathRetries(t *testing.T) {
	a, b, log, p := twoGroupsOf(t, 1)
	warmAsync(t, p, "T")
	warmAsync(t, p, "T") // both groups connected (round robin)
	busy := answerCode(remoting.ResponseSystemBusy, nil)
	var refused atomic.Int32
	once := func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if refused.Add(1)%2 == 1 {
			return busy(fb, c, req)
		}
		return fb.stored(req)
	}
	before := log.requests()
	starts := countCallbackPath(p)
	a.setAnswer(once)
	b.setAnswer(once)
	const n = 20
	var wg sync.WaitGroup
	var failed atomic.Int32
	wg.Add(n)
	for range n {
		// One at a time: each send's two requests alternate refusal and success.
		done := make(chan struct{})
		if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(res *SendResult, err error) {
			defer wg.Done()
			defer close(done)
			if err != nil || res.Status != SendOK {
				failed.Add(1)
				t.Errorf("send: %v %+v", err, res)
			}
		}); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	wg.Wait()
	if got := log.requests() - before; got != 2*n {
		t.Fatalf("%d requests for %d sends refused once each, want %d", got, n, 2*n)
	}
	if got := starts.Load(); got != n {
		t.Fatalf("%d of %d sends took the callback path", got, n)
	}
}

// TestSendAsyncCallbackPathClose: callback-path sends to a broker that
// stopped answering end when the producer closes, not at their deadline.
func TestSendAsyncCallbackPathClose(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, SendTimeout(time.Minute), AttemptTimeout(time.Minute))
	warmAsync(t, p, "T")
	a.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand { return nil })
	starts := countCallbackPath(p)
	done := make(chan error, 3)
	for range 3 {
		if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	if got := starts.Load(); got != 3 {
		t.Fatalf("%d of 3 sends took the callback path", got)
	}
	start := time.Now()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Close took %v", el)
	}
	for range 3 {
		if err := <-done; err == nil {
			t.Fatal("a send to a silent broker succeeded")
		}
	}
}

// TestSendAsyncCallbackPathTimeout: an attempt of the callback path times
// out at its AttemptTimeout (not the sweep's second) and the send goes on
// to its next attempt.
func TestSendAsyncCallbackPathTimeout(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, AttemptTimeout(100*time.Millisecond), SendTimeout(10*time.Second))
	warmAsync(t, p, "T")
	var calls atomic.Int32
	a.setAnswer(func(fb *fakeBroker, _ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if calls.Add(1) == 1 {
			return nil // the first request is never answered
		}
		return fb.stored(req)
	})
	starts := countCallbackPath(p)
	done := make(chan error, 1)
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if starts.Load() != 1 {
		t.Fatal("the send did not take the callback path")
	}
	if err := callbackErr(t, done, 5*time.Second, "no answer"); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d requests, want 2", calls.Load())
	}
}

// TestSendAsyncCallbackBlocking: a callback that blocks until a later
// send's callback ran does not hold the others: another goroutine takes
// the queue.
func TestSendAsyncCallbackBlocking(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	warmAsync(t, p, "T")
	starts := countCallbackPath(p)
	second := make(chan struct{})
	done := make(chan error, 2)
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) {
		select {
		case <-second:
		case <-time.After(10 * time.Second):
			err = errors.New("the second callback never ran")
		}
		done <- err
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) {
		close(second)
		done <- err
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := starts.Load(); got != 2 {
		t.Fatalf("%d of 2 sends took the callback path", got)
	}
}

// TestSendAsyncSlowCallbacksHoldSlots: a callback-path send keeps its
// in-flight slot while its callback runs, so callbacks that block stop
// SendAsync after MaxAsyncInflight sends (plus the slots that blocked
// runners give back) instead of letting the queue grow.
func TestSendAsyncSlowCallbacksHoldSlots(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	const inflight = 2
	p := newTestProducer(t, ns, MaxAsyncInflight(inflight))
	warmAsync(t, p, "T")
	starts := countCallbackPath(p)
	release := make(chan struct{})
	var wg sync.WaitGroup
	accepted := 0
	for accepted < 50 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		wg.Add(1)
		err := p.SendAsync(ctx, NewMessage("T", []byte("x")), func(*SendResult, error) {
			<-release
			wg.Done()
		})
		cancel()
		if err != nil {
			wg.Done()
			break
		}
		accepted++
	}
	close(release)
	wg.Wait()
	if accepted > inflight+maxRunners {
		t.Fatalf("%d sends accepted while every callback blocked, want at most %d", accepted, inflight+maxRunners)
	}
	if got := starts.Load(); got != int64(accepted) {
		t.Fatalf("%d of %d sends took the callback path", got, accepted)
	}
}

// TestSendAsyncFromCallback: a callback that calls SendAsync while its
// own send holds the only in-flight slot does not deadlock: the stall
// check gives the slot back.
func TestSendAsyncFromCallback(t *testing.T) {
	sendFromCallback(t, 2)
}

// TestSendAsyncFromCallbackGoroutinePath: the same on the goroutine path
// (an idempotent producer's sends never take the callback path): its
// callbacks run on the callback queue too, so the stall check frees the
// slot a callback holds while it calls SendAsync.
func TestSendAsyncFromCallbackGoroutinePath(t *testing.T) {
	sendFromCallback(t, 0, Idempotent(true))
}

// sendFromCallback sends one message with a single in-flight slot whose
// callback sends another; both callbacks must run, and callbackPath of
// the two sends must have taken the callback path.
func sendFromCallback(t *testing.T, callbackPath int64, opts ...ProducerOpt) {
	t.Helper()
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, append([]ProducerOpt{MaxAsyncInflight(1)}, opts...)...)
	warmAsync(t, p, "T")
	starts := countCallbackPath(p)
	done := make(chan error, 3)
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) {
		done <- err
		// Bounded, so a slot that never comes fails the test instead of
		// hanging its Close.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- p.SendAsync(ctx, NewMessage("T", []byte("y")), func(_ *SendResult, err error) { done <- err })
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := callbackErr(t, done, 10*time.Second, "a SendAsync from a callback never got a slot"); err != nil {
			t.Fatal(err)
		}
	}
	if got := starts.Load(); got != callbackPath {
		t.Fatalf("%d of 2 sends took the callback path, want %d", got, callbackPath)
	}
}

// TestAttemptTakesFirstAnswerWithoutRoute: an attempt that continues from
// the callback path's first answer takes that answer even when the route
// no longer knows the group's address, so no later attempt mistakes it
// for the answer to its own request.
func TestAttemptTakesFirstAnswerWithoutRoute(t *testing.T) {
	ns := startNameServer(t)
	p := newTestProducer(t, ns)
	r, err := p.prepare(NewMessage("T", []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	empty := newRouteManager(p.rc, p.log, nil, time.Second, time.Now)
	mq := MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 0}
	st := &attemptState{topic: "T", mq: mq, chosen: true, first: &firstAnswer{addr: "127.0.0.1:1", start: time.Now(),
		resp: remoting.NewResponse(remoting.ResponseSystemBusy, "busy")}}
	sd := p.newSendDeadline(context.Background())
	defer sd.release()
	_, err = p.attempt(&sd, empty, r, mq, nil, st, false, false)
	if st.first != nil {
		t.Fatal("the first answer is still waiting for a later attempt")
	}
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != remoting.ResponseSystemBusy {
		t.Fatalf("attempt = %v, want the first answer's refusal", err)
	}
}

// TestSendAsyncStartAfterCloseFailedCalls: a callback-path send that
// passed SendAsync's state check before Close but starts its call after
// Close failed the async calls still ends at once, not at its deadline.
func TestSendAsyncStartAfterCloseFailedCalls(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, SendTimeout(time.Minute), AttemptTimeout(time.Minute))
	warmAsync(t, p, "T")
	defer p.rc.Close()
	a.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand { return nil })
	r, err := p.prepare(NewMessage("T", []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	// SendAsync's steps up to its state check...
	p.asyncS <- struct{}{}
	p.mu.Lock()
	p.wg.Add(1)
	pctx, routes := p.ctx, p.routes
	// ...then Close's, up to failing the async calls...
	p.state = stateClosed
	p.cancel()
	p.mu.Unlock()
	p.failAsyncCalls()
	// ...then SendAsync starts its call.
	done := make(chan error, 1)
	if !p.startAsync(context.Background(), pctx, routes, r, func(_ *SendResult, err error) { done <- err }) {
		t.Fatal("the send did not take the callback path")
	}
	if err := callbackErr(t, done, 10*time.Second, "the send started after Close failed the async calls waits for its deadline"); err == nil {
		t.Fatal("a send to a silent broker succeeded")
	}
	if err := waitGroup(context.Background(), &p.wg); err != nil {
		t.Fatal(err)
	}
	close(p.closeDone) // Close's end, for the test's cleanup Close
}

// TestSendAsyncWaiterFreesLaterBlockedCallback: a SendAsync that started
// waiting for a slot while the slots were held by sends in flight (no
// callback running yet) still gets one from a callback that then blocks,
// as MaxAsyncInflight promises: here the callback waits for that very
// SendAsync to return (a callback handing results to the goroutine that
// sends), which without the stall check deadlocks until the caller's
// context ends.
func TestSendAsyncWaiterFreesLaterBlockedCallback(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, MaxAsyncInflight(1))
	warmAsync(t, p, "T")
	release := make(chan struct{})
	a.setAnswer(func(fb *fakeBroker, _ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		<-release
		return fb.stored(req)
	})
	accepted := make(chan struct{})
	done := make(chan error, 3)
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) {
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			err = errors.New("the callback waited for the other SendAsync for good")
		}
		done <- err
	}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := p.SendAsync(ctx, NewMessage("T", []byte("y")), func(_ *SendResult, err error) { done <- err })
		close(accepted)
		waited <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "the second SendAsync waits for a slot", func() bool {
		for g := range strings.SplitSeq(allStacks(), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "client.(*Producer).SendAsync(") {
				return true
			}
		}
		return false
	})
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("SendAsync waiting while the callback blocked: %v", err)
	}
	for range 2 {
		if err := callbackErr(t, done, 10*time.Second, "a callback never ran"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSendAsyncCloseErrorIsCanceled: a send in flight when the producer
// closes reports what Close promises, the context error, on either path
// (the callback path's call is failed by Close, the goroutine path's
// context cancelled).
func TestSendAsyncCloseErrorIsCanceled(t *testing.T) {
	for name, opts := range map[string][]ProducerOpt{"callback path": nil, "goroutine path": {Idempotent(true)}} {
		t.Run(name, func(t *testing.T) {
			ns := startNameServer(t)
			a := startFakeBroker(t, "broker-a", &requestLog{})
			a.register(t, ns, 0, 1, map[string]int{"T": 1})
			p := newTestProducer(t, ns, append([]ProducerOpt{SendTimeout(time.Minute), AttemptTimeout(time.Minute)}, opts...)...)
			warmAsync(t, p, "T")
			arrived := make(chan struct{}, 1)
			a.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand {
				arrived <- struct{}{}
				return nil
			})
			done := make(chan error, 1)
			if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) { done <- err }); err != nil {
				t.Fatal(err)
			}
			<-arrived
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := callbackErr(t, done, 10*time.Second, "no callback"); !errors.Is(err, context.Canceled) {
				t.Fatalf("callback after Close: %v, want the context error", err)
			}
		})
	}
}

// TestSendAsyncPanickingCallback: callbacks that panic, on the goroutine
// path (no route yet) and on the callback path, are recovered: the
// process lives on, each send gives its slot back (one slot here, so a
// lost one would block the next SendAsync), a later send's callback runs,
// and Close returns.
func TestSendAsyncPanickingCallback(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, MaxAsyncInflight(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	panicked := make(chan struct{}, 4)
	bad := func(*SendResult, error) {
		panicked <- struct{}{}
		panic("application bug in a SendAsync callback")
	}
	if err := p.SendAsync(ctx, NewMessage("T", []byte("cold")), bad); err != nil {
		t.Fatal(err)
	}
	warmAsync(t, p, "T")
	starts := countCallbackPath(p)
	for range 3 {
		if err := p.SendAsync(ctx, NewMessage("T", []byte("warm")), bad); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	if err := p.SendAsync(ctx, NewMessage("T", []byte("after")), func(_ *SendResult, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := callbackErr(t, done, 10*time.Second, "no callback for the send after the panicking ones"); err != nil {
		t.Fatal(err)
	}
	if n := len(panicked); n != 4 {
		t.Fatalf("%d panicking callbacks ran, want 4", n)
	}
	if starts.Load() == 0 {
		t.Fatal("no send took the callback path")
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close after panicking callbacks: %v", err)
	}
}
