package client_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// storedSend is one message sent by sendStored as a RocketMQ 5 producer
// would: body as it goes on the wire, sysFlag with the compression bits.
type storedSend struct {
	id      string // UNIQ_KEY
	body    []byte
	sysFlag int32
}

// sendStored sends each message with SEND_MESSAGE to queue 0 of topic on
// the leader of the route's first broker group, as a producer of another
// SDK does, and returns that queue.
func sendStored(t *testing.T, admin *client.Admin, topic string, msgs ...storedSend) client.MessageQueue {
	t.Helper()
	ctx := context.Background()
	route, err := admin.TopicRoute(ctx, topic)
	if err != nil || len(route.BrokerDatas) == 0 {
		t.Fatalf("route of %s: %v", topic, err)
	}
	bd := route.BrokerDatas[0]
	rc := remoting.NewClient(remoting.ClientConfig{}, nil)
	defer rc.Close()
	for _, m := range msgs {
		h := &wire.SendMessageRequestHeader{ProducerGroup: "RawSendPG", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: 0, SysFlag: m.sysFlag, BornTimestamp: time.Now().UnixMilli(),
			Properties: wire.EncodeProperties(map[string]string{wire.PropertyUniqKey: m.id, wire.PropertyWaitStoreMsgOK: "true"})}
		resp, err := rc.InvokeSync(ctx, bd.BrokerAddrs[0], remoting.NewRequest(remoting.RequestSendMessage, h, m.body))
		if err != nil || resp.Code != remoting.ResponseSuccess {
			t.Fatalf("send %s: err %v, answer %+v", m.id, err, resp)
		}
	}
	return client.MessageQueue{Topic: topic, BrokerName: bd.BrokerName, QueueID: 0}
}

// received collects msgId → body of what a listener got.
type received struct {
	mu   sync.Mutex
	got  map[string][]byte
	seen []string
}

func (r *received) add(m *client.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string][]byte{}
	}
	r.got[m.MsgID] = m.Body
	r.seen = append(r.seen, m.MsgID)
}

func (r *received) body(id string) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.got[id]
	return b, ok
}

func (r *received) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// recordingConsumer starts a push consumer of every tag of topic, built
// with opts, whose listener records what it gets and succeeds; prepare,
// if not nil, runs before it starts. It is closed when the test ends.
func recordingConsumer(t *testing.T, topic string, prepare func(*client.PushConsumer), opts ...client.ConsumerOpt) (*client.PushConsumer, *received) {
	t.Helper()
	c, err := client.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(c)
	}
	_ = c.Subscribe(topic, "*")
	r := &received{}
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			r.add(m)
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, r
}

// TestPushConsumesLZ4AndZstdBodies: messages a RocketMQ 5 producer
// compressed with LZ4 or zstd (or zlib under its type 3) reach a push
// consumer inflated, and the plain message behind them too; the
// compressed bodies inflate past the broker's message size limit.
func TestPushConsumesLZ4AndZstdBodies(t *testing.T) {
	ec := sharedE2ECluster(t)
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	admin, err := client.NewAdmin(client.NameServers(ns), client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const topic, group = "CompressedBodies", "CompressedBodiesGroup"
	createE2ETopic(t, admin, topic, 1)
	text := bytes.Repeat([]byte("inflated past the broker's 1 MiB limit "), 64<<10) // 2.5 MB
	want := map[string][]byte{"lz4": text, "zstd": append([]byte("zstd "), text...), "zlib3": []byte("zlib, RocketMQ 5 type 3"), "plain": []byte("plain")}
	sendStored(t, admin, topic,
		storedSend{"lz4", client.JavaLZ4(t, want["lz4"]), client.SysFlagLZ4},
		storedSend{"zstd", client.JavaZstd(t, want["zstd"]), client.SysFlagZstd},
		storedSend{"zlib3", client.Zlib(t, want["zlib3"]), client.SysFlagZlib},
		storedSend{"plain", want["plain"], 0})
	_, r := recordingConsumer(t, topic, nil, client.NameServers(ns), client.WithLogger(log), client.ConsumerGroup(group),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.LongPolling(time.Second, 2*time.Second))
	testutil.WaitFor(t, 30*time.Second, "the four messages consumed", func() bool { return len(r.ids()) >= len(want) })
	for id, w := range want {
		if b, ok := r.body(id); !ok || !bytes.Equal(b, w) {
			t.Errorf("%s: received %v, body of %d bytes; want %d bytes", id, ok, len(b), len(w))
		}
	}
	if ids := r.ids(); len(ids) != len(want) {
		t.Errorf("deliveries %v, want each of the four once", ids)
	}
}
