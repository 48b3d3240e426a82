package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// TestOrderlyDeadLetter: on a real raftmq group, an orderly listener that
// always suspends on one message sees it 1 + MaxReconsumeTimes times, then
// the message is in %DLQ%group (body, msgId, origin id and topic kept) and the
// queue goes on with the messages behind it, in order; offsets are
// committed past all of them.
func TestOrderlyDeadLetter(t *testing.T) {
	const topic, group = "ODLQ", "ODLQGroup"
	ec, admin := startSendBackTopic(t, topic, 0)
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	p := startProducer(t, ns)
	var poisonID string
	for i, body := range []string{"m0", "poison", "m2", "m3"} {
		res, err := p.SendSync(ctx, client.NewMessage(topic, []byte(body)).WithKeys(fmt.Sprint("k", i)))
		if err != nil {
			t.Fatal(err)
		}
		if body == "poison" {
			poisonID = res.MsgID
		}
	}

	seen := startPoisonConsumer(t, ns, group, topic, 2, client.WithLogger(log))
	want := []string{"m0/0", "poison/0", "poison/1", "poison/2", "m2/0", "m3/0"}
	testutil.WaitFor(t, 20*time.Second, "the queue past the poison message", func() bool { return len(seen()) >= len(want) })
	if got := seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listener saw %v, want %v", got, want)
	}

	// The poison message is in %DLQ%group.
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 10*time.Second, "route of "+dlq, func() bool { _, err := admin.TopicRoute(ctx, dlq); return err == nil })
	stats, err := admin.TopicStatus(ctx, dlq)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := client.NewLitePullConsumer(client.NameServers(ns), client.ConsumerGroup("ODLQReader"), client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	var qs []client.MessageQueue
	for _, s := range stats {
		qs = append(qs, s.Queue)
	}
	if err := lp.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := lp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer lp.Close(ctx)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msgs, err := lp.Poll(pctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || string(msgs[0].Body) != "poison" || msgs[0].Properties[wire.PropertyOriginMessageID] != poisonID ||
		msgs[0].Properties[wire.PropertyRetryTopic] != topic || msgs[0].Keys[0] != "k1" || msgs[0].MsgID != poisonID {
		t.Fatalf("DLQ holds %v", msgs)
	}
	// Offsets were committed past the dead-lettered message.
	testutil.WaitFor(t, 10*time.Second, "lag 0", func() bool {
		prog, err := admin.ConsumerProgress(ctx, group, topic)
		return err == nil && len(prog) == 1 && prog[0].Lag == 0
	})
}

// TestOrderlyDeadLetterWithoutRedelivery: MaxReconsumeTimes(0) on an
// orderly listener means no redelivery: the first failure puts the
// message in %DLQ%group, as a send-back with maxReconsumeTimes 0 does,
// not in the retry topic under the group's retryMaxTimes.
func TestOrderlyDeadLetterWithoutRedelivery(t *testing.T) {
	const topic, group = "ODLQ0", "ODLQ0Group"
	ec, admin := startSendBackTopic(t, topic, 0)
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	p := startProducer(t, ns)
	for _, body := range []string{"poison", "m1"} {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte(body))); err != nil {
			t.Fatal(err)
		}
	}
	seen := startPoisonConsumer(t, ns, group, topic, 0)
	testutil.WaitFor(t, 20*time.Second, "the queue past the poison message", func() bool { return len(seen()) >= 2 })
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 10*time.Second, "the poison message in "+dlq, func() bool {
		stats, err := admin.TopicStatus(ctx, dlq)
		if err != nil {
			return false
		}
		n := int64(0)
		for _, s := range stats {
			n += s.MaxOffset - s.MinOffset
		}
		return n == 1
	})
	if got, want := seen(), []string{"poison/0", "m1/0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listener saw %v, want %v: no redelivery with MaxReconsumeTimes(0)", got, want)
	}
}

// startPoisonConsumer starts an orderly push consumer of topic for group
// with MaxReconsumeTimes(maxTimes), closed at the test's end, whose
// listener suspends its queue on every message "poison"; seen returns
// what the listener was given so far, as "body/reconsumeTimes".
func startPoisonConsumer(t *testing.T, ns, group, topic string, maxTimes int, opts ...client.ConsumerOpt) (seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	opts = append([]client.ConsumerOpt{client.NameServers(ns), client.ConsumerGroup(group),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.MaxReconsumeTimes(maxTimes),
		client.SuspendCurrentQueueTime(10 * time.Millisecond), client.PersistInterval(50 * time.Millisecond)}, opts...)
	c, err := client.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	_ = c.RegisterOrderlyListener(func(_ context.Context, _ *client.ConsumeOrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, fmt.Sprintf("%s/%d", m.Body, m.ReconsumeTimes))
			if string(m.Body) == "poison" {
				return client.SuspendCurrentQueueAMoment
			}
		}
		return client.OrderlySuccess
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
