package client_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// undecodableSends are two messages no SDK can decode between two plain
// ones: a body of compression type 5 (RocketMQ knows 1 to 3) and a
// undecodableTopic creates topic (one queue) on the shared cluster and
// stores the undecodableSends named by index (all of them when none is).
// It returns the name server's address, an admin closed when the test
// ends, and the sends.
func undecodableTopic(t *testing.T, topic string, pick ...int) (string, *client.Admin, []storedSend) {
	t.Helper()
	ns := sharedE2ECluster(t).NamesrvAddr()
	admin, err := client.NewAdmin(client.NameServers(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	createE2ETopic(t, admin, topic, 1)
	sends := undecodableSends(t)
	stored := sends
	if len(pick) > 0 {
		stored = nil
		for _, i := range pick {
			stored = append(stored, sends[i])
		}
	}
	sendStored(t, admin, topic, stored...)
	return ns, admin, sends
}

// truncated LZ4 frame.
func undecodableSends(t *testing.T) []storedSend {
	return []storedSend{
		{"m0", []byte("m0"), 0},
		{"type5", []byte("compressed with a codec nobody knows"), wire.SysFlagCompressed | 5<<8},
		{"badLZ4", client.JavaLZ4(t, bytes.Repeat([]byte("truncated "), 1000))[:40], client.SysFlagLZ4},
		{"m3", []byte("m3"), 0},
	}
}

// pullStored pulls the message at offset of queue 0 of topic and returns
// it as stored: what the SDK cannot decode comes back as an
// *UndecodableMessageError holding the stored body.
func pullStored(t *testing.T, admin *client.Admin, group, topic string, offset int64) *client.MessageExt {
	t.Helper()
	route, err := admin.TopicRoute(context.Background(), topic)
	if err != nil || len(route.BrokerDatas) == 0 {
		t.Fatalf("route of %s: %v", topic, err)
	}
	bd := route.BrokerDatas[0]
	rc := remoting.NewClient(remoting.ClientConfig{}, nil)
	defer rc.Close()
	mq := client.MessageQueue{Topic: topic, BrokerName: bd.BrokerName, QueueID: 0}
	_, err = client.PullMessage(context.Background(), rc, bd.BrokerAddrs[0], &client.PullRequest{Group: group, Queue: mq, Offset: offset, MaxMsgNums: 1})
	var ue *client.UndecodableMessageError
	if !errors.As(err, &ue) || !errors.Is(err, client.ErrMalformedMessage) {
		t.Fatalf("pull of %s at %d: err %v, want an undecodable message", mq, offset, err)
	}
	return ue.Message
}

// TestPushUndecodableGoesToDLQ: messages a push consumer cannot decode do
// not block their queue: each is sent to %DLQ%group as stored (its body
// and sysFlag as the producer sent them, its msgId kept), an error log
// names it, and the messages behind them are consumed; the group's offset
// reaches the queue's end.
func TestPushUndecodableGoesToDLQ(t *testing.T) {
	ctx := context.Background()
	const topic, group = "UndecodablePush", "UndecodablePushGroup"
	ns, admin, sends := undecodableTopic(t, topic)
	core, logs := observer.New(zap.ErrorLevel)
	_, r := recordingConsumer(t, topic, nil, client.NameServers(ns), client.WithLogger(zap.New(core)), client.ConsumerGroup(group),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.PersistInterval(50*time.Millisecond), client.LongPolling(time.Second, 2*time.Second))
	dlq := wire.DLQGroupTopicPrefix + group
	testutil.WaitFor(t, 30*time.Second, "m3 consumed and two messages in "+dlq, func() bool {
		_, ok := r.body("m3")
		return ok && storedIn(ctx, admin, dlq) == 2
	})
	testutil.WaitFor(t, 10*time.Second, "the group's offset at the end of "+topic, func() bool {
		prog, err := admin.ConsumerProgress(ctx, group, topic)
		return err == nil && len(prog) == 1 && prog[0].ConsumerOffset == 4
	})
	if got := r.ids(); !slices.Equal(got, []string{"m0", "m3"}) {
		t.Errorf("deliveries %v, want m0 and m3", got)
	}
	for i, s := range sends[1:3] {
		m := pullStored(t, admin, group, dlq, int64(i))
		if m.MsgID != s.id || !bytes.Equal(m.Body, s.body) || m.SysFlag&0x701 != s.sysFlag || m.Properties[wire.PropertyRetryTopic] != topic {
			t.Errorf("DLQ message %d: msgId %s, body %q, sysFlag %#x, retry topic %q; want %s as sent, sysFlag %#x",
				i, m.MsgID, m.Body, m.SysFlag, m.Properties[wire.PropertyRetryTopic], s.id, s.sysFlag)
		}
		named := logs.FilterMessageSnippet("cannot be decoded").FilterField(zap.String("msgId", s.id)).FilterField(zap.Int64("queueOffset", int64(i+1)))
		if named.Len() != 1 {
			t.Errorf("%s: %d error logs naming it, want 1 (all: %v)", s.id, named.Len(), logs.All())
		}
	}
}

// TestUndecodableWaitsForTheDLQ: while no broker takes an undecodable
// message into the DLQ, its queue does not move past it: nothing behind
// it is consumed and the group's offset stays at it, so nothing is lost
// should the consumer stop; once the hand-over works, the queue goes on.
func TestUndecodableWaitsForTheDLQ(t *testing.T) {
	ctx := context.Background()
	const topic, group = "UndecodableWait", "UndecodableWaitGroup"
	ns, admin, _ := undecodableTopic(t, topic, 0, 1, 3)
	core, logs := observer.New(zap.WarnLevel)
	c, r := recordingConsumer(t, topic, func(c *client.PushConsumer) { client.SetSendBackRetry(c, 50*time.Millisecond) }, client.NameServers(ns), client.WithLogger(zap.New(core)), client.ConsumerGroup(group),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.PersistInterval(20*time.Millisecond), client.LongPolling(time.Second, 2*time.Second))
	refusal := refuseSendBack(c)
	refusal.on.Store(true)
	w := watchOffset(t, admin, group, topic)
	testutil.WaitFor(t, 30*time.Second, "m0 consumed, its offset committed and three DLQ hand-overs refused", func() bool {
		_, ok := r.body("m0")
		return ok && w.last.Load() == 1 && refusal.refused.Load() >= 3
	})
	if got := r.ids(); !slices.Equal(got, []string{"m0"}) || w.max.Load() != 1 {
		t.Fatalf("deliveries %v, committed offsets up to %d while the DLQ refuses; want m0 only, 1", got, w.max.Load())
	}
	if n := logs.FilterMessageSnippet("could not be sent to the DLQ").FilterField(zap.String("msgId", "type5")).FilterLevelExact(zap.WarnLevel).Len(); n != 1 {
		t.Errorf("%d warnings of the refused hand-over, want 1 (all: %v)", n, logs.All())
	}
	refusal.on.Store(false)
	testutil.WaitFor(t, 30*time.Second, "m3 consumed and the group's offset at the end", func() bool {
		_, ok := r.body("m3")
		return ok && w.last.Load() == 3
	})
	if w.max.Load() != 3 {
		t.Errorf("committed offsets reached %d", w.max.Load())
	}
	if n := storedIn(ctx, admin, wire.DLQGroupTopicPrefix+group); n != 1 {
		t.Errorf("%d messages in the DLQ, want 1", n)
	}
	if got := r.ids(); !slices.Equal(got, []string{"m0", "m3"}) {
		t.Errorf("deliveries %v, want m0 and m3", got)
	}
}

// TestLitePullUndecodableGoesToDLQ: a lite pull consumer, too, sends what
// it cannot decode to the DLQ and polls the messages behind it.
func TestLitePullUndecodableGoesToDLQ(t *testing.T) {
	ctx := context.Background()
	const topic, group = "UndecodableLite", "UndecodableLiteGroup"
	ns, admin, _ := undecodableTopic(t, topic)
	l, err := client.NewLitePullConsumer(client.NameServers(ns), client.ConsumerGroup(group), client.ConsumeFrom(client.ConsumeFromFirstOffset),
		client.LongPolling(time.Second, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Subscribe(topic, "*")
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	var got []string
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !slices.Contains(got, "m3") {
		msgs, err := l.Poll(pctx)
		if err != nil {
			t.Fatalf("polled %v, then: %v", got, err)
		}
		for _, m := range msgs {
			got = append(got, m.MsgID)
		}
	}
	if !slices.Equal(got, []string{"m0", "m3"}) {
		t.Errorf("polled %v, want m0 and m3", got)
	}
	testutil.WaitFor(t, 10*time.Second, "two messages in the DLQ", func() bool { return storedIn(ctx, admin, wire.DLQGroupTopicPrefix+group) == 2 })
}

// TestUndecodableBehindABusyListener: an undecodable message sent to the
// DLQ while the listener still holds the message before it counts as
// consumed: once the listener returns, the group's offset moves past both
// at once, so a consumer starting there does not hand it to the DLQ
// again.
func TestUndecodableBehindABusyListener(t *testing.T) {
	ctx := context.Background()
	const topic, group = "UndecodableBusy", "UndecodableBusyGroup"
	ns, admin, _ := undecodableTopic(t, topic, 0, 1)
	// Long polls held well beyond the waits below: no empty answer
	// corrects the offset meanwhile.
	c, err := client.NewPushConsumer(client.NameServers(ns), client.ConsumerGroup(group), client.ConsumeFrom(client.ConsumeFromFirstOffset),
		client.PersistInterval(20*time.Millisecond), client.LongPolling(30*time.Second, 35*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(topic, "*")
	release := make(chan struct{})
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, _ []*client.MessageExt) client.ConsumeResult {
		<-release
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	testutil.WaitFor(t, 30*time.Second, "the undecodable message in the DLQ", func() bool { return storedIn(ctx, admin, wire.DLQGroupTopicPrefix+group) == 1 })
	close(release)
	testutil.WaitFor(t, 5*time.Second, "the group's offset past both messages", func() bool {
		prog, err := admin.ConsumerProgress(ctx, group, topic)
		return err == nil && len(prog) == 1 && prog[0].ConsumerOffset == 2
	})
}

// TestBroadcastUndecodableLoggedAndPassed: a broadcasting consumer, which
// neither redelivers nor dead-letters, logs an undecodable message as an
// error naming it and consumes the messages behind it.
func TestBroadcastUndecodableLoggedAndPassed(t *testing.T) {
	const topic, group = "UndecodableBroadcast", "UndecodableBroadcastGroup"
	ns, _, _ := undecodableTopic(t, topic, 0, 1, 3)
	core, logs := observer.New(zap.ErrorLevel)
	_, r := recordingConsumer(t, topic, nil, client.NameServers(ns), client.WithLogger(zap.New(core)), client.ConsumerGroup(group),
		client.ConsumerModel(client.Broadcasting), client.OffsetDir(t.TempDir()), client.ConsumeFrom(client.ConsumeFromFirstOffset),
		client.LongPolling(time.Second, 2*time.Second))
	testutil.WaitFor(t, 30*time.Second, "m3 consumed", func() bool { _, ok := r.body("m3"); return ok })
	if got := r.ids(); !slices.Equal(got, []string{"m0", "m3"}) {
		t.Errorf("deliveries %v, want m0 and m3", got)
	}
	if n := logs.FilterMessageSnippet("cannot be decoded").FilterField(zap.String("msgId", "type5")).Len(); n != 1 {
		t.Errorf("%d error logs naming type5, want 1 (all: %v)", n, logs.All())
	}
}
