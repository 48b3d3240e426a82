package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// innerACLFile is the plain_acl.yml of the ACL tests here: an admin and
// an application account allowed the topic and the consumer groups only,
// nothing white-listed.
const innerACLFile = `
accounts:
  - accessKey: innerAdmin
    secretKey: innerAdminSecret
    admin: true
  - accessKey: innerApp
    secretKey: innerAppSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - InnerACL=PUB|SUB
    groupPerms:
      - InnerDLQGroup=SUB
      - InnerBackGroup=SUB
`

// innerApp signs the application's clients on the ACL group.
func innerApp() client.Opt { return client.WithCredentials("innerApp", "innerAppSecret") }

// startInnerACLTopic starts a raftmq group with aclEnable and topic
// InnerACL (one queue) holding bodies m0..m(n-1), sent as the application;
// it returns the name server address and an admin client signed as the
// admin account.
func startInnerACLTopic(t *testing.T, n int) (string, *client.Admin) {
	t.Helper()
	aclFile := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(aclFile, []byte(innerACLFile), 0o600); err != nil {
		t.Fatal(err)
	}
	ec := devcluster.MustStart(t, devcluster.Options{InMemory: true, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
		cfg.MessageDelayLevel = "100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms"
		cfg.PullHoldCheckInterval = 100 * time.Millisecond
		cfg.ScheduleMessageCheckInterval = 50 * time.Millisecond
		cfg.TopicChangeCheckInterval = 50 * time.Millisecond
		cfg.ConsumerOffsetCommitCoalescer = 20 * time.Millisecond
		cfg.AclEnable, cfg.AclFile = true, aclFile
		cfg.ClusterAuthAccessKey, cfg.ClusterAuthSecretKey = "innerCluster", "innerClusterSecret"
	}})
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	admin, err := client.NewAdmin(client.NameServers(ns), client.WithCredentials("innerAdmin", "innerAdminSecret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	const topic = "InnerACL"
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of "+topic, func() bool { _, err := admin.TopicRoute(ctx, topic); return err == nil })
	p := startProducer(t, ns, innerApp())
	for i := range n {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte(fmt.Sprint("m", i)))); err != nil {
			t.Fatal(err)
		}
	}
	return ns, admin
}

// storedIn is how many messages topic holds over its queues.
func storedIn(ctx context.Context, admin *client.Admin, topic string) int64 {
	st, err := admin.TopicStatus(ctx, topic)
	if err != nil {
		return -1
	}
	var n int64
	for _, s := range st {
		n += s.MaxOffset - s.MinOffset
	}
	return n
}

// TestACLOrderlyDeadLetter: with aclEnable, an orderly consumer signed by
// an account allowed its topic and group dead-letters a message that
// exhausted its redeliveries: its send to the DLQ goes out signed like the
// consumer's own requests, so the message is in %DLQ%group and the queue
// goes on behind it rather than consuming it again for ever.
func TestACLOrderlyDeadLetter(t *testing.T) {
	const group = "InnerDLQGroup"
	ns, admin := startInnerACLTopic(t, 3)
	ctx := context.Background()
	c, err := client.NewPushConsumer(client.NameServers(ns), innerApp(), client.ConsumerGroup(group),
		client.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.MaxReconsumeTimes(1),
		client.SuspendCurrentQueueTime(10*time.Millisecond), client.PersistInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe("InnerACL", "*")
	d := &orderlyDeliveries{}
	_ = c.RegisterOrderlyListener(d.suspendOn("m1", nil))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 20*time.Second, "m1 in "+dlq+" and m2 consumed", func() bool {
		seen := d.list()
		return len(seen) > 0 && seen[len(seen)-1] == "m2/0" && storedIn(ctx, admin, dlq) == 1
	})
	if got := fmt.Sprint(d.list()); got != "[m0/0 m1/0 m1/1 m2/0]" {
		t.Fatalf("deliveries %s", got)
	}
}

// TestACLSendBackFallback: with aclEnable, a concurrent consumer whose
// CONSUMER_SEND_MSG_BACK fails sends the message to its retry topic
// itself, signed like the consumer's own requests: the message is stored
// in %RETRY%group, comes back from there and the queue's offset moves on.
func TestACLSendBackFallback(t *testing.T) {
	const group = "InnerBackGroup"
	ns, admin := startInnerACLTopic(t, 2)
	ctx := context.Background()
	c, err := client.NewPushConsumer(client.NameServers(ns), innerApp(), client.ConsumerGroup(group),
		client.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.PersistInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	client.SetSendBackRetry(c, 50*time.Millisecond)
	_ = c.Subscribe("InnerACL", "*")
	var mu sync.Mutex
	var seen []string
	hooked := make(chan struct{})
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		<-hooked
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen = append(seen, fmt.Sprintf("%s/%d/%s", m.Body, m.ReconsumeTimes, m.Properties[wire.PropertyRetryTopic]))
			if string(m.Body) == "m0" && m.ReconsumeTimes == 0 {
				return client.ConsumeRetryLater
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// Only CONSUMER_SEND_MSG_BACK fails, so the send-back falls back to
	// the consumer's producer.
	refusal := &sendBackRefusal{codes: map[int16]bool{remoting.RequestConsumerSendMsgBack: true}}
	refusal.on.Store(true)
	own, _ := client.PushRemoting(c)
	own.AddHook(refusal)
	close(hooked)
	w := watchOffset(t, admin, group, "InnerACL")

	retry := wire.RetryTopic(group)
	testutil.WaitFor(t, 20*time.Second, "m0 in "+retry+" and offset 2 committed", func() bool {
		return storedIn(ctx, admin, retry) == 1 && w.last.Load() == 2
	})
	testutil.WaitFor(t, 10*time.Second, "m0 consumed from "+retry, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			if s == "m0/1/InnerACL" {
				return true
			}
		}
		return false
	})
	if refusal.refused.Load() == 0 {
		t.Fatal("no CONSUMER_SEND_MSG_BACK was refused")
	}
}
