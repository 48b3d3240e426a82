package broker

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestOpenGroupFailureCleansUp: a member whose Raft port is taken fails to
// start with an error naming the port (the cleanup must not run on the
// nil result), and the parts it had opened are closed, so the same data
// directory opens once the port is free.
func TestOpenGroupFailureCleansUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := ln.Addr().String()
	cfg := DefaultGroupConfig()
	cfg.Store.StorePathRootDir = filepath.Join(t.TempDir(), "n0")
	cfg.Store.MappedFileSizeCommitLog = 1 << 20
	cfg.Store.MaxMessageSize = 128 << 10
	cfg.Store.MessageIndexEnable = false
	cfg.Raft.DLegerGroup = "broker-a"
	cfg.Raft.DLegerPeers = "n0-" + raftAddr
	cfg.Raft.DLegerSelfID = "n0"
	remoting := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))

	g, err := OpenGroup(cfg, remoting, nil)
	if err == nil {
		g.Close()
		t.Fatal("OpenGroup succeeded on a taken Raft port")
	}
	if g != nil {
		t.Fatalf("OpenGroup returned a group with its error %v", err)
	}
	if !strings.Contains(err.Error(), raftAddr) {
		t.Fatalf("error %q does not name the Raft address %s", err, raftAddr)
	}

	ln.Close()
	g, err = OpenGroup(cfg, remoting, nil)
	if err != nil {
		t.Fatalf("reopen after the port was freed: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}
