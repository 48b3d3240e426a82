package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// closeWithin runs close and fails the test unless it returns within d:
// a Close waiting for the callback or listener that calls it never does.
func closeWithin(t *testing.T, d time.Duration, close func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Close did not return within %v", d)
		return nil
	}
}

// A SendAsync callback may close its producer, with a context that has no
// deadline, as RocketMQ's clients allow a shutdown from a callback: Close
// returns, the callback of the send still in flight runs once with the
// close's error, and every goroutine ends.
func TestProducerCloseFromSendAsyncCallback(t *testing.T) {
	for name, opts := range map[string][]ProducerOpt{"callback path": nil, "goroutine path": {Idempotent(true)}} {
		t.Run(name, func(t *testing.T) {
			ns := startNameServer(t)
			a := startFakeBroker(t, "broker-a", &requestLog{})
			a.register(t, ns, 0, 1, map[string]int{"T": 1})
			before := goroutinesNow(t)
			p := newTestProducer(t, ns, append([]ProducerOpt{SendTimeout(time.Minute), AttemptTimeout(time.Minute)}, opts...)...)
			warmAsync(t, p, "T")
			arrived := make(chan struct{}, 1)
			a.setAnswer(func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
				if string(req.Body) == "pending" {
					arrived <- struct{}{}
					return nil // never answered: in flight when Close runs
				}
				return fb.stored(req)
			})
			var pendingCalls atomic.Int32
			pendingErr := make(chan error, 2)
			if err := p.SendAsync(context.Background(), NewMessage("T", []byte("pending")), func(_ *SendResult, err error) {
				pendingCalls.Add(1)
				pendingErr <- err
			}); err != nil {
				t.Fatal(err)
			}
			<-arrived
			closed := make(chan error, 1)
			if err := p.SendAsync(context.Background(), NewMessage("T", []byte("closer")), func(_ *SendResult, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
				closed <- p.Close(context.Background())
			}); err != nil {
				t.Fatal(err)
			}
			if err := closeWithin(t, 10*time.Second, func() error { return <-closed }); err != nil {
				t.Fatalf("Close from the callback: %v", err)
			}
			if err := callbackErr(t, pendingErr, 10*time.Second, "no callback for the send in flight"); !errors.Is(err, context.Canceled) {
				t.Fatalf("callback of the send in flight: %v, want the close's context error", err)
			}
			goroutinesEnd(t, before)
			if n := pendingCalls.Load(); n != 1 {
				t.Fatalf("the send in flight's callback ran %d times", n)
			}
			if err := p.SendAsync(context.Background(), NewMessage("T", []byte("late")), func(*SendResult, error) {}); !errors.Is(err, ErrClosed) {
				t.Fatalf("SendAsync after Close: %v", err)
			}
		})
	}
}

// A listener may close its push consumer, with a context that has no
// deadline: Close waits for every listener call but the caller's, commits
// and returns, and every goroutine ends once the listener returned.
func TestPushConsumerCloseFromListener(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderly=%v", orderly), func(t *testing.T) {
			ns, before, ctx := oneMessageBroker(t, "close")
			push := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset))
			if err := push.Subscribe("T", "*"); err != nil {
				t.Fatal(err)
			}
			closed := make(chan error, 1)
			var calls atomic.Int32
			closeOnce := func() {
				if calls.Add(1) == 1 {
					closed <- push.Close(context.Background())
				}
			}
			var err error
			if orderly {
				err = push.RegisterOrderlyListener(func(context.Context, *ConsumeOrderlyContext, []*MessageExt) OrderlyResult {
					closeOnce()
					return OrderlySuccess
				})
			} else {
				err = push.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult {
					closeOnce()
					return ConsumeSuccess
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := push.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := closeWithin(t, 10*time.Second, func() error { return <-closed }); err != nil {
				t.Fatalf("Close from the listener: %v", err)
			}
			goroutinesEnd(t, before)
			if n := calls.Load(); n != 1 {
				t.Fatalf("listener called %d times", n)
			}
		})
	}
}

// goroutineID tells goroutines apart.
func TestGoroutineID(t *testing.T) {
	ids := make(chan uint64, 2)
	for range 2 {
		go func() { ids <- goroutineID() }()
	}
	a, b, me := <-ids, <-ids, goroutineID()
	if a == 0 || b == 0 || me == 0 || a == b || a == me || b == me {
		t.Fatalf("goroutine ids %d, %d, %d", a, b, me)
	}
}

// txnCloser is a transaction listener whose check-back closes its
// producer.
type txnCloser struct {
	tp     *TransactionProducer
	closed chan error
}

func (l *txnCloser) ExecuteLocalTransaction(context.Context, *Message) LocalTransactionState {
	return TransactionCommit
}

func (l *txnCloser) CheckLocalTransaction(context.Context, *MessageExt) LocalTransactionState {
	l.closed <- l.tp.Close(context.Background())
	return TransactionCommit
}

// A transaction check-back listener may close its producer, with a
// context that has no deadline: Close does not wait for the check-back
// worker that runs the caller.
func TestTransactionProducerCloseFromCheckListener(t *testing.T) {
	ns := startNameServer(t)
	fb := startFakeBroker(t, "b", &requestLog{})
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})
	conns := make(chan *remoting.Conn, 16)
	fb.srv.Register(remoting.RequestHeartBeat, func(_ context.Context, conn *remoting.Conn, _ *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		select {
		case conns <- conn:
		default:
		}
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	fb.srv.Register(remoting.RequestEndTransaction, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	before := goroutinesNow(t)
	l := &txnCloser{closed: make(chan error, 1)}
	l.tp = startTxnProducer(t, ns, l)
	// The half makes the producer heartbeat its topic's broker.
	if _, err := l.tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half"))); err != nil {
		t.Fatal(err)
	}
	var conn *remoting.Conn
	select {
	case conn = <-conns:
	case <-time.After(10 * time.Second):
		t.Fatal("no producer heartbeat")
	}
	half := &wire.Message{Topic: "T", Body: []byte("half"), Properties: map[string]string{
		wire.PropertyProducerGroup: "TPG", wire.PropertyUniqKey: "7F0000010000000000000001"}}
	body, err := wire.AppendMessage(nil, half)
	if err != nil {
		t.Fatal(err)
	}
	check := remoting.NewRequest(remoting.RequestCheckTransactionState, &wire.CheckTransactionStateRequestHeader{
		TranStateTableOffset: 7, CommitLogOffset: 4242, MsgID: "7F0000010000000000000001"}, body)
	check.Flag |= remoting.FlagOneway
	if err := conn.InvokeOneway(context.Background(), check); err != nil {
		t.Fatal(err)
	}
	if err := closeWithin(t, 10*time.Second, func() error { return <-l.closed }); err != nil {
		t.Fatalf("Close from the check listener: %v", err)
	}
	goroutinesEnd(t, before)
}

// A Request waiting for its reply ends when its producer closes, with
// ErrClosed, not at its timeout: the reply could only come on a
// connection Close closes.
func TestRequestEndsOnClose(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	done := make(chan error, 1)
	go func() {
		_, err := p.Request(context.Background(), NewMessage("T", []byte("question")), time.Minute)
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the request sent", func() bool { return log.requests() > 0 })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Request after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Request still waiting 10s after Close")
	}
}

// directConsume has b ask the push consumer of group PG to consume a
// message with body directly (CONSUME_MESSAGE_DIRECTLY, as a dashboard's
// resend does), without waiting for the answer.
func directConsume(t *testing.T, b *qBroker, body string) {
	t.Helper()
	var conn *remoting.Conn
	var clientID string
	testutil.WaitFor(t, 10*time.Second, "the consumer's heartbeat", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for id, m := range b.members["PG"] {
			conn, clientID = m.conn, id
		}
		return conn != nil
	})
	m := &wire.Message{Topic: "T", Body: []byte(body), BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
		StoreHost: netip.MustParseAddrPort("127.0.0.1:2"), Properties: map[string]string{}}
	enc, err := wire.AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	req := remoting.NewRequest(remoting.RequestConsumeMessageDirectly,
		&wire.ConsumeMessageDirectlyResultRequestHeader{ConsumerGroup: "PG", ClientID: clientID, BrokerName: "broker-a"}, enc)
	req.Flag |= remoting.FlagOneway
	if err := conn.InvokeOneway(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// A listener consuming a message directly (CONSUME_MESSAGE_DIRECTLY) runs
// on the connection's request handlers, which closing the connections
// waits for: a Close it makes returns, and a Close made while it is stuck
// returns by its context's end.
func TestPushConsumerCloseAndDirectConsume(t *testing.T) {
	for _, fromListener := range []bool{true, false} {
		t.Run(fmt.Sprintf("fromListener=%v", fromListener), func(t *testing.T) {
			ns := startNameServer(t)
			b := startQBroker(t, "broker-a")
			b.register(t, ns, 0, map[string]int{"T": 1, "%RETRY%PG": 1})
			before := goroutinesNow(t)
			push := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset))
			if err := push.Subscribe("T", "*"); err != nil {
				t.Fatal(err)
			}
			closed, entered, release := make(chan error, 1), make(chan struct{}), make(chan struct{})
			if err := push.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult {
				if fromListener {
					closed <- push.Close(context.Background())
				} else {
					close(entered)
					<-release // stuck, ignoring its context
				}
				return ConsumeSuccess
			}); err != nil {
				t.Fatal(err)
			}
			if err := push.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			directConsume(t, b, "direct")
			if fromListener {
				if err := closeWithin(t, 10*time.Second, func() error { return <-closed }); err != nil {
					t.Fatalf("Close from the listener: %v", err)
				}
			} else {
				<-entered
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancel()
				err := closeWithin(t, 10*time.Second, func() error { return push.Close(ctx) })
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Close with the direct consume stuck: %v, want the context's error", err)
				}
				close(release)
			}
			goroutinesEnd(t, before)
		})
	}
}

// After a SendAsync callback closed the producer, a Close made elsewhere
// (a program's deferred one, before it exits) returns only once the
// callbacks of the sends the first cancelled have run: returning at once,
// the program could exit without them.
func TestProducerCloseAfterCloseFromCallbackWaitsForCallbacks(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, SendTimeout(time.Minute), AttemptTimeout(time.Minute))
	warmAsync(t, p, "T")
	arrived := make(chan struct{}, 1)
	a.setAnswer(func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if string(req.Body) == "pending" {
			arrived <- struct{}{}
			return nil
		}
		return fb.stored(req)
	})
	gate := make(chan struct{})
	var pendingDone atomic.Bool
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("pending")), func(*SendResult, error) {
		<-gate
		pendingDone.Store(true)
	}); err != nil {
		t.Fatal(err)
	}
	<-arrived
	closed := make(chan error, 1)
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("closer")), func(*SendResult, error) {
		closed <- p.Close(context.Background())
	}); err != nil {
		t.Fatal(err)
	}
	if err := closeWithin(t, 10*time.Second, func() error { return <-closed }); err != nil {
		t.Fatalf("Close from the callback: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	again := make(chan bool, 1)
	go func() {
		err := p.Close(ctx)
		if err != nil {
			t.Errorf("second Close: %v", err)
		}
		again <- pendingDone.Load()
	}()
	testutil.WaitFor(t, 10*time.Second, "the second Close waiting or returned", func() bool {
		return len(again) > 0 || strings.Contains(allStacks(), "client.(*Producer).Close(")
	})
	close(gate)
	if done := <-again; !done {
		t.Fatal("the second Close returned before the cancelled send's callback ran")
	}
}

// After a listener began closing its push consumer, a Close made
// elsewhere (a program's deferred one, before it exits) returns only once
// the first has committed the offsets: returning at once, the program
// could exit before the commit and the group consume the messages again.
func TestPushConsumerCloseAfterCloseFromListenerWaitsForCommit(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, "%RETRY%PG": 1})
	b.mu.Lock()
	b.noPullCommit = true
	b.mu.Unlock()
	b.put("T", 0, "m0", nil)
	b.put("T", 0, "close", nil)
	gate := make(chan struct{})
	b.answer(remoting.RequestUpdateConsumerOffset, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		<-gate
		return b.other(nil, req)
	})
	push := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour))
	if err := push.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	if err := push.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		if string(msgs[0].Body) == "close" {
			closed <- push.Close(context.Background())
		}
		return ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	if err := push.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the commit on close sent", func() bool {
		return b.count(remoting.RequestUpdateConsumerOffset) > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	again := make(chan bool, 1)
	go func() {
		if err := push.Close(ctx); err != nil {
			t.Errorf("second Close: %v", err)
		}
		_, committed := b.offset("PG", "T", 0)
		again <- committed
	}()
	testutil.WaitFor(t, 10*time.Second, "the second Close waiting or returned", func() bool {
		return len(again) > 0 || strings.Count(allStacks(), "client.(*PushConsumer).Close(") >= 2
	})
	close(gate)
	if committed := <-again; !committed {
		t.Fatal("the second Close returned before the first committed")
	}
	if err := closeWithin(t, 10*time.Second, func() error { return <-closed }); err != nil {
		t.Fatalf("Close from the listener: %v", err)
	}
	if off, _ := b.offset("PG", "T", 0); off != 1 {
		t.Fatalf("committed offset %d, want 1 (m0 consumed, the closing listener's message not)", off)
	}
}

// A listener may close its push consumer while a hand-over of its queue
// gave up waiting for it (HandoverTimeout): the hand-over's waiter for
// the queue's lock waits for that very listener call, so a Close made by
// it returns without waiting for the waiter, which ends, as the
// listener's goroutine does, once the listener returned.
func TestPushConsumerCloseFromListenerDuringHandOver(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderly=%v", orderly), func(t *testing.T) {
			ns, before, ctx := oneMessageBroker(t, "busy")
			c := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset), HandoverTimeout(20*time.Millisecond))
			entered, release, closed := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
			if err := c.Subscribe("T", "*"); err != nil {
				t.Fatal(err)
			}
			listen := func() {
				select {
				case entered <- struct{}{}:
				default:
					return
				}
				<-release
				closed <- c.Close(context.Background())
			}
			var err error
			if orderly {
				err = c.RegisterOrderlyListener(func(context.Context, *ConsumeOrderlyContext, []*MessageExt) OrderlyResult {
					listen()
					return OrderlySuccess
				})
			} else {
				err = c.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult {
					listen()
					return ConsumeSuccess
				})
			}
			if err != nil {
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
			q0 := MessageQueue{"T", "broker-a", 0}
			c.core.mu.Lock()
			pq := c.core.pqs[q0]
			delete(c.core.pqs, q0)
			c.core.mu.Unlock()
			if pq == nil {
				t.Fatal("queue not owned")
			}
			c.core.handOver(ctx, []*processQueue{pq}, nil) // gives up after HandoverTimeout; its waiter waits on
			close(release)
			if err := closeWithin(t, 10*time.Second, func() error { return <-closed }); err != nil {
				t.Fatalf("Close from the listener: %v", err)
			}
			noLeakAfter(t, before)
		})
	}
}

// TestAwaitReplyPrefersArrivedReply: a reply that arrived as the producer
// closed, or as the request's time ran out, is returned, never dropped for
// ErrClosed or a timeout (select would pick among the ready cases at
// random); with no reply the wait ends with ErrClosed or ctx's error.
func TestAwaitReplyPrefersArrivedReply(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut := func() error { return ErrRequestTimeout }
	for i := range 200 {
		ch := make(chan *MessageExt, 1)
		want := &MessageExt{MsgID: "reply"}
		ch <- want
		var got *MessageExt
		var err error
		if i%2 == 0 {
			got, err = awaitReply(context.Background(), ch, closed, timedOut)
		} else {
			got, err = awaitReply(ended, ch, make(chan struct{}), timedOut)
		}
		if err != nil || got != want {
			t.Fatalf("round %d: reply ready as the wait ended: %v, %v; want the reply", i, got, err)
		}
	}
	if _, err := awaitReply(context.Background(), make(chan *MessageExt, 1), closed, timedOut); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed, no reply: %v, want ErrClosed", err)
	}
	if _, err := awaitReply(ended, make(chan *MessageExt, 1), make(chan struct{}), timedOut); !errors.Is(err, ErrRequestTimeout) {
		t.Fatalf("ended, no reply: %v, want the ended error", err)
	}
}
