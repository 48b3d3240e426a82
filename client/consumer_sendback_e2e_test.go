package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// sendBackRefusal is a remoting.RPCHook that, while on, turns the
// requests of the codes it refuses into one no broker serves, so that a
// real broker answers them with REQUEST_CODE_NOT_SUPPORTED: the
// send-back and the sends to the retry topic then fail as they would
// with the group unable to store.
type sendBackRefusal struct {
	on      atomic.Bool
	refused atomic.Int64
	codes   map[int16]bool
}

// BeforeRequest implements remoting.RPCHook.
func (r *sendBackRefusal) BeforeRequest(_ string, req *remoting.RemotingCommand) {
	if r.on.Load() && r.codes[req.Code] {
		req.Code = 9999
		r.refused.Add(1)
	}
}

// AfterResponse implements remoting.RPCHook.
func (r *sendBackRefusal) AfterResponse(string, *remoting.RemotingCommand, *remoting.RemotingCommand) {
}

// refuseSendBack makes every way c has of returning a message to the
// broker fail while the returned refusal is on: CONSUMER_SEND_MSG_BACK
// and the sends of its retry-topic producer.
func refuseSendBack(c *client.PushConsumer) *sendBackRefusal {
	r := &sendBackRefusal{codes: map[int16]bool{remoting.RequestConsumerSendMsgBack: true,
		remoting.RequestSendMessage: true, remoting.RequestSendMessageV2: true, remoting.RequestSendBatchMessage: true}}
	own, sendBack := client.PushRemoting(c)
	own.AddHook(r)
	sendBack.AddHook(r)
	return r
}

// offsetWatch polls group's committed offset of topic's only queue at the
// broker and keeps the highest seen, until stopped.
type offsetWatch struct {
	max  atomic.Int64
	last atomic.Int64
	stop func()
}

func watchOffset(t *testing.T, admin *client.Admin, group, topic string) *offsetWatch {
	t.Helper()
	w := &offsetWatch{}
	w.max.Store(-1)
	w.last.Store(-1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if prog, err := admin.ConsumerProgress(ctx, group, topic); err == nil && len(prog) == 1 {
				off := prog[0].ConsumerOffset
				w.last.Store(off)
				if off > w.max.Load() {
					w.max.Store(off)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	w.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(w.stop)
	return w
}

// startSendBackTopic creates topic (one queue) on the shared group, holding
// bodies m0..m(n-1), and returns the cluster and an admin client.
func startSendBackTopic(t *testing.T, topic string, n int) (*devcluster.Cluster, *client.Admin) {
	t.Helper()
	ec := sharedE2ECluster(t)
	ctx := context.Background()
	admin, err := client.NewAdmin(client.NameServers(ec.NamesrvAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of "+topic, func() bool { _, err := admin.TopicRoute(ctx, topic); return err == nil })
	p := startProducer(t, ec.NamesrvAddr())
	for i := range n {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte(fmt.Sprint("m", i)))); err != nil {
			t.Fatal(err)
		}
	}
	return ec, admin
}

// TestPushSendBackFailureKeepsOffset: on a real raftmq group, messages a
// concurrent listener did not consume (past its AckIndex, then a panic,
// then RECONSUME_LATER) that neither CONSUMER_SEND_MSG_BACK nor the
// retry-topic fallback can return stay in the process queue: they are
// consumed again here, each time one redelivery more, and the committed
// offset never passes the first of them
// (ConsumeMessageConcurrentlyService.processConsumeResult's msgBackFailed).
// Once a send-back works again the queue moves on.
func TestPushSendBackFailureKeepsOffset(t *testing.T) {
	const topic, group = "SBF", "SBFGroup"
	ec, admin := startSendBackTopic(t, topic, 5)
	ctx := context.Background()
	c, err := client.NewPushConsumer(client.NameServers(ec.NamesrvAddr()), client.ConsumerGroup(group),
		client.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.ConsumeMessageBatchMaxSize(5),
		client.PersistInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	client.SetSendBackRetry(c, 50*time.Millisecond)
	_ = c.Subscribe(topic, "*")
	var mu sync.Mutex
	var calls [][]string
	var refusal *sendBackRefusal
	hooked := make(chan struct{})
	_ = c.RegisterConcurrentListener(func(_ context.Context, cc *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		<-hooked
		mu.Lock()
		var call []string
		for _, m := range msgs {
			call = append(call, fmt.Sprintf("%s/%d", m.Body, m.ReconsumeTimes))
		}
		calls = append(calls, call)
		n := len(calls)
		mu.Unlock()
		switch {
		case n == 1:
			cc.AckIndex = 1 // m0 and m1 only
			return client.ConsumeSuccess
		case n == 2:
			panic("listener bug")
		case refusal.on.Load():
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	refusal = refuseSendBack(c)
	refusal.on.Store(true)
	close(hooked)
	w := watchOffset(t, admin, group, topic)

	testutil.WaitFor(t, 20*time.Second, "m2..m4 consumed here again and again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 5
	})
	testutil.WaitFor(t, 10*time.Second, "offset 2 committed", func() bool { return w.last.Load() == 2 })
	if m := w.max.Load(); m != 2 {
		t.Fatalf("committed offset %d passed m2, which no broker took back", m)
	}
	refusal.on.Store(false)
	testutil.WaitFor(t, 20*time.Second, "offset 5 committed", func() bool { return w.last.Load() == 5 })
	if refusal.refused.Load() == 0 {
		t.Fatal("no send-back was refused")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(calls[0]); got != "[m0/0 m1/0 m2/0 m3/0 m4/0]" {
		t.Fatalf("first call %s", got)
	}
	// Calls 2 to 4 came while every send-back was refused; later ones
	// may see some of the messages come back through the retry topic.
	for i, call := range calls[1:4] {
		if want := fmt.Sprintf("[m2/%d m3/%d m4/%d]", i+1, i+1, i+1); fmt.Sprint(call) != want {
			t.Fatalf("call %d: %v, want %s (all calls %v)", i+2, call, want, calls)
		}
	}
}

// TestOrderlyDeadLetterSendFailure: on a real raftmq group, an orderly
// message that exhausted its redeliveries while its send to the DLQ fails
// is consumed again in place, never skipped: nothing behind it is
// delivered and the committed offset stays at it
// (ConsumeMessageOrderlyService.checkReconsumeTimes suspends when
// sendMessageBack fails). Once the send works, it is in %DLQ%group once
// and the queue goes on.
func TestOrderlyDeadLetterSendFailure(t *testing.T) {
	const topic, group = "ODLQF", "ODLQFGroup"
	ec, admin := startSendBackTopic(t, topic, 4)
	ctx := context.Background()
	const maxTimes = 1
	c, err := client.NewPushConsumer(client.NameServers(ec.NamesrvAddr()), client.ConsumerGroup(group),
		client.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.MaxReconsumeTimes(maxTimes),
		client.SuspendCurrentQueueTime(10*time.Millisecond), client.PersistInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	hooked := make(chan struct{})
	d := &orderlyDeliveries{}
	_ = c.RegisterOrderlyListener(d.suspendOn("m1", func() { <-hooked }))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	refusal := refuseSendBack(c)
	refusal.on.Store(true)
	close(hooked)
	w := watchOffset(t, admin, group, topic)

	// m1/0 and m1/1 are its delivery and its one redelivery; from m1/2 on
	// every failure tries the DLQ.
	testutil.WaitFor(t, 20*time.Second, "m1 consumed again while the DLQ refuses it", func() bool {
		return len(d.list()) >= 6
	})
	testutil.WaitFor(t, 10*time.Second, "offset 1 committed", func() bool { return w.last.Load() == 1 })
	if m := w.max.Load(); m != 1 {
		t.Fatalf("committed offset %d passed m1, which is in no DLQ", m)
	}
	seen := d.list()
	for i, s := range seen[1:6] {
		if want := fmt.Sprintf("m1/%d", i); s != want {
			t.Fatalf("delivery %d: %s, want %s (all %v)", i+2, s, want, seen)
		}
	}
	refusal.on.Store(false)
	testutil.WaitFor(t, 20*time.Second, "offset 4 committed", func() bool { return w.last.Load() == 4 })
	seen = d.list()
	if n := len(seen); seen[n-2] != "m2/0" || seen[n-1] != "m3/0" {
		t.Fatalf("deliveries %v", seen)
	}
	if refusal.refused.Load() == 0 {
		t.Fatal("no DLQ send was refused")
	}
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 10*time.Second, "m1 in "+dlq, func() bool { return storedIn(ctx, admin, dlq) == 1 })
}

// TestOrderlyDeadLetterSendFailureWarnsOncePerMinute: on a real raftmq
// group, an orderly message whose send to the DLQ keeps failing is retried
// every SuspendCurrentQueueTime; the queue warns of it on the first failure
// and then at most once a minute, each warning counting the failed
// attempts since the one before, instead of once per attempt. The
// consumer's clock is moved a minute on while the listener holds the
// fifth delivery; the retries go on unchanged and end in the DLQ once the
// send works.
func TestOrderlyDeadLetterSendFailureWarnsOncePerMinute(t *testing.T) {
	const topic, group = "ODLQW", "ODLQWGroup"
	ec, admin := startSendBackTopic(t, topic, 4)
	ctx := context.Background()
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	core, logs := observer.New(zap.WarnLevel)
	hooked := make(chan struct{})
	// The listener stops inside m1's deliveries 5 and 7 (reconsume
	// times), each DLQ attempt i following delivery i, until let go.
	type stop struct{ inside, release chan struct{} }
	stops := map[int32]stop{5: {make(chan struct{}), make(chan struct{})}, 7: {make(chan struct{}), make(chan struct{})}}
	var first sync.Once
	c, err := client.NewPushConsumer(client.NameServers(ec.NamesrvAddr()), client.ConsumerGroup(group),
		client.WithLogger(zap.New(core)), client.WithClock(clock),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.MaxReconsumeTimes(1),
		client.SuspendCurrentQueueTime(10*time.Millisecond), client.PersistInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	_ = c.RegisterOrderlyListener(func(_ context.Context, _ *client.ConsumeOrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
		first.Do(func() { <-hooked })
		for _, m := range msgs {
			if string(m.Body) != "m1" {
				continue
			}
			if s, ok := stops[m.ReconsumeTimes]; ok {
				close(s.inside)
				<-s.release
			}
			return client.SuspendCurrentQueueAMoment
		}
		return client.OrderlySuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	// Before Close, which waits for the listener.
	t.Cleanup(func() {
		for _, s := range stops {
			select {
			case <-s.release:
			default:
				close(s.release)
			}
		}
	})
	refusal := refuseSendBack(c)
	refusal.on.Store(true)
	close(hooked)

	failed := func() []int64 {
		var n []int64
		for _, e := range logs.FilterMessageSnippet("could not be sent to the DLQ").All() {
			v, _ := e.ContextMap()["failedAttempts"].(int64)
			n = append(n, v)
		}
		return n
	}
	<-stops[5].inside // attempts 1 to 4 failed within the minute
	skew.Store(int64(time.Minute + time.Second))
	close(stops[5].release)
	<-stops[7].inside // attempt 5, past the minute, and 6 failed
	if got := failed(); !slices.Equal(got, []int64{1, 4}) {
		t.Fatalf("DLQ send failure warnings counted %v failed attempts, want [1 4] (the first; attempts 2 to 5 a minute later)", got)
	}
	refusal.on.Store(false)
	close(stops[7].release)
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 20*time.Second, "m1 in "+dlq, func() bool { return storedIn(ctx, admin, dlq) == 1 })
	if got := failed(); len(got) != 2 {
		t.Fatalf("DLQ send failure warnings after the send worked: %v", got)
	}
}

// TestPushSendBackFailureSurvivesClose: a consumer closed while messages
// no broker took back wait to be consumed again here commits the offset
// of the first of them, so the group's next consumer gets them.
func TestPushSendBackFailureSurvivesClose(t *testing.T) {
	const topic, group = "SBC", "SBCGroup"
	ec, admin := startSendBackTopic(t, topic, 4)
	ctx := context.Background()
	newConsumer := func(l client.ConcurrentListener) *client.PushConsumer {
		t.Helper()
		c, err := client.NewPushConsumer(client.NameServers(ec.NamesrvAddr()), client.ConsumerGroup(group),
			client.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))),
			client.ConsumeFrom(client.ConsumeFromFirstOffset), client.PersistInterval(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		client.SetSendBackRetry(c, 50*time.Millisecond)
		_ = c.Subscribe(topic, "*")
		_ = c.RegisterConcurrentListener(l)
		return c
	}
	var mu sync.Mutex
	var first, second []string
	hooked := make(chan struct{})
	c := newConsumer(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		<-hooked
		mu.Lock()
		defer mu.Unlock()
		first = append(first, fmt.Sprintf("%s/%d", msgs[0].Body, msgs[0].ReconsumeTimes))
		if string(msgs[0].Body) == "m1" {
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	refusal := refuseSendBack(c)
	refusal.on.Store(true)
	close(hooked)
	w := watchOffset(t, admin, group, topic)
	testutil.WaitFor(t, 20*time.Second, "m1 consumed here again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(first, "m1/2") && slices.Contains(first, "m3/0")
	})
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "offset 1 committed", func() bool { return w.last.Load() == 1 })
	if m := w.max.Load(); m != 1 {
		t.Fatalf("committed offset %d passed m1, which no broker took back", m)
	}
	c2 := newConsumer(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			second = append(second, string(m.Body))
		}
		return client.ConsumeSuccess
	})
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	testutil.WaitFor(t, 20*time.Second, "offset 4 committed", func() bool { return w.last.Load() == 4 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(second, "m1") {
		t.Fatalf("the next consumer got %v, not m1", second)
	}
}

// TestPushRetryTopicReadFromStartWithTimestamp: a group's retry queue
// without a committed offset holds only messages the group sent back and
// never consumed (a send-back that reached the broker before the consumer
// started reading that queue: a group's first seconds, before the retry
// topic's route reaches it, or a broker group it learns of later). It is
// read from its start whatever ConsumeFrom says; starting a
// ConsumeFromTimestamp consumer there at the queue's end, as RocketMQ's
// computePullFromWhere does, would skip them though no listener consumed
// them.
func TestPushRetryTopicReadFromStartWithTimestamp(t *testing.T) {
	const topic, group = "RTS", "RTSGroup"
	ec, admin := startSendBackTopic(t, topic, 0)
	ctx := context.Background()
	retry := wire.RetryTopic(group)
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: retry, ReadQueueNums: 1, WriteQueueNums: 1}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of "+retry, func() bool { _, err := admin.TopicRoute(ctx, retry); return err == nil })
	// What a consumer whose CONSUMER_SEND_MSG_BACK failed sends itself.
	back := client.NewMessage(retry, []byte("sent back"))
	back.Properties = map[string]string{wire.PropertyRetryTopic: topic, wire.PropertyReconsumeTime: "1"}
	if _, err := startProducer(t, ec.NamesrvAddr()).SendSync(ctx, back); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewPushConsumer(client.NameServers(ec.NamesrvAddr()), client.ConsumerGroup(group),
		client.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))),
		client.ConsumeFrom(client.ConsumeFromTimestamp), client.ConsumeTimestamp(time.Now()),
		client.PersistInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	got := make(chan string, 1)
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			select {
			case got <- fmt.Sprintf("%s %s/%d", m.Topic, m.Body, m.ReconsumeTimes):
			default:
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	select {
	case s := <-got:
		if s != topic+" sent back/1" {
			t.Fatalf("listener got %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the message in %s was never delivered (owned queues %v)", retry, c.OwnedQueues())
	}
}

// orderlyDeliveries records an orderly listener's deliveries as
// "body/reconsumeTimes".
type orderlyDeliveries struct {
	mu   sync.Mutex
	seen []string
}

// list returns the deliveries so far.
func (d *orderlyDeliveries) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

// suspendOn is an orderly listener that records each delivery, after
// before (when not nil) returns, and suspends the queue at body.
func (d *orderlyDeliveries) suspendOn(body string, before func()) client.OrderlyListener {
	return func(_ context.Context, _ *client.ConsumeOrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
		if before != nil {
			before()
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, m := range msgs {
			d.seen = append(d.seen, fmt.Sprintf("%s/%d", m.Body, m.ReconsumeTimes))
			if string(m.Body) == body {
				return client.SuspendCurrentQueueAMoment
			}
		}
		return client.OrderlySuccess
	}
}
