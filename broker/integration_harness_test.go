package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// procCluster is a name server plus brokers on loopback for tests.
type procCluster struct {
	t      *testing.T
	ns     *namesrv.NameServer
	nsAddr string
	nodes  []*Controller
	client *remoting.Client
}

// startProcNameServer starts a real name server on a free loopback port.
func startProcNameServer(t *testing.T) (*namesrv.NameServer, string) {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.KVConfigPath = t.TempDir() + "/kv.json"
	n, err := namesrv.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return n, n.Addr().String()
}

// testBrokerConfig is a broker config for loopback tests: short timers,
// a short custom delay table ("1s" levels would make tests slow).
func testBrokerConfig(t *testing.T, nsAddr string, port int) BrokerConfig {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.BrokerIP1, cfg.ListenPort = "127.0.0.1", "127.0.0.1", port
	cfg.VipChannelEnabled = false
	cfg.NamesrvAddr = nsAddr
	cfg.MessageDelayLevel = "200ms 300ms 400ms 500ms 600ms 700ms 800ms 900ms 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
	cfg.PullHoldCheckInterval = 200 * time.Millisecond
	cfg.ScheduleMessageCheckInterval = 50 * time.Millisecond
	cfg.TopicChangeCheckInterval = 50 * time.Millisecond
	cfg.ConsumerOffsetCommitCoalescer = 20 * time.Millisecond
	cfg.SendMessageThreadPoolNums, cfg.PullMessageThreadPoolNums = 8, 8
	cfg.Store.MaxMessageSize = 1 << 20
	cfg.RaftBatchMaxBytes = 1 << 20
	return cfg
}

// startFakeProc starts one broker over a fakeReplica.
func startFakeProc(t *testing.T, mutate func(*BrokerConfig)) (*procCluster, *fakeReplica) {
	t.Helper()
	ns, nsAddr := startProcNameServer(t)
	port := testutil.FreePort(t)
	cfg := testBrokerConfig(t, nsAddr, port)
	if mutate != nil {
		mutate(&cfg)
	}
	rep := newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port))
	c, err := New(cfg, rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	tc := &procCluster{t: t, ns: ns, nsAddr: nsAddr, nodes: []*Controller{c},
		client: remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())}
	t.Cleanup(func() {
		_ = tc.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return tc, rep
}

// call sends a request to a node and returns the response.
func (tc *procCluster) call(addr string, code int16, ext map[string]string, body []byte) *remoting.RemotingCommand {
	tc.t.Helper()
	req := remoting.NewRequest(code, nil, body)
	for k, v := range ext {
		req.ExtFields[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tc.client.InvokeSync(ctx, addr, req)
	if err != nil {
		tc.t.Fatalf("call code %d to %s: %v", code, addr, err)
	}
	return resp
}

// createTopic creates a topic through UPDATE_AND_CREATE_TOPIC on addr and
// waits until the name server routes it.
func (tc *procCluster) createTopic(addr, topic string, queues int) {
	tc.t.Helper()
	resp := tc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": TopicAutoCreate, "readQueueNums": strconv.Itoa(queues),
		"writeQueueNums": strconv.Itoa(queues), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil)
	if resp.Code != remoting.ResponseSuccess {
		tc.t.Fatalf("create topic %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	tc.waitRoute(topic)
}

func (tc *procCluster) waitRoute(topic string) {
	tc.t.Helper()
	testutil.WaitFor(tc.t, 10*time.Second, "name server routes "+topic, func() bool {
		rd := tc.ns.Routes().PickupTopicRouteData(topic)
		if rd == nil {
			return false
		}
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerAddrs[0] != "" {
				return true
			}
		}
		return false
	})
}

// sendExt is the SEND_MESSAGE header of a plain message.
func sendExt(topic string, queueID int, props string) map[string]string {
	return map[string]string{
		"producerGroup": "PG", "topic": topic, "defaultTopic": TopicAutoCreate, "defaultTopicQueueNums": "4",
		"queueId": strconv.Itoa(queueID), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}
}

func pullExt(group, topic string, queueID int, offset int64, suspendMillis int64) map[string]string {
	sys := "0"
	if suspendMillis > 0 {
		sys = "2"
	}
	return map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queueID), "queueOffset": strconv.FormatInt(offset, 10),
		"maxMsgNums": "32", "sysFlag": sys, "commitOffset": "0", "suspendTimeoutMillis": strconv.FormatInt(suspendMillis, 10),
		"subVersion": "0",
	}
}
