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

// createE2ETopic creates topic with queues read and write queues on the
// shared end-to-end group and waits for its route.
func createE2ETopic(t *testing.T, admin *client.Admin, topic string, queues int) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueueNums: queues, WriteQueueNums: queues}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of "+topic, func() bool { _, err := admin.TopicRoute(ctx, topic); return err == nil })
}

// deliveries records "body/reconsumeTimes" per listener call.
type deliveries struct {
	mu   sync.Mutex
	seen []string
}

func (d *deliveries) add(m *client.MessageExt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, fmt.Sprintf("%s/%d", m.Body, m.ReconsumeTimes))
}

func (d *deliveries) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

// TestPushConcurrentRetriesEndInDLQ: a concurrent listener that keeps
// failing a message has it redelivered through the group's retry topic
// MaxReconsumeTimes times and then finds it in %DLQ%group, never again in
// the listener, as RocketMQ's broker does with CONSUMER_SEND_MSG_BACK; a
// DelayLevel of -1 sends a message to the DLQ at its first failure. The
// group's offsets reach the end of the topic and of its retry topic.
func TestPushConcurrentRetriesEndInDLQ(t *testing.T) {
	ec := sharedE2ECluster(t)
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	admin, err := client.NewAdmin(client.NameServers(ns), client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const topic, group = "ConcDLQ", "ConcDLQGroup"
	createE2ETopic(t, admin, topic, 1)
	p := startProducer(t, ns, client.WithLogger(log))
	for _, b := range []string{"m0", "m1", "m2", "m3"} {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte(b))); err != nil {
			t.Fatal(err)
		}
	}
	const maxTimes = 2
	c, err := client.NewPushConsumer(client.NameServers(ns), client.WithLogger(log), client.ConsumerGroup(group),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.MaxReconsumeTimes(maxTimes),
		client.PersistInterval(50*time.Millisecond), client.LongPolling(time.Second, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	d := &deliveries{}
	_ = c.RegisterConcurrentListener(func(_ context.Context, cc *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			d.add(m)
			switch string(m.Body) {
			case "m1":
				return client.ConsumeRetryLater
			case "m2":
				cc.DelayLevel = -1
				return client.ConsumeRetryLater
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 30*time.Second, "m1 and m2 in "+dlq, func() bool { return storedIn(ctx, admin, dlq) == 2 })
	testutil.WaitFor(t, 10*time.Second, "group offsets at the end of "+topic+" and of its retry topic", func() bool {
		for _, tp := range []string{topic, wire.RetryTopic(group)} {
			prog, err := admin.ConsumerProgress(ctx, group, tp)
			if err != nil || len(prog) == 0 {
				return false
			}
			for _, q := range prog {
				if q.Lag != 0 {
					return false
				}
			}
		}
		return true
	})
	got := d.list()
	slices.Sort(got)
	want := []string{"m0/0", "m1/0", "m1/1", "m1/2", "m2/0", "m3/0"}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries %v, want %v", got, want)
	}
}
