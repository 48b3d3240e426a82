package namesrv

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// testServer starts a name server on a free loopback port with a KV file in
// a temp dir; mutate adjusts the config first.
func testServer(t *testing.T, mutate func(*Config)) *NameServer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	cfg.DefaultThreadPoolNums = 2
	cfg.ClientRequestThreadPoolNums = 2
	if mutate != nil {
		mutate(&cfg)
	}
	return startServer(t, cfg)
}

func startServer(t *testing.T, cfg Config) *NameServer {
	t.Helper()
	n, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("new name server: %v", err)
	}
	if err := n.Start(); err != nil {
		t.Fatalf("start name server: %v", err)
	}
	t.Cleanup(func() { stopServer(t, n) })
	return n
}

func stopServer(t *testing.T, n *NameServer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func testLogger(t *testing.T) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

func testClient(t *testing.T) *remoting.Client {
	t.Helper()
	c := remoting.NewClient(remoting.ClientConfig{DefaultTimeout: 5 * time.Second}, zap.NewNop())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// call sends req and fails the test on transport errors.
func call(t *testing.T, c *remoting.Client, addr string, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	t.Helper()
	resp, err := c.InvokeSync(context.Background(), addr, req)
	if err != nil {
		t.Fatalf("invoke code %d: %v", req.Code, err)
	}
	return resp
}

// testBroker describes one registering broker.
type testBroker struct {
	cluster, name, addr string
	id                  int64
	topics              wire.TopicConfigSerializeWrapper
	compressed          bool
}

// register sends REGISTER_BROKER the way a broker does and expects SUCCESS.
func (b testBroker) register(t *testing.T, c *remoting.Client, nsAddr string) *remoting.RemotingCommand {
	t.Helper()
	body, err := wire.EncodeRegisterBrokerBody(&wire.RegisterBrokerBody{TopicConfigSerializeWrapper: b.topics, FilterServerList: []string{}}, b.compressed)
	if err != nil {
		t.Fatal(err)
	}
	h := &wire.RegisterBrokerRequestHeader{
		BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster, HAServerAddr: b.addr + "-ha",
		BrokerID: b.id, Compressed: b.compressed, BodyCrc32: int32(wire.BodyCRC32(body)),
	}
	resp := call(t, c, nsAddr, remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("register %s/%d: code %d %s", b.name, b.id, resp.Code, resp.Remark)
	}
	return resp
}

// routeOf asks for a route with the given request version and flag.
func routeOf(t *testing.T, c *remoting.Client, nsAddr, topic string, version int16, standardOnly bool) *remoting.RemotingCommand {
	t.Helper()
	req := remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, &wire.GetRouteInfoRequestHeader{Topic: topic, AcceptStandardJsonOnly: standardOnly}, nil)
	req.Version = version
	return call(t, c, nsAddr, req)
}
