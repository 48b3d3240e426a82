package broker

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// Integration tests with the UNMODIFIED official RocketMQ Go client
// against a real name server and a real 3-node Raft group on loopback.

func init() {
	// The official client logs every route refresh and rebalance at info.
	rlog.SetLogLevel("error")
}

var instanceSeq atomic.Int64

// officialProducer starts an official producer with its own client
// instance (the official client shares one instance per name otherwise).
func officialProducer(t *testing.T, nsAddr string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	base := []producer.Option{
		producer.WithNameServer(primitive.NamesrvAddr{nsAddr}),
		producer.WithGroupName("PG" + strconv.FormatInt(instanceSeq.Add(1), 10)),
		producer.WithInstanceName("p" + strconv.FormatInt(instanceSeq.Add(1), 10)),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// officialPushConsumer starts an official push consumer.
func officialPushConsumer(t *testing.T, nsAddr, group, topic, expr string,
	f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error), opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	base := []consumer.Option{
		consumer.WithNameServer(primitive.NamesrvAddr{nsAddr}),
		consumer.WithGroupName(group),
		consumer.WithInstance("c" + strconv.FormatInt(instanceSeq.Add(1), 10)),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithPullInterval(0),
	}
	c, err := rocketmq.NewPushConsumer(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expr}, f); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}

// bodySet collects received bodies.
type bodySet struct {
	mu   sync.Mutex
	seen map[string]int
}

func newBodySet() *bodySet { return &bodySet{seen: map[string]int{}} }

func (b *bodySet) add(msgs ...*primitive.MessageExt) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range msgs {
		b.seen[string(m.Body)]++
	}
}

func (b *bodySet) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

func (b *bodySet) has(body string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[body] > 0
}

// TestOfficialQuickstart: sync sends to an auto-created topic, a batch
// send, a push consumer with a tag filter gets exactly its tag, another
// gets everything; a key query and a timestamp search find the messages.
func TestOfficialQuickstart(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startDiskCluster(t, nil)
	p := officialProducer(t, pc.nsAddr)
	ctx := context.Background()
	const topic = "QS"
	before := time.Now().UnixMilli()
	for i := 0; i < 20; i++ {
		tag := "TagA"
		if i%2 == 1 {
			tag = "TagB"
		}
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("m%d", i))).WithTag(tag).WithKeys([]string{fmt.Sprintf("key%d", i)})
		res, err := p.SendSync(ctx, m)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d: %v %v", i, res, err)
		}
	}
	var batch []*primitive.Message
	for i := 0; i < 10; i++ {
		batch = append(batch, primitive.NewMessage(topic, []byte(fmt.Sprintf("b%d", i))).WithTag("TagA"))
	}
	res, err := p.SendSync(ctx, batch...)
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("batch send: %v %v", res, err)
	}

	onlyA, all := newBodySet(), newBodySet()
	var wrongTag atomic.Int64
	officialPushConsumer(t, pc.nsAddr, "CG_A", topic, "TagA", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			if m.GetTags() != "TagA" {
				wrongTag.Add(1)
			}
		}
		onlyA.add(msgs...)
		return consumer.ConsumeSuccess, nil
	})
	officialPushConsumer(t, pc.nsAddr, "CG_ALL", topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		all.add(msgs...)
		return consumer.ConsumeSuccess, nil
	})
	testutil.WaitFor(t, 30*time.Second, "all 30 messages consumed by CG_ALL", func() bool { return all.len() == 30 })
	testutil.WaitFor(t, 30*time.Second, "20 TagA messages consumed by CG_A", func() bool { return onlyA.len() == 20 })
	if wrongTag.Load() != 0 || onlyA.has("m1") {
		t.Fatalf("tag filter leaked %d messages", wrongTag.Load())
	}

	// Query by key through the IndexFile (QUERY_MESSAGE, 12).
	leader := pc.nodes[pc.leader()].Addr()
	q := pc.call(leader, remoting.RequestQueryMessage, map[string]string{"topic": topic, "key": "key7", "maxNum": "32",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)}, nil)
	if q.Code != remoting.ResponseSuccess {
		t.Fatalf("query by key: %d %s", q.Code, q.Remark)
	}
	msgs := decodeAll(t, q.Body)
	if len(msgs) != 1 || string(msgs[0].Body) != "m7" {
		t.Fatalf("query by key7 returned %d messages", len(msgs))
	}
	// Its QUEUEOFFSET is the real one (patched like pulls): a pull at that
	// offset of its queue returns the same message.
	pr := pc.call(leader, remoting.RequestPullMessage, pullExt("CG_Q", topic, int(msgs[0].QueueID), msgs[0].QueueOffset, 0), nil)
	if pr.Code != remoting.ResponseSuccess {
		t.Fatalf("pull at the queried offset %d: %d %s", msgs[0].QueueOffset, pr.Code, pr.Remark)
	}
	if pulled := decodeAll(t, pr.Body); string(pulled[0].Body) != "m7" || pulled[0].QueueOffset != msgs[0].QueueOffset {
		t.Fatalf("pull at queried offset %d returned %q at %d", msgs[0].QueueOffset, pulled[0].Body, pulled[0].QueueOffset)
	}
	// VIEW_MESSAGE_BY_ID (33) patches it too.
	v := pc.call(leader, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(msgs[0].CommitLogOffset, 10)}, nil)
	if v.Code != remoting.ResponseSuccess {
		t.Fatalf("view by id: %d %s", v.Code, v.Remark)
	}
	if vm := decodeAll(t, v.Body); len(vm) != 1 || vm[0].QueueOffset != msgs[0].QueueOffset {
		t.Fatalf("view by id: %d messages, queue offset %v want %d", len(vm), vm, msgs[0].QueueOffset)
	}
	// SEARCH_OFFSET_BY_TIMESTAMP (29): before everything → offset 0.
	s := pc.call(leader, remoting.RequestSearchOffsetByTimestamp, map[string]string{"topic": topic, "queueId": "0",
		"timestamp": strconv.FormatInt(before-1000, 10)}, nil)
	if s.Code != remoting.ResponseSuccess || s.ExtFields["offset"] != "0" {
		t.Fatalf("search by timestamp: %d %v", s.Code, s.ExtFields)
	}
}

// TestOfficialRetryDelayDLQ: a failed message comes back through
// %RETRY%<group> after its delay level; one that always fails lands in
// %DLQ%<group> after maxReconsumeTimes; a DELAY message is held for its
// level's delay.
func TestOfficialRetryDelayDLQ(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startDiskCluster(t, nil)
	leader := pc.nodes[pc.leader()].Addr()
	pc.createTopic(leader, "RT", 2)
	pc.createTopic(leader, "%RETRY%CG_R", 1)
	pc.createTopic(leader, "%RETRY%CG_D", 1)
	p := officialProducer(t, pc.nsAddr)
	ctx := context.Background()

	var firstSeen sync.Map
	redelivered := newBodySet()
	officialPushConsumer(t, pc.nsAddr, "CG_R", "RT", "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			if m.ReconsumeTimes == 0 {
				firstSeen.LoadOrStore(string(m.Body), time.Now())
				return consumer.ConsumeRetryLater, nil
			}
			redelivered.add(m)
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithConsumeMessageBatchMaxSize(1))
	var dlqAttempts atomic.Int64
	officialPushConsumer(t, pc.nsAddr, "CG_D", "RT", "dlq", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		dlqAttempts.Add(int64(len(msgs)))
		return consumer.ConsumeRetryLater, nil
	}, consumer.WithMaxReconsumeTimes(2), consumer.WithConsumeMessageBatchMaxSize(1))

	for i := 0; i < 3; i++ {
		if _, err := p.SendSync(ctx, primitive.NewMessage("RT", []byte(fmt.Sprintf("r%d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.SendSync(ctx, primitive.NewMessage("RT", []byte("poison")).WithTag("dlq")); err != nil {
		t.Fatal(err)
	}
	delayed := primitive.NewMessage("RT", []byte("delayed"))
	delayed.WithDelayTimeLevel(4) // 500 ms in the test table
	sentAt := time.Now()
	if _, err := p.SendSync(ctx, delayed); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 40*time.Second, "3 failed messages redelivered through the retry topic", func() bool {
		return redelivered.has("r0") && redelivered.has("r1") && redelivered.has("r2")
	})
	testutil.WaitFor(t, 20*time.Second, "delayed message delivered", func() bool {
		_, ok := firstSeen.Load("delayed")
		return ok
	})
	if v, _ := firstSeen.Load("delayed"); v.(time.Time).Sub(sentAt) < 450*time.Millisecond {
		t.Fatalf("delayed message first seen %v after send; want ≥ 500ms (level 4)", v)
	}
	testutil.WaitFor(t, 40*time.Second, "poison message in %DLQ%CG_D", func() bool {
		g := pc.groups[pc.leader()]
		return g.Store().GetMaxOffsetInQueue("%DLQ%CG_D", 0) == 1
	})
	if n := dlqAttempts.Load(); n != 3 {
		t.Fatalf("poison message delivered %d times, want 3 (first + 2 retries)", n)
	}
}

// TestOfficialOrderly: an orderly consumer (LOCK_BATCH_MQ) sees each
// order's steps in send order; sends use a queue selector.
func TestOfficialOrderly(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startDiskCluster(t, nil)
	leader := pc.nodes[pc.leader()].Addr()
	pc.createTopic(leader, "ORD", 4)
	p := officialProducer(t, pc.nsAddr, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	ctx := context.Background()
	const orders, steps = 4, 10
	for s := 0; s < steps; s++ {
		for o := 0; o < orders; o++ {
			m := primitive.NewMessage("ORD", []byte(fmt.Sprintf("%d:%d", o, s)))
			m.WithShardingKey(strconv.Itoa(o))
			if _, err := p.SendSync(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	last := map[int]int{}
	queueOf := map[int]int{} // order → the one queue the selector put it in
	var outOfOrder, got, spread atomic.Int64
	officialPushConsumer(t, pc.nsAddr, "CG_O", "ORD", "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			var o, s int
			fmt.Sscanf(string(m.Body), "%d:%d", &o, &s)
			if prev, ok := last[o]; ok && s != prev+1 {
				outOfOrder.Add(1)
			} else if !ok && s != 0 {
				outOfOrder.Add(1)
			}
			last[o] = s
			if q, ok := queueOf[o]; ok && q != m.Queue.QueueId {
				spread.Add(1)
			}
			queueOf[o] = m.Queue.QueueId
			got.Add(1)
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithConsumerOrder(true))
	testutil.WaitFor(t, 30*time.Second, "all ordered messages consumed", func() bool { return got.Load() >= orders*steps })
	if outOfOrder.Load() != 0 || spread.Load() != 0 {
		t.Fatalf("%d messages out of order, %d not in their order's queue", outOfOrder.Load(), spread.Load())
	}
}

// TestOfficialOffsetsSurviveRestart: a push consumer consumes a round,
// its offsets are committed through Raft, it shuts down; a new consumer
// of the same group (ConsumeFromFirstOffset, so a lost offset would replay
// everything) resumes at the committed offsets: it gets the new round and
// none of the old one.
func TestOfficialOffsetsSurviveRestart(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startDiskCluster(t, nil)
	pc.createTopicOnLeader("OR", 4)
	p := officialProducer(t, pc.nsAddr)
	ctx := context.Background()
	const n = 40
	send := func(prefix string) {
		for i := 0; i < n; i++ {
			if _, err := p.SendSync(ctx, primitive.NewMessage("OR", []byte(fmt.Sprintf("%s%d", prefix, i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("a")
	first := newBodySet()
	c1 := officialPushConsumer(t, pc.nsAddr, "CG_OR", "OR", "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		first.add(msgs...)
		return consumer.ConsumeSuccess, nil
	})
	testutil.WaitFor(t, 30*time.Second, "first consumer got round a", func() bool { return first.len() == n })
	committed := func() int64 {
		total := int64(0)
		for q := int32(0); q < 4; q++ {
			off, _ := pc.groups[pc.leader()].State().ConsumerOffset("CG_OR", "OR", q)
			total += off
		}
		return total
	}
	// The official client commits every 5 s and on Shutdown.
	testutil.WaitFor(t, 30*time.Second, "round a committed through Raft", func() bool { return committed() == n })
	if err := c1.Shutdown(); err != nil {
		t.Fatal(err)
	}

	send("b")
	second := newBodySet()
	officialPushConsumer(t, pc.nsAddr, "CG_OR", "OR", "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		second.add(msgs...)
		return consumer.ConsumeSuccess, nil
	})
	testutil.WaitFor(t, 30*time.Second, "restarted consumer got round b", func() bool {
		second.mu.Lock()
		defer second.mu.Unlock()
		k := 0
		for body := range second.seen {
			if strings.HasPrefix(body, "b") {
				k++
			}
		}
		return k == n
	})
	second.mu.Lock()
	defer second.mu.Unlock()
	for body := range second.seen {
		if strings.HasPrefix(body, "a") {
			t.Errorf("restarted consumer re-consumed %s (offset not resumed)", body)
		}
	}
}

// TestOfficialLeaderKill: the leader dies while the official producer
// sends; sends resume once the client's route refresh (30 s, fixed in the
// official client) finds the new leader. RAFTMQ_LONG=1 only: it waits for
// that refresh.
func TestOfficialLeaderKill(t *testing.T) {
	if os.Getenv("RAFTMQ_LONG") != "1" {
		t.Skip("waits for the official client's 30 s route refresh; set RAFTMQ_LONG=1")
	}
	pc := startDiskCluster(t, withProdRaftTimings)
	pc.createTopicOnLeader("LK", 4)
	p := officialProducer(t, pc.nsAddr)
	ctx := context.Background()
	var ok, failed atomic.Int64
	send := func() {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := p.SendSync(c, primitive.NewMessage("LK", []byte("x"))); err != nil {
			failed.Add(1)
		} else {
			ok.Add(1)
		}
	}
	for i := 0; i < 20; i++ {
		send()
	}
	old := pc.leader()
	pc.stopNode(old)
	killedAt := time.Now()
	before := ok.Load()
	testutil.WaitFor(t, 60*time.Second, "sends succeed again after the leader was killed", func() bool {
		send()
		return ok.Load() > before+5
	})
	t.Logf("sends resumed %v after the leader kill (%d failed meanwhile)", time.Since(killedAt), failed.Load())
}

// TestOfficialModesAndOffsets: async and oneway sends; two clustering
// consumers of one group split the queues and, once the group is settled,
// consume every new message exactly once; two broadcasting consumers each
// get everything; consumer offsets are committed through Raft.
func TestOfficialModesAndOffsets(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startDiskCluster(t, nil)
	pc.createTopicOnLeader("MO", 4)
	p := officialProducer(t, pc.nsAddr)
	ctx := context.Background()
	const n = 40
	sendRound := func(prefix string) {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			m := primitive.NewMessage("MO", []byte(fmt.Sprintf("%s%d", prefix, i)))
			if i%4 == 3 {
				if err := p.SendOneWay(ctx, m); err != nil {
					t.Fatal(err)
				}
				continue
			}
			wg.Add(1)
			if err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("async send: %v", err)
				}
			}, m); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
	}

	var mu sync.Mutex
	byClient := map[string]int{}
	counts := map[string]int{}
	listener := func(name string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				counts[string(m.Body)]++
				if strings.HasPrefix(string(m.Body), "b") {
					byClient[name]++
				}
			}
			return consumer.ConsumeSuccess, nil
		}
	}
	officialPushConsumer(t, pc.nsAddr, "CG_C", "MO", "*", listener("c1"))
	officialPushConsumer(t, pc.nsAddr, "CG_C", "MO", "*", listener("c2"))
	b1, b2 := newBodySet(), newBodySet()
	for _, b := range []*bodySet{b1, b2} {
		officialPushConsumer(t, pc.nsAddr, "CG_B", "MO", "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			b.add(msgs...)
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumerModel(consumer.BroadCasting))
	}
	consumed := func(prefix string) int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for body := range counts {
			if strings.HasPrefix(body, prefix) {
				k++
			}
		}
		return k
	}
	// Round a: rebalancing may still move queues (at-least-once).
	sendRound("a")
	testutil.WaitFor(t, 30*time.Second, "clustering group consumed round a", func() bool { return consumed("a") == n })
	// Round b: the group is settled; every message exactly once, split.
	sendRound("b")
	testutil.WaitFor(t, 30*time.Second, "clustering group consumed round b", func() bool { return consumed("b") == n })
	testutil.WaitFor(t, 30*time.Second, "both broadcasting consumers got everything", func() bool { return b1.len() == 2*n && b2.len() == 2*n })
	mu.Lock()
	for body, c := range counts {
		if strings.HasPrefix(body, "b") && c != 1 {
			t.Errorf("clustering: %s consumed %d times", body, c)
		}
	}
	if byClient["c1"] == 0 || byClient["c2"] == 0 {
		t.Errorf("queues not split between the two members: %v", byClient)
	}
	mu.Unlock()

	// Offsets are committed through Raft (the client commits every 5 s).
	g := pc.groups[pc.leader()]
	testutil.WaitFor(t, 30*time.Second, "CG_C offsets committed through Raft", func() bool {
		total := int64(0)
		for q := int32(0); q < 4; q++ {
			off, _ := g.State().ConsumerOffset("CG_C", "MO", q)
			total += off
		}
		return total == 2*n
	})
}

// TestOfficialLastOffsetReadsYoungQueueFromStart: an official consumer of a
// new group with CONSUME_FROM_LAST_OFFSET reads a young topic's queues
// from their start, as against RocketMQ (its broker answers 0 to the
// group's offset query while a queue's first message is recent): it gets
// the messages sent before it started. Told "no offset", it started at
// the queues' ends and never got them.
func TestOfficialLastOffsetReadsYoungQueueFromStart(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startDiskCluster(t, nil)
	pc.createTopicOnLeader("YQ", 2)
	p := officialProducer(t, pc.nsAddr)
	const n = 10
	for i := range n {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage("YQ", []byte(fmt.Sprint("before-", i)))); err != nil {
			t.Fatal(err)
		}
	}
	got := newBodySet()
	officialPushConsumer(t, pc.nsAddr, "CG_YQ", "YQ", "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		got.add(msgs...)
		return consumer.ConsumeSuccess, nil
	}, consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset))
	testutil.WaitFor(t, 30*time.Second, "the messages sent before the consumer started", func() bool { return got.len() == n })
}
