package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// fastConsumerOpts shortens the consumer's timers for tests.
func fastConsumerOpts(t *testing.T, ns *namesrv.NameServer, group string) []ConsumerOpt {
	return []ConsumerOpt{
		NameServers(ns.Addr().String()), WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))),
		ConsumerGroup(group), PersistInterval(50 * time.Millisecond), LongPolling(time.Second, 2*time.Second),
		PullBackoff(50 * time.Millisecond),
	}
}

func newTestPush(t *testing.T, ns *namesrv.NameServer, group string, opts ...ConsumerOpt) *PushConsumer {
	t.Helper()
	c, err := NewPushConsumer(append(fastConsumerOpts(t, ns, group), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startPush(t *testing.T, c *PushConsumer) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
}

// collector records what listeners got.
type collector struct {
	mu   sync.Mutex
	msgs []*MessageExt
}

func (c *collector) add(msgs ...*MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, msgs...)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *collector) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.msgs))
	for i, m := range c.msgs {
		out[i] = string(m.Body)
	}
	return out
}

func TestPushConsumerConsumesFiltersAndCommits(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 4, wire.RetryTopic("G"): 1})
	for q := range 4 {
		for i := range 10 {
			tag := "TagA"
			if i%2 == 1 {
				tag = "TagB"
			}
			b.put("T", q, fmt.Sprintf("q%d-%d-%s", q, i, tag), map[string]string{wire.PropertyTags: tag})
		}
	}
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), ConsumeMessageBatchMaxSize(3))
	if err := c.Subscribe("T", "TagA || TagC"); err != nil {
		t.Fatal(err)
	}
	var got collector
	var maxBatch atomic.Int32
	if err := c.RegisterConcurrentListener(func(_ context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		if n := int32(len(msgs)); n > maxBatch.Load() {
			maxBatch.Store(n)
		}
		got.add(msgs...)
		return ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "20 TagA messages", func() bool { return got.len() >= 20 })
	// The fake broker does not filter: TagB was dropped client-side.
	for _, body := range got.bodies() {
		if body[len(body)-4:] != "TagA" {
			t.Fatalf("got %q", body)
		}
	}
	if maxBatch.Load() > 3 {
		t.Fatalf("batch of %d > ConsumeMessageBatchMaxSize 3", maxBatch.Load())
	}
	testutil.WaitFor(t, 5*time.Second, "offsets committed to 10 on every queue", func() bool {
		for q := range 4 {
			if off, ok := b.offset("G", "T", q); !ok || off != 10 {
				return false
			}
		}
		return true
	})
	// New messages arrive through the long poll.
	b.put("T", 2, "late-TagA", map[string]string{wire.PropertyTags: "TagA"})
	testutil.WaitFor(t, 5*time.Second, "late message", func() bool { return slices.Contains(got.bodies(), "late-TagA") })

	// The heartbeat had the RocketMQ shape, with the retry subscription.
	b.mu.Lock()
	hb := b.heartbeat[0]
	b.mu.Unlock()
	cd := hb.ConsumerDataSet[0]
	if hb.ClientID != c.ClientID() || cd.GroupName != "G" || cd.ConsumeType != "CONSUME_PASSIVELY" || cd.MessageModel != "CLUSTERING" ||
		cd.ConsumeFromWhere != "CONSUME_FROM_FIRST_OFFSET" || len(cd.SubscriptionDataSet) != 2 || cd.SubscriptionDataSet[1].Topic != "T" ||
		!slices.Equal(cd.SubscriptionDataSet[1].TagsSet, []string{"TagA", "TagC"}) || cd.SubscriptionDataSet[0].Topic != "%RETRY%G" {
		t.Fatalf("heartbeat %+v", hb)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("G", "T", 2); off != 11 {
		t.Fatalf("offset after close %d, want 11", off)
	}
	if b.count(remoting.RequestUnregisterClient) == 0 {
		t.Fatal("no UNREGISTER_CLIENT on close")
	}
}

// TestPushConsumerCloseCommitNotUndoneByPullInFlight: the offset Close
// commits is the group's last, though the queue's pull in flight reaches
// the broker's pull pool only after it. Brokers process pulls and offset
// updates on separate pools and keep the last offset they are given, so an
// offset carried by that pull (the commit flag, sent before the last
// messages were consumed) would move the group back and the next consumer
// would get those messages again.
func TestPushConsumerCloseCommitNotUndoneByPullInFlight(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	tailPulled := make(chan struct{}) // the pull past the last message arrived
	closeTail := sync.OnceFunc(func() { close(tailPulled) })
	late := make(chan struct{}) // the broker's pull pool gets to it now
	tailDone := make(chan struct{})
	var tailOnce sync.Once
	b.answer(remoting.RequestPullMessage, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		var h wire.PullMessageRequestHeader
		if err := req.DecodeHeader(&h); err != nil || h.Topic != "T" || h.QueueOffset != 10 {
			return b.pull(nil, req)
		}
		first := false
		tailOnce.Do(func() { first = true })
		if !first {
			return b.pull(nil, req)
		}
		defer close(tailDone)
		closeTail()
		select {
		case <-late:
		case <-b.quit:
		}
		if h.SysFlag&wire.PullFlagCommitOffset != 0 {
			b.setOffset(h.ConsumerGroup, h.Topic, int(h.QueueID), h.CommitOffset)
		}
		return remoting.NewResponse(remoting.ResponsePullNotFound, "")
	})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	var consumed atomic.Int32
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			if m.QueueOffset == 9 {
				// Consumed only once the pull after it left: that pull
				// carries an offset below 10, if any.
				<-tailPulled
			}
		}
		consumed.Add(int32(len(msgs)))
		return ConsumeSuccess
	})
	startPush(t, c)
	t.Cleanup(closeTail) // before Close's cleanup, which waits for a call held on it
	testutil.WaitFor(t, 5*time.Second, "the first 5 consumed and committed", func() bool {
		off, ok := b.offset("G", "T", 0)
		return consumed.Load() == 5 && ok && off == 5
	})
	for i := 5; i < 10; i++ {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	testutil.WaitFor(t, 5*time.Second, "all 10 consumed", func() bool { return consumed.Load() == 10 })
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(late)
	<-tailDone
	if off, _ := b.offset("G", "T", 0); off != 10 {
		t.Fatalf("committed offset after Close and the pull in flight: %d, want 10 (all consumed)", off)
	}
}

// TestPushConsumerCloseDeliversNoQueuedBatch: Close waits for the
// listener calls in progress and commits their results, but hands the
// listener no batch that was still queued for the pool (as RocketMQ's
// shutdown drops the pool's queue): those messages stay uncommitted and
// the group's next consumer gets them.
func TestPushConsumerCloseDeliversNoQueuedBatch(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	inCall := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), ConsumeGoroutines(1))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		if calls.Add(1) == 1 {
			close(inCall)
			<-release
		}
		return ConsumeSuccess
	})
	startPush(t, c)
	releaseCall := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseCall) // before Close's cleanup, which waits for the held call
	<-inCall
	testutil.WaitFor(t, 5*time.Second, "the other 4 messages queued for the pool", func() bool { return c.work.len() == 4 })
	closed := make(chan error, 1)
	go func() { closed <- c.Close(context.Background()) }()
	testutil.WaitFor(t, 5*time.Second, "Close under way", func() bool { return c.core.ctx.Err() != nil })
	releaseCall()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d listener calls, want 1: Close delivered batches still queued", n)
	}
	if off, _ := b.offset("G", "T", 0); off != 1 {
		t.Fatalf("committed offset %d, want 1 (the call Close waited for)", off)
	}
}

func TestPushConsumerStartsFromLastOffsetAndFailsWithoutRoute(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	b.put("T", 0, "old", nil)
	c := newTestPush(t, ns, "G")
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "queue owned", func() bool { return len(c.OwnedQueues()) == 2 })
	b.put("T", 0, "new", nil)
	testutil.WaitFor(t, 5*time.Second, "new message", func() bool { return got.len() == 1 })
	if got.bodies()[0] != "new" {
		t.Fatalf("got %v: ConsumeFromLastOffset must skip what was there", got.bodies())
	}

	bad := newTestPush(t, ns, "G2")
	_ = bad.Subscribe("NoSuchTopic", "*")
	_ = bad.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	if err := bad.Start(context.Background()); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("start with unknown topic: %v", err)
	}
	_ = bad.Close(context.Background())
}

func TestPushConsumerReconsumeLaterSendsBack(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			ns := startNameServer(t)
			b := startQBroker(t, "broker-a")
			b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
			b.mu.Lock()
			b.failSendBack = fallback
			b.mu.Unlock()
			b.put("T", 0, "payload", map[string]string{wire.PropertyTags: "X", wire.PropertyKeys: "k1"})
			c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset))
			_ = c.Subscribe("T", "*")
			var got collector
			_ = c.RegisterConcurrentListener(func(_ context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
				got.add(msgs...)
				if msgs[0].ReconsumeTimes == 0 {
					cc.DelayLevel = 2
					return ConsumeRetryLater
				}
				return ConsumeSuccess
			})
			startPush(t, c)
			testutil.WaitFor(t, 5*time.Second, "redelivery", func() bool { return got.len() == 2 })
			got.mu.Lock()
			first, second := got.msgs[0], got.msgs[1]
			got.mu.Unlock()
			if second.Topic != "T" || string(second.Body) != "payload" || second.ReconsumeTimes != 1 || second.Tags != "X" {
				t.Fatalf("redelivered %v (reconsume %d)", second, second.ReconsumeTimes)
			}
			b.mu.Lock()
			sb := slices.Clone(b.sendBacks)
			b.mu.Unlock()
			if len(sb) != 1 || sb[0].Group != "G" || sb[0].OriginTopic != "T" || sb[0].Offset != first.CommitLogOffset ||
				sb[0].DelayLevel != 2 || sb[0].OriginMsgID != first.MsgID || sb[0].MaxReconsumeTimes != 16 {
				t.Fatalf("send-backs %+v", sb)
			}
			if fallback {
				b.mu.Lock()
				retried := b.queues[qKey{wire.RetryTopic("G"), 0}][0]
				b.mu.Unlock()
				if retried.props[wire.PropertyRetryTopic] != "T" || retried.props[wire.PropertyReconsumeTime] != "1" || retried.props[wire.PropertyDelayTimeLevel] != "3" ||
					retried.props[wire.PropertyOriginMessageID] != first.MsgID || retried.reconsume != 1 {
					t.Fatalf("fallback message %+v", retried)
				}
			}
			// The original is committed: the send-back took it over.
			testutil.WaitFor(t, 5*time.Second, "offset of T committed", func() bool { off, _ := b.offset("G", "T", 0); return off == 1 })
		})
	}
}

func TestPushConsumerOrderly(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("G"): 1})
	for q := range 2 {
		for i := range 30 {
			b.put("T", q, fmt.Sprintf("%d", i), nil)
		}
	}
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), SuspendCurrentQueueTime(20*time.Millisecond), ConsumeMessageBatchMaxSize(4))
	_ = c.Subscribe("T", "*")
	var mu sync.Mutex
	seq := map[int][]int64{}
	inFlight := map[int]int{}
	var overlap atomic.Bool
	suspended := false
	if err := c.RegisterOrderlyListener(func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
		q := oc.Queue.QueueID
		mu.Lock()
		inFlight[q]++
		if inFlight[q] > 1 {
			overlap.Store(true)
		}
		suspend := !suspended && q == 1 && msgs[0].QueueOffset >= 8
		if suspend {
			suspended = true
		}
		mu.Unlock()
		if b.lockHolder("G", oc.Queue) != c.ClientID() {
			t.Errorf("consuming %v without the broker lock", oc.Queue)
		}
		mu.Lock()
		defer mu.Unlock()
		inFlight[q]--
		if suspend {
			return SuspendCurrentQueueAMoment
		}
		for _, m := range msgs {
			seq[q] = append(seq[q], m.QueueOffset)
		}
		return OrderlySuccess
	}); err != nil {
		t.Fatal(err)
	}
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "60 messages in order", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seq[0]) == 30 && len(seq[1]) == 30
	})
	mu.Lock()
	for q := range 2 {
		for i, off := range seq[q] {
			if off != int64(i) {
				t.Fatalf("queue %d consumed out of order: %v", q, seq[q])
			}
		}
	}
	mu.Unlock()
	if overlap.Load() || !suspended {
		t.Fatalf("overlap %v, suspended %v", overlap.Load(), suspended)
	}
	if b.count(remoting.RequestLockBatchMQ) == 0 {
		t.Fatal("no LOCK_BATCH_MQ")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for q := range 2 {
		if h := b.lockHolder("G", MessageQueue{"T", "broker-a", q}); h != "" {
			t.Fatalf("queue %d still locked by %s after Close", q, h)
		}
		if off, _ := b.offset("G", "T", q); off != 30 {
			t.Fatalf("queue %d committed %d", q, off)
		}
	}
}

// TestRebalanceHandOverNoOverlap runs two orderly consumers of one group:
// when the second joins, the broker's NOTIFY makes both rebalance, and
// every queue moves only after its old owner stopped, committed and
// unlocked — no queue is ever consumed by both at once, no message twice.
func TestRebalanceHandOverNoOverlap(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 4, wire.RetryTopic("G"): 1})
	const perQueue = 150
	var mu sync.Mutex
	owner := map[int]string{} // queue → consumer inside the listener now
	seen := map[string]int{}
	var overlap atomic.Value
	listener := func(name string) OrderlyListener {
		return func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
			q := oc.Queue.QueueID
			mu.Lock()
			if o := owner[q]; o != "" {
				overlap.Store(fmt.Sprintf("queue %d: %s entered while %s consumes", q, name, o))
			}
			owner[q] = name
			mu.Unlock()
			time.Sleep(time.Millisecond) // work; widens any overlap window
			mu.Lock()
			delete(owner, q)
			for _, m := range msgs {
				seen[string(m.Body)]++
			}
			mu.Unlock()
			return OrderlySuccess
		}
	}
	mk := func(name string) *PushConsumer {
		c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), InstanceName(name), PullBatchSize(4))
		_ = c.Subscribe("T", "*")
		_ = c.RegisterOrderlyListener(listener(name))
		return c
	}
	for q := range 4 {
		for i := range perQueue {
			b.put("T", q, fmt.Sprintf("%d-%d", q, i), nil)
		}
	}
	a := mk("A")
	startPush(t, a)
	testutil.WaitFor(t, 5*time.Second, "A consumes", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) > 20 })
	c2 := mk("B")
	startPush(t, c2)
	testutil.WaitFor(t, 10*time.Second, "queues split 2/2", func() bool {
		return countTopic(a.OwnedQueues(), "T") == 2 && countTopic(c2.OwnedQueues(), "T") == 2
	})
	testutil.WaitFor(t, 10*time.Second, "every message consumed", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 4*perQueue })
	if v := overlap.Load(); v != nil {
		t.Fatal(v)
	}
	mu.Lock()
	for body, n := range seen {
		if n != 1 {
			t.Errorf("%s consumed %d times", body, n)
		}
	}
	mu.Unlock()
	for _, mq := range a.OwnedQueues() {
		if slices.Contains(c2.OwnedQueues(), mq) {
			t.Fatalf("%v owned by both", mq)
		}
	}
	// B leaving hands its queues back to A.
	if err := c2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "A owns all 4 again", func() bool { return countTopic(a.OwnedQueues(), "T") == 4 })
}

func countTopic(mqs []MessageQueue, topic string) int {
	n := 0
	for _, mq := range mqs {
		if mq.Topic == topic {
			n++
		}
	}
	return n
}

func TestRebalanceConcurrentConsumersSplitQueues(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 4, wire.RetryTopic("G"): 1})
	var got collector
	mk := func(name string) *PushConsumer {
		c := newTestPush(t, ns, "G", InstanceName(name), Strategy(AllocateAveragelyByCircle()))
		_ = c.Subscribe("T", "*")
		_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
			got.add(msgs...)
			return ConsumeSuccess
		})
		startPush(t, c)
		return c
	}
	a, c2 := mk("A"), mk("B")
	// Each consumer rebalances on its own clock, so a queue can be held by
	// both for a moment while the split settles; the split is a state both
	// reach together: two queues of T each, none shared.
	testutil.WaitFor(t, 10*time.Second, "split", func() bool {
		qa, qb := a.OwnedQueues(), c2.OwnedQueues()
		for _, mq := range qa {
			if slices.Contains(qb, mq) {
				return false
			}
		}
		return countTopic(qa, "T") == 2 && countTopic(qb, "T") == 2 && len(qa)+len(qb) == 5
	})
	for q := range 4 {
		b.put("T", q, fmt.Sprint(q), nil)
	}
	// Concurrent consumers hand queues over at least once, so a message
	// may arrive twice while the split settles: wait for the four bodies.
	testutil.WaitFor(t, 5*time.Second, "4 messages", func() bool {
		bodies := got.bodies()
		slices.Sort(bodies)
		return len(slices.Compact(bodies)) == 4
	})
}

func TestBroadcastingStoresOffsetsLocally(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2})
	dir := t.TempDir()
	for q := range 2 {
		for i := range 5 {
			b.put("T", q, fmt.Sprintf("%d-%d", q, i), nil)
		}
	}
	run := func(name string, want int) *collector {
		var got collector
		c := newTestPush(t, ns, "BG", ConsumerModel(Broadcasting), OffsetDir(dir), InstanceName(name), ConsumeFrom(ConsumeFromFirstOffset))
		_ = c.Subscribe("T", "*")
		_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
			got.add(msgs...)
			return ConsumeSuccess
		})
		startPush(t, c)
		testutil.WaitFor(t, 5*time.Second, name+" gets every message", func() bool { return got.len() >= want })
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	g1, g2 := run("one", 10), run("two", 10)
	if g1.len() != 10 || g2.len() != 10 {
		t.Fatalf("broadcast: %d and %d messages", g1.len(), g2.len())
	}
	path := filepath.Join(dir, "one", "BG", "offsets.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	s := NewLocalOffsetStore(path)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	for q := range 2 {
		if off, err := s.Read(context.Background(), MessageQueue{"T", "broker-a", q}, ReadFromMemory); err != nil || off != 5 {
			t.Fatalf("queue %d: %d %v", q, off, err)
		}
	}
	if _, ok := b.offset("BG", "T", 0); ok {
		t.Fatal("broadcasting committed to the broker")
	}
	// A restart resumes from the file: only the new message arrives.
	b.put("T", 0, "after", nil)
	g3 := run("one", 1)
	if got := g3.bodies(); len(got) != 1 || got[0] != "after" {
		t.Fatalf("after restart: %v", got)
	}
}

func TestConsumerOptionValidation(t *testing.T) {
	for _, opts := range [][]ConsumerOpt{
		{NameServers("127.0.0.1:9876")},
		{NameServers("127.0.0.1:9876"), ConsumerGroup("G"), ConsumeGoroutines(0)},
		{NameServers("127.0.0.1:9876"), ConsumerGroup("G"), LongPolling(time.Second, time.Second)},
		{NameServers("127.0.0.1:9876"), ConsumerGroup("G"), ConsumerModel(Broadcasting), OffsetDir("")},
		{ConsumerGroup("G")},
		// %RETRY% + a 121-byte group would not fit the 127-byte topic limit.
		{NameServers("127.0.0.1:9876"), ConsumerGroup(strings.Repeat("g", 121))},
	} {
		if _, err := NewPushConsumer(opts...); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%d options: %v", len(opts), err)
		}
	}
	c, err := NewPushConsumer(NameServers("127.0.0.1:9876"), ConsumerGroup(strings.Repeat("g", 120)))
	if err != nil {
		t.Fatalf("a 120-byte group (its retry topic is 127 bytes): %v", err)
	}
	_ = c.Close(context.Background())
}

// TestPushConsumerResetByBroker: a broker relays an admin's reset as
// RESET_CONSUMER_CLIENT_OFFSET; the consumer restarts the queue there.
func TestPushConsumerResetByBroker(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 10 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset))
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "10 messages", func() bool { return got.len() == 10 })
	b.mu.Lock()
	conn := b.members["G"][c.ClientID()].conn
	b.mu.Unlock()
	req := remoting.NewRequest(remoting.RequestResetConsumerClientOffset, &wire.ResetOffsetRequestHeader{Topic: "T", Group: "G", Timestamp: 1, IsForce: true},
		[]byte(`{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:7}}`))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := conn.InvokeSync(ctx, req)
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("reset: %v %v", resp, err)
	}
	testutil.WaitFor(t, 5*time.Second, "7, 8, 9 again", func() bool { return got.len() == 13 })
	// Concurrent workers may finish in any order.
	if b := got.bodies()[10:]; !slices.Equal(slices.Sorted(slices.Values(b)), []string{"7", "8", "9"}) {
		t.Fatalf("after reset: %v", b)
	}
}

// TestPushConsumerResetOrderedAfterPersistSend: a broker relays a reset
// while a persist round's send of the queue's older offset (3) is still
// in flight (the broker holds it). Brokers keep the last offset they are
// sent, so the reset's send (1) must go after that one, through the
// group's send token: landing first, it would be undone and the group's
// committed offset would skip the reset.
func TestPushConsumerResetOrderedAfterPersistSend(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 3 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	b.mu.Lock()
	b.noPullCommit = true
	b.mu.Unlock()
	sends := func() int { // offset commits of T's queue 0 received
		n := 0
		for _, req := range b.requests(remoting.RequestUpdateConsumerOffset) {
			var h wire.UpdateConsumerOffsetRequestHeader
			if req.DecodeHeader(&h) == nil && h.Topic == "T" && h.QueueID == 0 {
				n++
			}
		}
		return n
	}
	var held atomic.Bool
	b.answer(remoting.RequestUpdateConsumerOffset, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		// The first commit of T's queue 0 (the persist round's, the
		// retry queue's aside) is held until the reset's send waits for
		// the group's send token, or, sent beside it, arrives; it then
		// lands.
		var h wire.UpdateConsumerOffsetRequestHeader
		if req.DecodeHeader(&h) == nil && h.Topic == "T" && h.QueueID == 0 && held.CompareAndSwap(false, true) {
			eventually(5*time.Second, func() bool { return sends() >= 2 || resetWaitsForToken() })
		}
		return b.other(nil, req)
	})
	// The persist round's send waits for its answer well past the hold.
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour), RequestTimeout(5*time.Second))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult {
		return ConsumeSuccess
	})
	startPush(t, c)
	mq := MessageQueue{"T", "broker-a", 0}
	testutil.WaitFor(t, 5*time.Second, "3 consumed", func() bool {
		off, err := c.core.store.Read(context.Background(), mq, ReadFromMemory)
		return err == nil && off == 3
	})
	persisted := make(chan struct{})
	go func() { defer close(persisted); c.core.persistAll(c.core.ctx) }()
	testutil.WaitFor(t, 5*time.Second, "the persist round's send at the broker", func() bool { return sends() >= 1 })
	b.mu.Lock()
	conn := b.members["G"][c.ClientID()].conn
	b.mu.Unlock()
	req := remoting.NewRequest(remoting.RequestResetConsumerClientOffset, &wire.ResetOffsetRequestHeader{Topic: "T", Group: "G", Timestamp: 1, IsForce: true},
		[]byte(`{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:1}}`))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := conn.InvokeSync(ctx, req); err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("reset: %v %v", resp, err)
	}
	<-persisted
	if off, _ := b.offset("G", "T", 0); off != 1 {
		t.Fatalf("committed offset after the reset to 1: %d (the persist round's older send landed after the reset's)", off)
	}
}

// resetWaitsForToken reports whether a broker's reset is sending offsets
// while a send waits for a broker group's send token (the persist round
// of the test holds it).
func resetWaitsForToken() bool {
	var resetting, waiting bool
	for _, g := range sdkGoroutines() {
		resetting = resetting || strings.Contains(g, "(*consumerCore).resetOffsets(") && strings.Contains(g, "(*consumerCore).sendOffsets(")
		waiting = waiting || strings.Contains(g, "(*consumerCore).sendToken(")
	}
	return resetting && waiting
}

// TestOrderlyStopsWithoutLock: locks are renewed every LockInterval; a
// queue whose lock went to another client is not consumed until the lock
// comes back.
func TestOrderlyStopsWithoutLock(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	c := newTestPush(t, ns, "G", LockInterval(30*time.Millisecond))
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterOrderlyListener(func(_ context.Context, _ *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
		got.add(msgs...)
		return OrderlySuccess
	})
	startPush(t, c)
	q0 := MessageQueue{"T", "broker-a", 0}
	testutil.WaitFor(t, 5*time.Second, "queue locked", func() bool { return b.lockHolder("G", q0) == c.ClientID() })
	renewals := b.count(remoting.RequestLockBatchMQ)
	testutil.WaitFor(t, 5*time.Second, "lock renewals", func() bool { return b.count(remoting.RequestLockBatchMQ) >= renewals+3 })
	b.put("T", 0, "first", nil)
	testutil.WaitFor(t, 5*time.Second, "first", func() bool { return got.len() == 1 })

	// Another client takes the lock (ours expired at the broker).
	b.mu.Lock()
	b.locks["G|T|0"] = "someone-else"
	b.mu.Unlock()
	testutil.WaitFor(t, 5*time.Second, "lock loss noticed", func() bool {
		c.core.mu.Lock()
		pq := c.core.pqs[q0]
		c.core.mu.Unlock()
		return pq != nil && !pq.isLocked(time.Now(), lockMaxLiveTime)
	})
	b.put("T", 0, "second", nil)
	// Give the consumer every chance to (wrongly) consume: several renewals.
	n := b.count(remoting.RequestLockBatchMQ)
	testutil.WaitFor(t, 5*time.Second, "more lock attempts", func() bool { return b.count(remoting.RequestLockBatchMQ) >= n+3 })
	if got.len() != 1 {
		t.Fatalf("consumed %v without the lock", got.bodies())
	}
	b.mu.Lock()
	delete(b.locks, "G|T|0")
	b.mu.Unlock()
	testutil.WaitFor(t, 5*time.Second, "second after the lock came back", func() bool { return got.len() == 2 })
}
