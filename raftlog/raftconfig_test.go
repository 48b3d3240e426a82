package raftlog

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/config"
)

const testPeers = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"

func TestDefaultConfigValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if c.TrailingLogs != math.MaxUint64 {
		t.Fatal("TrailingLogs must default to never compacting")
	}
	if c.HeartbeatTimeout > 500*time.Millisecond || c.ElectionTimeout > 500*time.Millisecond {
		t.Fatalf("timeouts not LAN-tuned: %v %v", c.HeartbeatTimeout, c.ElectionTimeout)
	}
}

func TestConfigFromProperties(t *testing.T) {
	c := DefaultConfig()
	err := config.Apply(map[string]string{
		"enableDLegerCommitLog": "true",
		"dLegerGroup":           "broker-a",
		"dLegerPeers":           testPeers,
		"dLegerSelfId":          "n1",
		"preferredLeaderId":     "n0",
		"raftHeartbeatTimeout":  "400",
		"raftElectionTimeout":   "500ms",
		"raftSnapshotThreshold": "100",
	}, "broker.conf", &c)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.HeartbeatTimeout != 400*time.Millisecond || c.ElectionTimeout != 500*time.Millisecond || c.SnapshotThreshold != 100 {
		t.Fatalf("keys not applied: %+v", c)
	}
	addr, err := c.SelfAddr()
	if err != nil || addr != "127.0.0.1:40912" {
		t.Fatalf("SelfAddr = %q, %v", addr, err)
	}
	conf, err := c.Configuration()
	if err != nil || len(conf.Servers) != 3 || conf.Servers[2].ID != "n2" || conf.Servers[2].Address != "127.0.0.1:40913" ||
		conf.Servers[0].Suffrage != raft.Voter {
		t.Fatalf("Configuration = %+v, %v", conf, err)
	}
	rc, err := c.RaftConfig(nil)
	if err != nil || rc.LocalID != "n1" || rc.HeartbeatTimeout != 400*time.Millisecond || rc.TrailingLogs != math.MaxUint64 {
		t.Fatalf("RaftConfig = %+v, %v", rc, err)
	}
}

func TestConfigInvalid(t *testing.T) {
	base := DefaultConfig()
	base.EnableDLegerCommitLog = true
	base.DLegerGroup = "g"
	base.DLegerPeers = testPeers
	base.DLegerSelfID = "n0"
	cases := map[string]func(c *Config){
		"self not a peer":       func(c *Config) { c.DLegerSelfID = "n9" },
		"preferred not a peer":  func(c *Config) { c.PreferredLeaderID = "x" },
		"empty peers":           func(c *Config) { c.DLegerPeers = " ; " },
		"no dash":               func(c *Config) { c.DLegerPeers = "n0127.0.0.1:1" },
		"no port":               func(c *Config) { c.DLegerPeers = "n0-127.0.0.1" },
		"bad port":              func(c *Config) { c.DLegerPeers = "n0-127.0.0.1:99999" },
		"duplicate id":          func(c *Config) { c.DLegerPeers = "n0-127.0.0.1:1;n0-127.0.0.1:2" },
		"duplicate addr":        func(c *Config) { c.DLegerPeers = "n0-127.0.0.1:1;n1-127.0.0.1:1" },
		"no group":              func(c *Config) { c.DLegerGroup = "" },
		"small trailing logs":   func(c *Config) { c.TrailingLogs = 10240 },
		"lease above heartbeat": func(c *Config) { c.LeaderLeaseTimeout = time.Second },
		"election below hb":     func(c *Config) { c.ElectionTimeout = 100 * time.Millisecond },
		"too many entries":      func(c *Config) { c.MaxAppendEntries = 5000 },
		"no retain":             func(c *Config) { c.SnapshotRetain = 0 },
	}
	if err := base.Validate(); err != nil {
		t.Fatalf("base invalid: %v", err)
	}
	for name, mut := range cases {
		c := base
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
	}
}
