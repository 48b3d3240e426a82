package namesrv

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// fakeBroker accepts SEND_MESSAGE so the official producer, routed by our
// name server, can prove it parsed the master address from the route.
type fakeBroker struct {
	srv *remoting.Server
	mu  sync.Mutex
	got []map[string]string // extFields of each send
}

func startFakeBroker(t *testing.T) *fakeBroker {
	t.Helper()
	fb := &fakeBroker{srv: remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)}
	var offset int64
	fb.srv.Register(remoting.RequestSendMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		fb.mu.Lock()
		fb.got = append(fb.got, req.ExtFields)
		offset++
		off := offset
		fb.mu.Unlock()
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		resp.ExtFields = map[string]string{
			"msgId":       "7F00000100002A9F0000000000000000",
			"queueId":     req.ExtFields["queueId"],
			"queueOffset": strconv.FormatInt(off, 10),
		}
		return resp, nil
	}, 1, 16)
	// Heartbeats and anything else the producer sends: plain SUCCESS.
	fb.srv.RegisterDefault(func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	if err := fb.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = fb.srv.Shutdown(ctx)
	})
	return fb
}

func (fb *fakeBroker) sends() []map[string]string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]map[string]string(nil), fb.got...)
}

func newOfficialAdmin(t *testing.T, nsAddr string) admin.Admin {
	t.Helper()
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{nsAddr})))
	if err != nil {
		t.Fatalf("official admin: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// TestOfficialClientReadsRoutes registers a master and a slave through our
// remoting client, then lets the official RocketMQ Go client look the route
// up (GET_ROUTEINFO_BY_TOPIC with version 317, i.e. legacy JSON) and send a
// message to the master it found.
func TestOfficialClientReadsRoutes(t *testing.T) {
	ns := testServer(t, nil)
	nsAddr := ns.Addr().String()
	fb := startFakeBroker(t)
	masterAddr := fb.srv.Addr().String()
	c := testClient(t)

	topicsV1 := topics(1,
		tc("RouteTopic", 8, 4, wire.PermRead|wire.PermWrite),
		tc("ReadOnlyTopic", 2, 2, wire.PermRead),
		tc("TBW102", 8, 8, wire.PermRead|wire.PermWrite|wire.PermInherit))
	testBroker{cluster: "DefaultCluster", name: "broker-a", addr: masterAddr, id: 0, topics: topicsV1}.register(t, c, nsAddr)
	// The slave's numbers differ on purpose: only the master's count.
	resp := testBroker{cluster: "DefaultCluster", name: "broker-a", addr: "127.0.0.1:10921", id: 1,
		topics: topics(1, tc("RouteTopic", 1, 1, wire.PermRead))}.register(t, c, nsAddr)
	if resp.ExtFields["masterAddr"] != masterAddr || resp.ExtFields["haServerAddr"] != masterAddr+"-ha" {
		t.Fatalf("slave registration response extFields %v", resp.ExtFields)
	}

	adm := newOfficialAdmin(t, nsAddr)
	ctx := context.Background()
	mqs, err := adm.FetchPublishMessageQueues(ctx, "RouteTopic")
	if err != nil {
		t.Fatalf("official client route lookup: %v", err)
	}
	if len(mqs) != 4 {
		t.Fatalf("official client sees %d writable queues, want 4 (writeQueueNums)", len(mqs))
	}
	for i, mq := range mqs {
		if mq.BrokerName != "broker-a" || mq.QueueId != i || mq.Topic != "RouteTopic" {
			t.Fatalf("queue %d = %+v", i, mq)
		}
	}
	// perm 4 (read only): the client must not offer it for publishing.
	ro, err := adm.FetchPublishMessageQueues(ctx, "ReadOnlyTopic")
	if err != nil {
		t.Fatalf("read-only topic lookup: %v", err)
	}
	if len(ro) != 0 {
		t.Fatalf("read-only topic offers %d queues for publishing", len(ro))
	}
	clusters, err := adm.FetchClusterList("RouteTopic")
	if err != nil || len(clusters) != 1 || clusters[0] != "DefaultCluster" {
		t.Fatalf("cluster list %v, %v", clusters, err)
	}
	if _, err := adm.FetchClusterList("NoSuchTopic"); !errors.Is(err, rmqerrors.ErrTopicNotExist) {
		t.Fatalf("unknown topic: want ErrTopicNotExist from the official client, got %v", err)
	}

	// The producer's first send looks the route up and must pick the
	// master address (brokerAddrs key 0) out of the legacy JSON.
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		producer.WithGroupName("namesrv-test-producer"),
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown() }()
	res, err := p.SendSync(ctx, primitive.NewMessage("RouteTopic", []byte("hello")))
	if err != nil {
		t.Fatalf("official producer send: %v", err)
	}
	if res.Status != primitive.SendOK || res.MessageQueue.BrokerName != "broker-a" || res.MessageQueue.QueueId >= 4 {
		t.Fatalf("send result %+v queue %+v", res, res.MessageQueue)
	}
	got := fb.sends()
	if len(got) != 1 || got[0]["topic"] != "RouteTopic" {
		t.Fatalf("fake master received %v", got)
	}
}

// TestOfficialClientSeesExpiry: with a 300 ms expiry and no heartbeats the
// broker disappears and the official client gets TOPIC_NOT_EXIST.
func TestOfficialClientSeesExpiry(t *testing.T) {
	ns := testServer(t, func(c *Config) {
		c.ScanNotActiveBrokerInterval = 50 * time.Millisecond
		c.BrokerChannelExpiredTime = 300 * time.Millisecond
	})
	nsAddr := ns.Addr().String()
	c := testClient(t)
	start := time.Now()
	testBroker{cluster: "C", name: "broker-x", addr: "127.0.0.1:10911", id: 0,
		topics: topics(1, tc("ExpiringTopic", 4, 4, 6))}.register(t, c, nsAddr)

	adm := newOfficialAdmin(t, nsAddr)
	if _, err := adm.FetchClusterList("ExpiringTopic"); err != nil && time.Since(start) < 300*time.Millisecond {
		t.Fatalf("route missing before expiry: %v", err)
	}
	testutil.WaitFor(t, 5*time.Second, "broker expiry to remove the route", func() bool {
		_, err := adm.FetchClusterList("ExpiringTopic")
		return errors.Is(err, rmqerrors.ErrTopicNotExist)
	})
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("route removed after %v, before the 300 ms expiry", d)
	}
	if ci := ns.Routes().ClusterInfo(); len(ci.BrokerAddrTable) != 0 {
		t.Fatalf("broker table not empty after expiry: %+v", ci.BrokerAddrTable)
	}
}
