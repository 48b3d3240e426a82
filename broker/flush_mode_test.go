package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/testutil"
)

// TestFlushModeConfig: SYNC_FLUSH is the default; ASYNC_FLUSH, what stock
// RocketMQ confs say, is refused under Raft unless raftAcksBeforeFsync
// confirms it, and the confirmation without ASYNC_FLUSH is refused too.
// Both errors name the key at fault.
func TestFlushModeConfig(t *testing.T) {
	load := func(kv map[string]string) (BrokerConfig, error) {
		cfg := DefaultConfig()
		cfg.Raft.DLegerGroup, cfg.Raft.DLegerSelfID, cfg.Raft.DLegerPeers = "broker-a", "n0", "n0-127.0.0.1:40911"
		if err := config.Apply(kv, "broker.conf", &cfg); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Derive(); err != nil {
			t.Fatal(err)
		}
		return cfg, cfg.Validate()
	}
	cfg, err := load(nil)
	if err != nil || cfg.Store.FlushDiskType != store.SyncFlush || cfg.AcksBeforeFsync() {
		t.Fatalf("default: %s, acks before fsync %v, %v", cfg.Store.FlushDiskType, cfg.AcksBeforeFsync(), err)
	}
	for _, c := range []struct {
		kv      map[string]string
		wantKey string // "" = valid
		acks    bool
	}{
		{map[string]string{"flushDiskType": "SYNC_FLUSH"}, "", false},
		{map[string]string{"flushDiskType": "ASYNC_FLUSH"}, "flushDiskType", false},
		{map[string]string{"flushDiskType": "ASYNC_FLUSH", "raftAcksBeforeFsync": "false"}, "flushDiskType", false},
		{map[string]string{"flushDiskType": "ASYNC_FLUSH", "raftAcksBeforeFsync": "true"}, "", true},
		{map[string]string{"raftAcksBeforeFsync": "true"}, "raftAcksBeforeFsync", false},
		{map[string]string{"shutdownTransferTimeout": "-1"}, "shutdownTransferTimeout", false},
		{map[string]string{"shutdownTransferTimeout": "0"}, "", false},
	} {
		cfg, err := load(c.kv)
		if c.wantKey == "" {
			if err != nil || cfg.AcksBeforeFsync() != c.acks {
				t.Errorf("%v: %v, acks before fsync %v", c.kv, err, cfg.AcksBeforeFsync())
			}
			continue
		}
		if !errors.Is(err, ErrInvalidGroupConfig) || !strings.Contains(err.Error(), c.wantKey) {
			t.Errorf("%v: %v, want ErrInvalidGroupConfig naming %s", c.kv, err, c.wantKey)
		}
	}
	if cfg, _ := load(map[string]string{"shutdownTransferTimeout": "1500"}); cfg.ShutdownTransferTimeout != 1500*time.Millisecond {
		t.Errorf("shutdownTransferTimeout=1500 loaded as %v, want 1.5s (bare integers are ms)", cfg.ShutdownTransferTimeout)
	}
}

// TestRaftStatusReportsFlushMode: RAFT_STATUS says whether the member
// acknowledges before fsync (the group harness runs ASYNC_FLUSH with the
// confirmation unless asked for SYNC_FLUSH).
func TestRaftStatusReportsFlushMode(t *testing.T) {
	for _, sync := range []bool{false, true} {
		c := newTestCluster(t, clusterOpts{sync: sync})
		st, err := collectRaftStatus(c.leader().g(), true)
		if err != nil {
			t.Fatal(err)
		}
		if st.AcksBeforeFsync == sync {
			t.Fatalf("SYNC_FLUSH %v: raft status acksBeforeFsync %v", sync, st.AcksBeforeFsync)
		}
	}
}

// TestFlushModeMetric: raftmq_broker_acks_before_fsync is 1 in the acks
// before fsync mode and 0 under SYNC_FLUSH, on the node's /metrics.
func TestFlushModeMetric(t *testing.T) {
	for _, async := range []bool{false, true} {
		pc := startRealCluster(t, func(c *BrokerConfig) {
			c.MetricsPort = testutil.FreePort(t)
			if async {
				c.Store.FlushDiskType, c.RaftAcksBeforeFsync = store.AsyncFlush, true
			}
		})
		l := pc.leader()
		v, ok := metricValue(scrape(t, pc.nodes[l].MetricsAddr()), "raftmq_broker_acks_before_fsync")
		if !ok || v != b2f(async) {
			t.Fatalf("ASYNC_FLUSH %v: raftmq_broker_acks_before_fsync = %v (present %v)", async, v, ok)
		}
		if st := pc.raftStatusOf(l); st.AcksBeforeFsync != async {
			t.Fatalf("ASYNC_FLUSH %v: RAFT_STATUS acksBeforeFsync %v", async, st.AcksBeforeFsync)
		}
	}
}
