package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// SQL92 consumers end to end against a 3-node group with
// enablePropertyFilter=true: the official Go client and the SDK receive
// exactly the messages the expression selects.

// sqlSentinel is sent after the set; it matches sqlExpr. Its arrival
// proves the consumer pulled past every message before it on the
// one-queue topic, so nothing else can still arrive.
const sqlSentinel = "sentinel"

// sqlMessage is message i of the set: property a=i, tags TagA and TagB
// alternating; sqlSelected says whether sqlExpr selects it.
func sqlMessage(i int) (body, tag string) {
	tag = "TagA"
	if i%2 == 1 {
		tag = "TagB"
	}
	return fmt.Sprintf("m%d", i), tag
}

func sqlSelected(i int) bool { _, tag := sqlMessage(i); return i >= 5 && tag != "TagB" }

// sqlRecv records what a consumer got: every body with its count, and the
// bodies the expression should not have let through.
type sqlRecv struct {
	mu    sync.Mutex
	got   map[string]int
	wrong []string
}

func newSQLRecv() *sqlRecv { return &sqlRecv{got: map[string]int{}} }

func (r *sqlRecv) add(body string, a, tag string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[body]++
	n, err := strconv.Atoi(a)
	if err != nil || n < 5 || tag == "TagB" {
		r.wrong = append(r.wrong, body)
	}
}

func (r *sqlRecv) has(body string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[body] > 0
}

func (r *sqlRecv) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// check waits for the n selected messages, then sends the sentinel with
// send and waits for it, then requires exactly the selected set plus the
// sentinel, each once.
func (r *sqlRecv) check(t *testing.T, n int, send func(body string, a int, tag string)) {
	t.Helper()
	want := map[string]bool{sqlSentinel: true}
	for i := range n {
		if sqlSelected(i) {
			body, _ := sqlMessage(i)
			want[body] = true
		}
	}
	testutil.WaitFor(t, 30*time.Second, "every selected message", func() bool { return r.count() >= len(want)-1 })
	send(sqlSentinel, 1000, "TagA")
	testutil.WaitFor(t, 30*time.Second, "the sentinel", func() bool { return r.has(sqlSentinel) })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.wrong) > 0 || !maps.EqualFunc(r.got, want, func(n int, _ bool) bool { return n == 1 }) || len(r.got) != len(want) {
		t.Fatalf("received %v (not selected: %v); want each of %v once", r.got, r.wrong, slices.Sorted(maps.Keys(want)))
	}
}

// startSQLCluster starts the group with SQL92 filtering and a one-queue
// topic.
func startSQLCluster(t *testing.T, topic string) *procCluster {
	t.Helper()
	pc := startRealCluster(t, sqlEnabled)
	pc.createTopicOnLeader(topic, 1)
	return pc
}

// TestOfficialSQL92: the official Go client's push consumer with a SQL92
// selector receives exactly the selected messages. It never sends
// CHECK_CLIENT_CONFIG and says TAG in its pulls; the broker takes the type
// from its heartbeat.
func TestOfficialSQL92(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	const topic, n = "SQ", 40
	pc := startSQLCluster(t, topic)
	p := officialProducer(t, pc.nsAddr)
	send := func(body string, a int, tag string) {
		m := primitive.NewMessage(topic, []byte(body)).WithTag(tag)
		m.WithProperty("a", strconv.Itoa(a))
		if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", body, res, err)
		}
	}
	for i := range n {
		body, tag := sqlMessage(i)
		send(body, i, tag)
	}
	r := newSQLRecv()
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer(primitive.NamesrvAddr{pc.nsAddr}),
		consumer.WithGroupName("CG_SQL"),
		consumer.WithInstance("c"+strconv.FormatInt(instanceSeq.Add(1), 10)),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithPullInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: sqlExpr},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				r.add(string(m.Body), m.GetProperty("a"), m.GetTags())
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	r.check(t, n, send)
}

// sdkProducer starts an SDK producer.
func sdkProducer(t *testing.T, nsAddr string) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.NameServers(nsAddr), client.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func sdkConsumerOpts(nsAddr, group string) []client.ConsumerOpt {
	return []client.ConsumerOpt{client.NameServers(nsAddr), client.WithLogger(testLogger()), client.ConsumerGroup(group),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.LongPolling(time.Second, 3*time.Second),
		client.PullBackoff(50 * time.Millisecond)}
}

// TestSDKSQL92: the SDK's push and lite pull consumers with a SQL92
// selector receive exactly the selected messages.
func TestSDKSQL92(t *testing.T) {
	const n = 40
	pc := startRealCluster(t, sqlEnabled)
	p := sdkProducer(t, pc.nsAddr)
	// sendSet creates a one-queue topic and sends the set to it.
	sendSet := func(topic string) func(body string, a int, tag string) {
		pc.createTopicOnLeader(topic, 1)
		send := func(body string, a int, tag string) {
			m := client.NewMessage(topic, []byte(body)).WithTags(tag).WithProperty("a", strconv.Itoa(a))
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatalf("send %s: %v", body, err)
			}
		}
		for i := range n {
			body, tag := sqlMessage(i)
			send(body, i, tag)
		}
		return send
	}

	t.Run("push", func(t *testing.T) {
		const topic = "SQ_PUSH"
		send := sendSet(topic)
		r := newSQLRecv()
		c, err := client.NewPushConsumer(sdkConsumerOpts(pc.nsAddr, "SDK_SQL_PUSH")...)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SubscribeSelector(topic, client.SQL92(sqlExpr)); err != nil {
			t.Fatal(err)
		}
		if err := c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				r.add(string(m.Body), m.Properties["a"], m.Tags)
			}
			return client.ConsumeSuccess
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		r.check(t, n, send)
	})

	t.Run("lite pull", func(t *testing.T) {
		const topic = "SQ_LITE"
		send := sendSet(topic)
		r := newSQLRecv()
		c, err := client.NewLitePullConsumer(sdkConsumerOpts(pc.nsAddr, "SDK_SQL_LITE")...)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SubscribeSelector(topic, client.SQL92(sqlExpr)); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				msgs, err := c.Poll(ctx)
				if err != nil {
					return
				}
				for _, m := range msgs {
					r.add(string(m.Body), m.Properties["a"], m.Tags)
				}
			}
		}()
		defer func() { cancel(); <-done }()
		r.check(t, n, send)
	})
}

// TestSDKSQL92StartRefused: the SDK's consumers fail Start with the
// broker's reason when it cannot serve a SQL92 subscription: an
// expression that does not compile (SUBSCRIPTION_PARSE_FAILED with the
// parser's message), or a broker without enablePropertyFilter.
func TestSDKSQL92StartRefused(t *testing.T) {
	on, off := startSQLCluster(t, "SQ_BAD"), startRealCluster(t, nil)
	off.createTopic(off.nodes[off.leader()].Addr(), "SQ_BAD", 1)
	const bad = "a >= 5 AND"
	for _, c := range []struct {
		name     string
		pc       *procCluster
		expr     string
		code     int16
		inRemark string
	}{
		{"bad expression", on, bad, remoting.ResponseSubscriptionParseFailed, compileErr(t, bad)},
		{"filter off", off, sqlExpr, remoting.ResponseSystemError, "enablePropertyFilter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(kind string, err error) {
				t.Helper()
				var be *client.BrokerError
				if !errors.As(err, &be) || be.Code != c.code || !strings.Contains(err.Error(), c.inRemark) {
					t.Fatalf("%s Start: %v; want a broker error %d saying %q", kind, err, c.code, c.inRemark)
				}
			}
			push, err := client.NewPushConsumer(sdkConsumerOpts(c.pc.nsAddr, "SDK_SQL_BAD")...)
			if err != nil {
				t.Fatal(err)
			}
			if err := push.SubscribeSelector("SQ_BAD", client.SQL92(c.expr)); err != nil {
				t.Fatal(err)
			}
			if err := push.RegisterConcurrentListener(func(context.Context, *client.ConsumeConcurrentlyContext, []*client.MessageExt) client.ConsumeResult {
				return client.ConsumeSuccess
			}); err != nil {
				t.Fatal(err)
			}
			check("push", push.Start(context.Background()))
			_ = push.Close(context.Background())

			lite, err := client.NewLitePullConsumer(sdkConsumerOpts(c.pc.nsAddr, "SDK_SQL_BAD_LITE")...)
			if err != nil {
				t.Fatal(err)
			}
			if err := lite.SubscribeSelector("SQ_BAD", client.SQL92(c.expr)); err != nil {
				t.Fatal(err)
			}
			check("lite pull", lite.Start(context.Background()))
			_ = lite.Close(context.Background())
		})
	}
}
