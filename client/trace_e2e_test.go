package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
)

// TestTraceEndToEnd: a traced producer and push consumer on a real raftmq
// group whose brokers create nothing on demand but the trace topic
// (autoCreateTopicEnable=false, traceTopicEnable=true): the trace topic
// ends up holding, in RocketMQ's format, a Pub record for every message
// sent and a SubBefore and a successful SubAfter for every message
// consumed, each trace message keyed by the traced message ids.
func TestTraceEndToEnd(t *testing.T) {
	ns, admin := startTraceCluster(t)
	ctx := context.Background()

	p, err := NewProducer(NameServers(ns), ProducerGroup("TracePG"), WithTrace(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	ids := map[string]bool{}
	for i := range 3 {
		res, err := p.SendSync(ctx, NewMessage("Traced", []byte(fmt.Sprint(i))).WithKeys(fmt.Sprint("key", i)).WithTags("T"))
		if err != nil {
			t.Fatal(err)
		}
		ids[res.MsgID] = true
	}
	var mu sync.Mutex
	consumed := 0
	c, err := NewPushConsumer(NameServers(ns), ConsumerGroup("TraceCG"), ConsumeFrom(ConsumeFromFirstOffset), WithTrace(""))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe("Traced", "*")
	_ = c.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult {
		mu.Lock()
		consumed++
		mu.Unlock()
		return ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	testutil.WaitFor(t, 10*time.Second, "3 messages consumed", func() bool { mu.Lock(); defer mu.Unlock(); return consumed == 3 })

	lp := traceReader(t, ns, admin)
	pub, before, after := map[string]bool{}, map[string]bool{}, map[string]bool{}
	keyed := map[string]bool{}
	testutil.WaitFor(t, 15*time.Second, "every Pub, SubBefore and SubAfter record", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		msgs, _ := lp.Poll(pctx)
		for _, m := range msgs {
			recs, err := decodeTraceData(string(m.Body))
			if err != nil {
				t.Fatalf("trace message %q: %v", m.Body, err)
			}
			for _, k := range m.Keys {
				keyed[k] = true
			}
			for _, r := range recs {
				switch {
				case r.Type == traceTypePub && r.GroupName == "TracePG" && r.Topic == "Traced" && r.Tags == "T" && r.Success:
					pub[r.MsgID] = true
				case r.Type == traceTypeSubBefore && r.GroupName == "TraceCG":
					before[r.MsgID] = true
				case r.Type == traceTypeSubAfter && r.GroupName == "TraceCG" && r.Success:
					after[r.MsgID] = true
				}
			}
		}
		for id := range ids {
			if !pub[id] || !before[id] || !after[id] || !keyed[id] {
				return false
			}
		}
		return true
	})
}

// startTraceCluster starts a one-member group that creates nothing on
// demand but the trace topic (autoCreateTopicEnable=false,
// traceTopicEnable=true), with the topic "Traced".
func startTraceCluster(t *testing.T) (string, *Admin) {
	ec := devcluster.MustStart(t, devcluster.Options{InMemory: true, Members: 1, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
		cfg.AutoCreateTopicEnable = false
		cfg.TraceTopicEnable = true
		cfg.PullHoldCheckInterval = 100 * time.Millisecond
		cfg.TopicChangeCheckInterval = 50 * time.Millisecond
	}})
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	admin, err := NewAdmin(NameServers(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	if _, err := admin.CreateTopic(ctx, TopicSpec{Topic: "Traced", ReadQueueNums: 2, WriteQueueNums: 2}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "routes", func() bool {
		_, err1 := admin.TopicRoute(ctx, "Traced")
		_, err2 := admin.TopicRoute(ctx, DefaultTraceTopic)
		return err1 == nil && err2 == nil
	})
	return ns, admin
}

// traceReader is a lite pull consumer of every queue of the trace topic,
// once the brokers created it (with its first trace message).
func traceReader(t *testing.T, ns string, admin *Admin) *LitePullConsumer {
	ctx := context.Background()
	var qs []QueueStat
	testutil.WaitFor(t, 10*time.Second, DefaultTraceTopic+" created", func() bool {
		var err error
		qs, err = admin.TopicStatus(ctx, DefaultTraceTopic)
		return err == nil
	})
	lp, err := NewLitePullConsumer(NameServers(ns), ConsumerGroup("TraceReader"), ConsumeFrom(ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	var mqs []MessageQueue
	for _, q := range qs {
		mqs = append(mqs, q.Queue)
	}
	if err := lp.Assign(mqs); err != nil {
		t.Fatal(err)
	}
	if err := lp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lp.Close(context.Background()) })
	return lp
}

// officialTraceRan is set once TestTraceOfficialClientRecords ran.
var officialTraceRan atomic.Bool

// TestTraceOfficialClientRecords: the unmodified official Go client, with
// its trace on, writes its Pub records to the same trace topic (it needs
// the topic routed: it never auto-creates it, hence traceTopicEnable), and
// the decoder that mirrors RocketMQ's reads them: the mirror is checked
// against a real encoder, not only against ours.
func TestTraceOfficialClientRecords(t *testing.T) {
	// The official client's trace producer is one per process (instance
	// INNER_TRACE_CLIENT_DEFAULT), bound to the first run's name server.
	if officialTraceRan.Swap(true) {
		t.Skip("the official client's trace producer is bound to an earlier run's name server (-count > 1)")
	}
	ns, admin := startTraceCluster(t)
	op, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("TraceOfficialPG"),
		producer.WithInstanceName(testutil.OfficialInstance("trace-official")), producer.WithRetry(2),
		producer.WithTrace(&primitive.TraceConfig{Access: primitive.Local, NamesrvAddrs: []string{ns}, GroupName: "TraceOfficialPG"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = op.Shutdown() }()
	ids := map[string]bool{}
	for i := range 3 {
		res, err := op.SendSync(context.Background(), primitive.NewMessage("Traced", []byte(fmt.Sprint(i))).WithTag("OT").WithKeys([]string{fmt.Sprint("ok", i)}))
		if err != nil {
			t.Fatal(err)
		}
		ids[res.MsgID] = true
	}
	lp := traceReader(t, ns, admin)
	pub := map[string]bool{}
	testutil.WaitFor(t, 15*time.Second, "the official client's Pub records", func() bool {
		pctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		msgs, _ := lp.Poll(pctx)
		for _, m := range msgs {
			recs, err := decodeTraceData(string(m.Body))
			if err != nil {
				t.Fatalf("official trace message %q: %v", m.Body, err)
			}
			for _, r := range recs {
				if r.Type == traceTypePub && r.Topic == "Traced" && r.Tags == "OT" && r.Success && r.StoreHost != "" {
					pub[r.MsgID] = true
				}
			}
		}
		for id := range ids {
			if !pub[id] {
				return false
			}
		}
		return true
	})
}
