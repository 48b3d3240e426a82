package namesrv

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// Every loop (inactive-broker scan, batch unregistration, gossip, the
// monitoring HTTP server) stops when Run's context ends, and none
// outlives Run's return.
func TestRunLeavesNoGoroutine(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.MetricsPort = testutil.FreePort(t)
	cfg.GossipEnable = true
	cfg.KVConfigPath = t.TempDir() + "/kv.json"
	cfg.ScanNotActiveBrokerInterval = 10 * time.Millisecond
	n, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	c := testClient(t)
	// The remoting port answers before Start has finished starting gossip;
	// the serving state is stored last, so reading it orders every field
	// Start wrote before the checks below.
	testutil.WaitFor(t, 5*time.Second, "name server to serve", func() bool {
		return n.monState.Load() == 1
	})
	resp, err := c.InvokeSync(context.Background(), cfg.Addr(), remoting.NewRequest(remoting.RequestGetAllTopicListFromNameserver, nil, nil))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("a serving name server did not answer: %v %+v", err, resp)
	}
	if n.MetricsAddr() == "" || n.Gossip() == nil {
		t.Fatalf("monitor %q, gossip %v: want both running", n.MetricsAddr(), n.Gossip())
	}
	_ = c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	goleak.VerifyNone(t, before)
	if err := n.Close(); err != nil {
		t.Fatalf("Close after Run: %v", err)
	}
}

// A Start that fails part-way (the remoting port is taken, the monitor
// already listens) stops what it had started.
func TestFailedStartLeavesNoGoroutine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1"
	cfg.ListenPort = ln.Addr().(*net.TCPAddr).Port
	cfg.MetricsPort = testutil.FreePort(t)
	cfg.KVConfigPath = t.TempDir() + "/kv.json"
	n, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	if err := n.Run(context.Background()); err == nil {
		t.Fatal("Run on a taken port succeeded")
	}
	goleak.VerifyNone(t, before)
}

// Run on a server that is already started reports ErrAlreadyStarted and
// leaves the running server serving.
func TestRunOnStartedServerKeepsItRunning(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.MetricsPort = -1
	cfg.KVConfigPath = t.TempDir() + "/kv.json"
	n, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Run(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("Run on a started server: %v, want ErrAlreadyStarted", err)
	}
	c := testClient(t)
	defer c.Close()
	resp, err := c.InvokeSync(context.Background(), cfg.Addr(), remoting.NewRequest(remoting.RequestGetAllTopicListFromNameserver, nil, nil))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("the started server stopped answering after Run: %v %+v", err, resp)
	}
}
