package broker

import (
	"context"
	"net"
	"strconv"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
)

// A Start that fails after the monitor listens (the remoting port is
// taken) stops the monitor again: no listener or goroutine is left, and
// the metrics port can be bound once more.
func TestFailedStartStopsMonitor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	cfg := testBrokerConfig(t, "127.0.0.1:1", port)
	cfg.MetricsPort = testutil.FreePort(t)
	rep := newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port))
	c, err := New(cfg, rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Shutdown(context.Background()) }()
	before := goleak.IgnoreCurrent()
	if err := c.Start(); err == nil {
		t.Fatal("Start on a taken port succeeded")
	}
	goleak.VerifyNone(t, before)
	mon, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(cfg.MetricsPort))
	if err != nil {
		t.Fatalf("metrics port still held after a failed Start: %v", err)
	}
	mon.Close()
}
