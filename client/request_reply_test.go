package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// startReplyCluster starts a name server and two raftmq groups (broker-a,
// broker-b) of single members on in-memory parts, with a topic
// routed by broker-a only.
func startReplyCluster(t testing.TB, topic string, configure ...func(*broker.BrokerConfig)) (*devcluster.Cluster, *client.Admin) {
	t.Helper()
	ec := devcluster.MustStart(t, devcluster.Options{InMemory: true, Groups: 2, Members: 1, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
		cfg.PullHoldCheckInterval = 100 * time.Millisecond
		cfg.TopicChangeCheckInterval = 50 * time.Millisecond
		cfg.SendMessageThreadPoolNums, cfg.PullMessageThreadPoolNums = 4, 8
		for _, f := range configure {
			f(cfg)
		}
	}})
	admin, err := client.NewAdmin(client.NameServers(ec.NamesrvAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	ctx := context.Background()
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2}, "", ec.Member(0, 0).Addr()); err != nil {
		t.Fatal(err)
	}
	reply := wire.ReplyTopic("DefaultCluster")
	testutil.WaitFor(t, 10*time.Second, "routes of "+topic+" and "+reply, func() bool {
		rd, err := admin.TopicRoute(ctx, topic)
		if err != nil || len(rd.BrokerDatas) != 1 {
			return false
		}
		rr, err := admin.TopicRoute(ctx, reply)
		return err == nil && len(rr.BrokerDatas) == 2
	})
	return ec, admin
}

func startProducer(t testing.TB, nsAddr string, opts ...client.ProducerOpt) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(append([]client.ProducerOpt{client.NameServers(nsAddr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// replyOn picks the reply topic's queue of one broker group.
func replyOn(broker string) client.MessageQueueSelector {
	return client.SelectorFunc(func(_ *client.Message, qs []client.MessageQueue) (client.MessageQueue, bool) {
		for _, q := range qs {
			if q.BrokerName == broker {
				return q, true
			}
		}
		return client.MessageQueue{}, false
	})
}

// TestRequestReplyTwoGroups: requests go to a topic of broker-a; a push
// consumer answers each, half through broker-a (Reply's choice: the
// request's group) and half forced through broker-b, which the requester
// never sent a request to: it is connected there because it heartbeats
// the reply topic's groups. Every request gets its own reply.
func TestRequestReplyTwoGroups(t *testing.T) {
	const topic = "RRTwo"
	ec, admin := startReplyCluster(t, topic)
	ns := ec.NamesrvAddr()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx := context.Background()

	replier := startProducer(t, ns, client.WithLogger(log), client.ProducerGroup("RRReplier"))
	c, err := client.NewPushConsumer(client.NameServers(ns), client.WithLogger(log), client.ConsumerGroup("RRGroup"),
		client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	_ = c.RegisterConcurrentListener(func(ctx context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if m.Properties[wire.PropertyCluster] != "DefaultCluster" {
				t.Errorf("request %s has CLUSTER %q", m.Body, m.Properties[wire.PropertyCluster])
			}
			body := []byte("re:" + string(m.Body))
			if strings.HasSuffix(string(m.Body), "b") {
				rm, err := client.NewReplyMessage(m, body)
				if err == nil {
					_, err = replier.SendWithSelector(ctx, rm, replyOn("broker-b"))
				}
				if err != nil && ctx.Err() == nil { // not a redelivery cut short by Close
					t.Errorf("reply through broker-b: %v", err)
				}
				continue
			}
			if _, err := replier.Reply(ctx, m, body); err != nil && ctx.Err() == nil { // not cut short by Close
				t.Errorf("reply: %v", err)
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	req := startProducer(t, ns, client.WithLogger(log), client.ProducerGroup("RRRequester"))
	for i := range 10 {
		body := fmt.Sprintf("q%d", i)
		if i%2 == 1 {
			body += "b"
		}
		msg := client.NewMessage(topic, []byte(body)).WithProperty("k", "v")
		reply, err := req.Request(ctx, msg, 10*time.Second)
		if err != nil {
			t.Fatalf("request %s: %v", body, err)
		}
		if got := string(reply.Body); got != "re:"+body {
			t.Fatalf("request %s: reply %q", body, got)
		}
		if reply.Topic != wire.ReplyTopic("DefaultCluster") || reply.Properties[wire.PropertyCorrelationID] == "" ||
			reply.Properties[wire.PropertyReplyToClient] != req.ClientID() || reply.Properties[wire.PropertyReplyArriveTime] == "" ||
			reply.Properties[wire.PropertyPushReplyTime] == "" {
			t.Fatalf("reply properties: topic %s %v", reply.Topic, reply.Properties)
		}
		if msg.Properties[wire.PropertyCorrelationID] != "" {
			t.Fatal("Request modified the caller's message")
		}
	}
	// storeReplyMessageEnable (default): each pushed reply is also stored
	// (after the push: the last may still be on its way).
	// Reply went through the request's group (broker-a), the forced ones
	// through broker-b.
	testutil.WaitFor(t, 10*time.Second, "5 replies stored on each group", func() bool {
		n := storedRepliesByGroup(t, admin)
		return n["broker-a"] == 5 && n["broker-b"] == 5
	})
}

// storedReplies counts the messages of the reply topic on every group (0
// for a group where no reply created it yet).
func storedReplies(t testing.TB, admin *client.Admin) int64 {
	t.Helper()
	var n int64
	for _, c := range storedRepliesByGroup(t, admin) {
		n += c
	}
	return n
}

// storedRepliesByGroup counts the reply topic's messages per group.
func storedRepliesByGroup(t testing.TB, admin *client.Admin) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	stats, err := admin.TopicStatus(context.Background(), wire.ReplyTopic("DefaultCluster"))
	if err != nil {
		return out
	}
	for _, s := range stats {
		out[s.Queue.BrokerName] += s.MaxOffset
	}
	return out
}

// TestRequestTimeout: nobody answers, Request ends with ErrRequestTimeout
// after its timeout.
func TestRequestTimeout(t *testing.T) {
	const topic = "RRNone"
	ec, _ := startReplyCluster(t, topic)
	p := startProducer(t, ec.NamesrvAddr())
	start := time.Now()
	_, err := p.Request(context.Background(), client.NewMessage(topic, []byte("x")), 500*time.Millisecond)
	if !errors.Is(err, client.ErrRequestTimeout) {
		t.Fatalf("err = %v, want ErrRequestTimeout", err)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 5*time.Second {
		t.Fatalf("returned after %v", d)
	}
}

// TestReplyToUnknownClient: a reply for a client that has no connection to
// the broker is refused with RocketMQ's remark (SYSTEM_ERROR), on every
// group the producer tries; nothing claims it was delivered.
func TestReplyToUnknownClient(t *testing.T) {
	ec, admin := startReplyCluster(t, "RRUnknown")
	p := startProducer(t, ec.NamesrvAddr(), client.RetryTimesWhenSendFailed(1))
	req := &client.MessageExt{}
	req.Properties = map[string]string{wire.PropertyCluster: "DefaultCluster", wire.PropertyReplyToClient: "10.0.0.9@nobody",
		wire.PropertyCorrelationID: "c1", wire.PropertyMessageTTL: "3000"}
	_, err := p.Reply(context.Background(), req, []byte("lost"))
	if err == nil || !strings.Contains(err.Error(), "channel of <10.0.0.9@nobody> not found") {
		t.Fatalf("err = %v, want the broker's channel-not-found refusal", err)
	}
	// Not stored either: the reply topic stays empty on both groups.
	if n := storedReplies(t, admin); n != 0 {
		t.Errorf("%d replies for an unknown client stored", n)
	}
	if _, err := client.NewReplyMessage(&client.MessageExt{}, nil); !errors.Is(err, client.ErrInvalidMessage) {
		t.Fatalf("reply to a message without CLUSTER: %v", err)
	}
	// A reply without REPLY_TO_CLIENT: RocketMQ's remark.
	bad := client.NewMessage(wire.ReplyTopic("DefaultCluster"), []byte("x")).WithProperty(wire.PropertyMessageType, wire.ReplyMessageFlag)
	if _, err := p.SendSync(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "reply message properties[REPLY_TO_CLIENT] is null") {
		t.Fatalf("reply without REPLY_TO_CLIENT: %v", err)
	}
}

// TestRequestReplyNotStored: with storeReplyMessageEnable=false replies
// are pushed only; the replier's answer says msgId "0".
func TestRequestReplyNotStored(t *testing.T) {
	const topic = "RRNoStore"
	ec, admin := startReplyCluster(t, topic, func(cfg *broker.BrokerConfig) { cfg.StoreReplyMessageEnable = false })
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	replier := startProducer(t, ns)
	c, err := client.NewPushConsumer(client.NameServers(ns), client.ConsumerGroup("RRNoStoreG"), client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	_ = c.RegisterConcurrentListener(func(ctx context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			res, err := replier.Reply(ctx, m, m.Body)
			if ctx.Err() != nil {
				// The consumer closes after the requests were answered; a
				// redelivery's reply cut short then is not a failure.
				continue
			}
			if err != nil || res.OffsetMsgID != "" && res.OffsetMsgID != "0" {
				t.Errorf("reply: %v %v", res, err)
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	p := startProducer(t, ns)
	for i := range 3 {
		if _, err := p.Request(ctx, client.NewMessage(topic, []byte(fmt.Sprint(i))), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := storedReplies(t, admin); n != 0 {
		t.Fatalf("%d replies stored with storeReplyMessageEnable=false", n)
	}
}

// BenchmarkRequestReply measures the request-reply round trip at low load:
// one request in flight, on a real 2-group cluster of 3-member groups on
// their production parts (Raft over loopback TCP, fsync'd files): the
// request is replicated, a push consumer's long poll wakes, the reply is
// pushed to the requester and stored. Reports p50/p99 of Request, the
// SDK's and the official Go client's (same replier).
//
//	go test ./client -run '^$' -bench RequestReply -benchtime 2000x
func BenchmarkRequestReply(b *testing.B) {
	ec := devcluster.MustStart(b, devcluster.Options{Groups: 2, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
		cfg.TopicChangeCheckInterval = 50 * time.Millisecond
	}})
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	admin, err := client.NewAdmin(client.NameServers(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "RRBench", ReadQueueNums: 4, WriteQueueNums: 4}, "DefaultCluster", ""); err != nil {
		b.Fatal(err)
	}
	testutil.WaitFor(b, 10*time.Second, "routes", func() bool {
		rd, err := admin.TopicRoute(ctx, "RRBench")
		if err != nil || len(rd.BrokerDatas) != 2 {
			return false
		}
		rr, err := admin.TopicRoute(ctx, wire.ReplyTopic("DefaultCluster"))
		return err == nil && len(rr.BrokerDatas) == 2
	})
	replier := startProducer(b, ns, client.ProducerGroup("RRBenchReplier"))
	c, err := client.NewPushConsumer(client.NameServers(ns), client.ConsumerGroup("RRBenchGroup"), client.ConsumeFrom(client.ConsumeFromLastOffset))
	if err != nil {
		b.Fatal(err)
	}
	_ = c.Subscribe("RRBench", "*")
	_ = c.RegisterConcurrentListener(func(ctx context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			_, _ = replier.Reply(ctx, m, m.Body)
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	body := []byte(strings.Repeat("x", 128))
	run := func(request func() error) func(b *testing.B) {
		return func(b *testing.B) {
			// Warm up: routes, connections, the consumer's queues.
			testutil.WaitFor(b, 20*time.Second, "a first round trip", func() bool { return request() == nil })
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := request(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		}
	}
	p := startProducer(b, ns, client.ProducerGroup("RRBenchRequester"))
	b.Run("sdk", run(func() error {
		_, err := p.Request(ctx, client.NewMessage("RRBench", body), 5*time.Second)
		return err
	}))
	op, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("RRBenchOfficial"),
		producer.WithInstanceName(testutil.OfficialInstance("rrbench-official")), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	if err := op.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = op.Shutdown() }()
	b.Run("official", run(func() error {
		_, err := op.Request(ctx, 5*time.Second, primitive.NewMessage("RRBench", body))
		return err
	}))
}
