package client_test

import (
	"context"
	"errors"
	"fmt"
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

// sharedE2ECluster is a real name server and a real 3-node raftmq group,
// the SDK's end-to-end target, with the broker's timers shortened for
// tests (e2eOptions). The members run on in-memory parts (Raft over an
// in-memory network, nothing synced); clients reach them over loopback
// TCP. The tests that leave the group as they found it (every member
// running, topics and groups of their own) share it (see
// client.SharedCluster).
func sharedE2ECluster(t testing.TB) *devcluster.Cluster {
	t.Helper()
	return client.SharedCluster(t, "e2e", func(string) devcluster.Options { return e2eOptions(true) })
}

// sharedFailoverCluster is sharedE2ECluster's kind of group, shared by the
// tests that kill, stop or restart members; each gets it back whole (see
// client.SharedFailoverCluster). It is not sharedE2ECluster's group: the
// tests there see no election.
func sharedFailoverCluster(t testing.TB) *devcluster.Cluster {
	t.Helper()
	return client.SharedFailoverCluster(t, "e2e-failover", func(string) devcluster.Options { return e2eOptions(true) })
}

// sharedFailoverDiskCluster is sharedFailoverCluster with members on their
// production parts: Raft over loopback TCP, synced files, restarts from
// disk.
func sharedFailoverDiskCluster(t testing.TB) *devcluster.Cluster {
	t.Helper()
	return client.SharedFailoverCluster(t, "e2e-failover-disk", func(string) devcluster.Options { return e2eOptions(false) })
}

// startE2EDiskCluster starts a group of its own on disk members, as
// sharedFailoverDiskCluster's (for benchmarks).
func startE2EDiskCluster(t testing.TB) *devcluster.Cluster {
	t.Helper()
	return devcluster.MustStart(t, e2eOptions(false))
}

// e2eOptions is the end-to-end group: one group of three members, on
// in-memory parts or on disk.
func e2eOptions(inMemory bool) devcluster.Options {
	return devcluster.Options{InMemory: inMemory, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
		cfg.MessageDelayLevel = "100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms"
		cfg.PullHoldCheckInterval = 100 * time.Millisecond
		cfg.ScheduleMessageCheckInterval = 50 * time.Millisecond
		cfg.TopicChangeCheckInterval = 50 * time.Millisecond
		cfg.ConsumerOffsetCommitCoalescer = 20 * time.Millisecond
		cfg.SendMessageThreadPoolNums, cfg.PullMessageThreadPoolNums = 4, 8
		cfg.Store.MaxMessageSize = 1 << 20
		cfg.RaftBatchMaxBytes = 1 << 20
		// Many tests run against one shared group at once, and their topic
		// and group creations together pass the production rate (10 a
		// second): a refused creation fails a test's send or commit. The
		// limit has tests of its own (broker).
		cfg.AutoCreateTopicMaxPerSecond = 1000
	}}
}

// led runs ViewMessage until a member answers it: the call goes to the
// member that stored the message, not to the group's leader, so it does
// not wait out an election as the SDK's leader-bound calls do.
func led(t *testing.T, what string, call func() error) error {
	t.Helper()
	var err error
	testutil.WaitFor(t, 30*time.Second, what+" answered by a leader", func() bool {
		err = call()
		var be *client.BrokerError
		notLeader := errors.As(err, &be) && be.Code == remoting.ResponseServiceNotAvailable
		return !notLeader && !errors.Is(err, client.ErrNoBroker)
	})
	return err
}

// TestEndToEndRaftGroup drives the SDK against a real raftmq group: the
// admin client creates a topic, the producer sends, a clustering push
// consumer receives every message (one is RECONSUME_LATER'd through the
// broker's retry topic), offsets reach the group (lag 0), and an orderly
// consumer and a lite pull consumer read the same topic.
func TestEndToEndRaftGroup(t *testing.T) {
	ec := sharedE2ECluster(t)
	nsAddr := ec.NamesrvAddr()
	ctx := context.Background()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	admin, err := client.NewAdmin(client.NameServers(nsAddr), client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "E2E", ReadQueueNums: 4, WriteQueueNums: 4}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of E2E", func() bool { _, err := admin.TopicRoute(ctx, "E2E"); return err == nil })

	p, err := client.NewProducer(client.NameServers(nsAddr), client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	const n = 40
	for i := range n {
		tag := "A"
		if i%4 == 3 {
			tag = "B"
		}
		if _, err := p.SendSync(ctx, client.NewMessage("E2E", []byte(fmt.Sprint(i))).WithTags(tag).WithKeys(fmt.Sprintf("key-%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	got := map[string]int{}
	retried := false
	c, err := client.NewPushConsumer(client.NameServers(nsAddr), client.WithLogger(log), client.ConsumerGroup("E2EG"),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.PersistInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("E2E", "A"); err != nil {
		t.Fatal(err)
	}
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if string(m.Body) == "0" && !retried {
				retried = true
				return client.ConsumeRetryLater
			}
			if m.Tags != "A" || m.Topic != "E2E" {
				t.Errorf("unexpected %v", m)
			}
			got[string(m.Body)]++
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	testutil.WaitFor(t, 20*time.Second, "30 TagA messages, one of them redelivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 30 && got["0"] == 1
	})
	testutil.WaitFor(t, 10*time.Second, "lag 0 on E2E", func() bool {
		prog, err := admin.ConsumerProgress(ctx, "E2EG", "E2E")
		if err != nil || len(prog) != 4 {
			return false
		}
		for _, q := range prog {
			if q.Lag != 0 {
				return false
			}
		}
		return true
	})

	// Orderly, in another group: per queue, offsets strictly increasing.
	var omu sync.Mutex
	last := map[int]int64{}
	count := 0
	oc, err := client.NewPushConsumer(client.NameServers(nsAddr), client.WithLogger(log), client.ConsumerGroup("E2EO"),
		client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	_ = oc.Subscribe("E2E", "*")
	_ = oc.RegisterOrderlyListener(func(_ context.Context, octx *client.ConsumeOrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
		omu.Lock()
		defer omu.Unlock()
		for _, m := range msgs {
			if prev, ok := last[octx.Queue.QueueID]; ok && m.QueueOffset != prev+1 {
				t.Errorf("queue %d: offset %d after %d", octx.Queue.QueueID, m.QueueOffset, prev)
			}
			last[octx.Queue.QueueID] = m.QueueOffset
			count++
		}
		return client.OrderlySuccess
	})
	if err := oc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer oc.Close(ctx)
	testutil.WaitFor(t, 20*time.Second, "orderly consumer gets all 40", func() bool { omu.Lock(); defer omu.Unlock(); return count == n })

	// Lite pull on one assigned queue.
	lp, err := client.NewLitePullConsumer(client.NameServers(nsAddr), client.WithLogger(log), client.ConsumerGroup("E2EL"),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.AutoCommit(false))
	if err != nil {
		t.Fatal(err)
	}
	queues, err := p.PublishQueues(ctx, "E2E")
	if err != nil {
		t.Fatal(err)
	}
	_ = lp.Assign(queues[:1])
	if err := lp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer lp.Close(ctx)
	total := 0
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for total < n/4 {
		msgs, err := lp.Poll(pctx)
		if err != nil {
			t.Fatalf("poll after %d: %v", total, err)
		}
		total += len(msgs)
	}
	if err := lp.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := admin.QueryMessageByKey(ctx, "E2E", "key-5", 8, time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "5" {
		t.Fatalf("query by key: %v %v", msgs, err)
	}
	var m *client.MessageExt
	if err := led(t, "view by id", func() (err error) { m, err = admin.ViewMessage(ctx, msgs[0].OffsetMsgID); return err }); err != nil || string(m.Body) != "5" {
		t.Fatalf("view by id: %v %v", m, err)
	}
	st, err := admin.TopicStatus(ctx, "E2E")
	if err != nil || len(st) != 4 {
		t.Fatalf("topic status: %+v %v", st, err)
	}
	var stored int64
	for _, q := range st {
		stored += q.MaxOffset - q.MinOffset
	}
	if stored != n {
		t.Fatalf("topic status counts %d messages, want %d", stored, n)
	}
	// Reset a configured group without consumers to an hour ago: every
	// queue to its start (brokers keep offsets of known groups only).
	if _, err := admin.UpdateSubscriptionGroup(ctx, wire.DefaultSubscriptionGroupConfig("E2ER"), "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	var reset map[client.MessageQueue]int64
	reset, err = admin.ResetOffsetByTime(ctx, "E2ER", "E2E", time.Now().Add(-time.Hour), true)
	if err != nil || len(reset) != 4 {
		t.Fatalf("reset: %v %v", reset, err)
	}
	testutil.WaitFor(t, 10*time.Second, "E2ER lag = every message", func() bool {
		prog, err := admin.ConsumerProgress(ctx, "E2ER", "E2E")
		if err != nil || len(prog) != 4 {
			return false
		}
		var lag int64
		for _, q := range prog {
			lag += q.Lag
		}
		return lag == n
	})
}

// TestEndToEndConsumerFailover kills the group's leader while a producer
// sends and a push consumer consumes: the consumer follows the new leader
// and gets every acknowledged message. It logs the gap between the kill
// and the first message consumed from a send acknowledged after it.
func TestEndToEndConsumerFailover(t *testing.T) {
	ec := sharedFailoverCluster(t)
	nsAddr := ec.NamesrvAddr()
	ctx := context.Background()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	admin, err := client.NewAdmin(client.NameServers(nsAddr), client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "FO", ReadQueueNums: 2, WriteQueueNums: 2}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of FO", func() bool { _, err := admin.TopicRoute(ctx, "FO"); return err == nil })
	p, err := client.NewProducer(client.NameServers(nsAddr), client.WithLogger(log), client.RouteRefreshInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	var mu sync.Mutex
	got := map[string]time.Time{}
	c, err := client.NewPushConsumer(client.NameServers(nsAddr), client.WithLogger(log), client.ConsumerGroup("FOG"),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.PullBackoff(100*time.Millisecond),
		client.RouteRefreshInterval(200*time.Millisecond), client.PersistInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe("FO", "*")
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if _, ok := got[string(m.Body)]; !ok {
				got[string(m.Body)] = time.Now()
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	acked := map[string]time.Time{}
	// Each message is sent until acknowledged (for up to 10 s), as an
	// application would retry through a failover.
	send := func(i int) {
		body := fmt.Sprint(i)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := p.SendSync(sctx, client.NewMessage("FO", []byte(body)))
			cancel()
			if err == nil {
				acked[body] = time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond) // pace retries of a failed send, not a wait for a condition
		}
	}
	for i := range 20 {
		send(i)
	}
	testutil.WaitFor(t, 10*time.Second, "first 20 consumed", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 20 })
	leader := ec.Leader(0)
	if leader < 0 {
		t.Fatal("no leader")
	}
	kill := time.Now()
	_ = ec.Stop(0, leader)
	for i := 20; i < 60; i++ {
		send(i)
	}
	testutil.WaitFor(t, 20*time.Second, "every acknowledged message consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for body := range acked {
			if _, ok := got[body]; !ok {
				return false
			}
		}
		return true
	})
	mu.Lock()
	first := time.Time{}
	for i := 20; i < 60; i++ {
		if at, ok := got[fmt.Sprint(i)]; ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	mu.Unlock()
	t.Logf("leader killed; %d of 40 sends acknowledged after it; first of them consumed %v after the kill", len(acked)-20, first.Sub(kill))
	if len(acked) < 50 {
		t.Fatalf("only %d of 40 sends after the kill acknowledged", len(acked)-20)
	}
}
