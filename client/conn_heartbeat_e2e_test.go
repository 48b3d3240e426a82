package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// startConnCluster creates topic on a name server and one single-member
// raftmq group on in-memory parts, shared by the tests here (each with
// topics and groups of its own), and returns the member's address.
func startConnCluster(t *testing.T, topic string) (nsAddr, brokerAddr string) {
	t.Helper()
	ec := client.SharedCluster(t, "conn", func(string) devcluster.Options {
		return devcluster.Options{InMemory: true, Members: 1, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
			cfg.PullHoldCheckInterval = 100 * time.Millisecond
			cfg.TopicChangeCheckInterval = 50 * time.Millisecond
		}}
	})
	admin, err := client.NewAdmin(client.NameServers(ec.NamesrvAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	ctx := context.Background()
	brokerAddr = ec.Member(0, 0).Addr()
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2}, "", brokerAddr); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of "+topic, func() bool { _, err := admin.TopicRoute(ctx, topic); return err == nil })
	return ec.NamesrvAddr(), brokerAddr
}

// connections asks addr for a group's client connections: GET_CONSUMER_
// CONNECTION_LIST (consumer true) or GET_PRODUCER_CONNECTION_LIST; none
// when the broker knows no client of the group.
func connections(t *testing.T, rc *remoting.Client, addr, group string, consumer bool) []wire.Connection {
	t.Helper()
	req := remoting.NewRequest(remoting.RequestGetProducerConnectionList, &wire.GetProducerConnectionListRequestHeader{ProducerGroup: group}, nil)
	if consumer {
		req = remoting.NewRequest(remoting.RequestGetConsumerConnectionList, &wire.ConsumerGroupRequestHeader{ConsumerGroup: group}, nil)
	}
	resp, err := rc.InvokeSync(context.Background(), addr, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.ResponseSuccess {
		return nil
	}
	var body struct {
		ConnectionSet []wire.Connection `json:"connectionSet"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.ConnectionSet
}

// connOf is the address the broker sees clientID's connection of group
// from, "" when the group lacks it.
func connOf(t *testing.T, rc *remoting.Client, addr, group, clientID string, consumer bool) string {
	t.Helper()
	for _, c := range connections(t, rc, addr, group, consumer) {
		if c.ClientID == clientID {
			return c.ClientAddr
		}
	}
	return ""
}

// TestConsumerHeartbeatsOnNewConnection: a broker drops a consumer from
// its group when the consumer's connection to it closes; the consumer,
// pulling again on a new connection, heartbeats that broker at once, so
// the group lists it again on the new connection long before the next
// heartbeat interval (RocketMQ's onChannelActive heartbeat).
func TestConsumerHeartbeatsOnNewConnection(t *testing.T) {
	nsAddr, brokerAddr := startConnCluster(t, "HBC")
	admin := remoting.NewClient(remoting.ClientConfig{}, nil)
	t.Cleanup(func() { _ = admin.Close() })
	opts := []client.ConsumerOpt{client.NameServers(nsAddr), client.HeartbeatInterval(time.Hour),
		client.PullBackoff(50 * time.Millisecond), client.LongPolling(200*time.Millisecond, 2*time.Second)}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, group string) (clientID string, rc *remoting.Client)
	}{
		{"push", func(t *testing.T, group string) (string, *remoting.Client) {
			c, err := client.NewPushConsumer(append(opts, client.ConsumerGroup(group))...)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Subscribe("HBC", "*")
			_ = c.RegisterConcurrentListener(func(context.Context, *client.ConsumeConcurrentlyContext, []*client.MessageExt) client.ConsumeResult {
				return client.ConsumeSuccess
			})
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(ctx) })
			rc, _ := client.PushRemoting(c)
			return c.ClientID(), rc
		}},
		{"lite", func(t *testing.T, group string) (string, *remoting.Client) {
			c, err := client.NewLitePullConsumer(append(opts, client.ConsumerGroup(group))...)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Subscribe("HBC", "*")
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(ctx) })
			return c.ClientID(), client.LiteRemoting(c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := "HBCG_" + tc.name
			id, rc := tc.start(t, group)
			var before string
			testutil.WaitFor(t, 10*time.Second, "the consumer in its group", func() bool {
				before = connOf(t, admin, brokerAddr, group, id, true)
				return before != ""
			})
			rc.CloseConn(brokerAddr)
			testutil.WaitFor(t, 10*time.Second, "the consumer in its group on a new connection (heartbeat interval 1 h)", func() bool {
				now := connOf(t, admin, brokerAddr, group, id, true)
				return now != "" && now != before
			})
		})
	}
}

// TestTransactionProducerHeartbeatsOnNewConnection: a broker drops a
// transaction producer from its producer group when the producer's
// connection to it closes, leaving it nobody to check a transaction back
// with; the producer's next send, on a new connection, makes it heartbeat
// that broker at once, not a ProducerHeartbeatInterval later.
func TestTransactionProducerHeartbeatsOnNewConnection(t *testing.T) {
	nsAddr, brokerAddr := startConnCluster(t, "HBT")
	admin := remoting.NewClient(remoting.ClientConfig{}, nil)
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	tp, err := client.NewTransactionProducer(commitAll{}, client.NameServers(nsAddr), client.ProducerGroup("HBTPG"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close(ctx) })
	send := func() {
		t.Helper()
		if res, err := tp.SendMessageInTransaction(ctx, client.NewMessage("HBT", []byte("x"))); err != nil || res.EndErr != nil {
			t.Fatalf("send: %+v %v", res, err)
		}
	}
	send()
	var before string
	testutil.WaitFor(t, 10*time.Second, "the producer in its group", func() bool {
		before = connOf(t, admin, brokerAddr, "HBTPG", tp.ClientID(), false)
		return before != ""
	})
	client.ProducerRemoting(tp.Producer).CloseConn(brokerAddr)
	send()
	testutil.WaitFor(t, 5*time.Second, "the producer in its group on a new connection (heartbeat interval "+client.ProducerHeartbeatInterval.String()+")", func() bool {
		now := connOf(t, admin, brokerAddr, "HBTPG", tp.ClientID(), false)
		return now != "" && now != before
	})
}

// commitAll commits every transaction.
type commitAll struct{}

func (commitAll) ExecuteLocalTransaction(context.Context, *client.Message) client.LocalTransactionState {
	return client.TransactionCommit
}

func (commitAll) CheckLocalTransaction(context.Context, *client.MessageExt) client.LocalTransactionState {
	return client.TransactionCommit
}

// TestConsumerQueuesReturnOnNewConnection: when one of two consumers of a
// group loses its connection to the broker, the broker drops it and the
// other consumer takes its queue; the first, pulling again on a new
// connection, heartbeats at once, and the queue is its own again, with
// heartbeats and periodic rebalances an hour apart.
func TestConsumerQueuesReturnOnNewConnection(t *testing.T) {
	nsAddr, brokerAddr := startConnCluster(t, "HBQ")
	admin := remoting.NewClient(remoting.ClientConfig{}, nil)
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	start := func() *client.PushConsumer {
		c, err := client.NewPushConsumer(client.NameServers(nsAddr), client.ConsumerGroup("HBQG"),
			client.HeartbeatInterval(time.Hour), client.RebalanceInterval(time.Hour),
			client.PullBackoff(50*time.Millisecond), client.LongPolling(200*time.Millisecond, 2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Subscribe("HBQ", "*")
		_ = c.RegisterConcurrentListener(func(context.Context, *client.ConsumeConcurrentlyContext, []*client.MessageExt) client.ConsumeResult {
			return client.ConsumeSuccess
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(ctx) })
		return c
	}
	a, b := start(), start()
	// queue is the one queue of HBQ c owns (ok false: none or both).
	queue := func(c *client.PushConsumer) (mq client.MessageQueue, ok bool) {
		n := 0
		for _, q := range c.OwnedQueues() {
			if q.Topic == "HBQ" {
				mq, n = q, n+1
			}
		}
		return mq, n == 1
	}
	var aMQ client.MessageQueue
	var before string
	testutil.WaitFor(t, 10*time.Second, "one queue each", func() bool {
		before = connOf(t, admin, brokerAddr, "HBQG", a.ClientID(), true)
		aq, aOK := queue(a)
		bq, bOK := queue(b)
		aMQ = aq
		return before != "" && connOf(t, admin, brokerAddr, "HBQG", b.ClientID(), true) != "" && aOK && bOK && aq != bq
	})
	aRC, _ := client.PushRemoting(a)
	aRC.CloseConn(brokerAddr)
	testutil.WaitFor(t, 10*time.Second, "the closed consumer back in the group, its queue its own", func() bool {
		now := connOf(t, admin, brokerAddr, "HBQG", a.ClientID(), true)
		aq, aOK := queue(a)
		bq, bOK := queue(b)
		return now != "" && now != before && aOK && aq == aMQ && bOK && bq != aMQ
	})
}
