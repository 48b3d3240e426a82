package ha

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/config"
)

func TestDefaultGossipConfigIsLANTuned(t *testing.T) {
	c := DefaultGossipConfig()
	if err := c.Validate(); !errors.Is(err, ErrInvalidGossipConfig) || !strings.Contains(err.Error(), "gossipNodeName") {
		t.Fatalf("default config without a name: want an error naming gossipNodeName, got %v", err)
	}
	c.Name = "n0"
	if err := c.Validate(); err != nil {
		t.Fatalf("default config with a name: %v", err)
	}
	if c.ProbeInterval != 200*time.Millisecond || c.ProbeTimeout != 100*time.Millisecond ||
		c.SuspicionMult != 2 || c.GossipInterval != 100*time.Millisecond {
		t.Fatalf("timing not LAN-tuned: %+v", c)
	}
	ml := c.memberlistConfig()
	if ml.Name != "n0" || ml.ProbeInterval != c.ProbeInterval || ml.ProbeTimeout != c.ProbeTimeout ||
		ml.SuspicionMult != 2 || ml.GossipInterval != c.GossipInterval || ml.BindPort != DefaultGossipPort ||
		ml.AdvertisePort != DefaultGossipPort || ml.DeadNodeReclaimTime != time.Second {
		t.Fatalf("memberlist config does not carry the settings: %+v", ml)
	}
}

func TestGossipConfigFromProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.conf")
	conf := `gossipNodeName=broker-a-n1
gossipBindAddr=127.0.0.1
gossipBindPort=10923
gossipSeeds=127.0.0.1:10913;127.0.0.1:10933
gossipProbeIntervalMs=500
gossipProbeTimeoutMs=250
gossipSuspicionMult=4
gossipIntervalMs=150
gossipRetransmitMult=3
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c := DefaultGossipConfig()
	if err := config.LoadFile(path, &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Name != "broker-a-n1" || c.BindPort != 10923 || c.ProbeInterval != 500*time.Millisecond ||
		c.ProbeTimeout != 250*time.Millisecond || c.SuspicionMult != 4 || c.GossipInterval != 150*time.Millisecond ||
		c.RetransmitMult != 3 {
		t.Fatalf("loaded %+v", c)
	}
	if got := c.SeedAddrs(); len(got) != 2 || got[0] != "127.0.0.1:10913" || got[1] != "127.0.0.1:10933" {
		t.Fatalf("seeds %q", got)
	}
}

func TestGossipConfigValidate(t *testing.T) {
	cases := map[string]func(*GossipConfig){
		"gossipBindAddr":                func(c *GossipConfig) { c.BindAddr = "localhost" },
		"gossipAdvertiseAddr":           func(c *GossipConfig) { c.AdvertiseAddr = "host" },
		"gossipBindPort":                func(c *GossipConfig) { c.BindPort = 70000 },
		"gossipAdvertisePort":           func(c *GossipConfig) { c.AdvertisePort = -1 },
		"gossipSeeds":                   func(c *GossipConfig) { c.Seeds = "127.0.0.1:1,nohostport" },
		"gossipLabel":                   func(c *GossipConfig) { c.Label = strings.Repeat("l", 300) },
		"gossipProbeIntervalMs":         func(c *GossipConfig) { c.ProbeInterval = 0 },
		"gossipProbeTimeoutMs":          func(c *GossipConfig) { c.ProbeTimeout = c.ProbeInterval },
		"gossipSuspicionMult":           func(c *GossipConfig) { c.SuspicionMult = 0 },
		"gossipRetransmitMult":          func(c *GossipConfig) { c.RetransmitMult = 0 },
		"gossipIndirectChecks":          func(c *GossipConfig) { c.IndirectChecks = -1 },
		"gossipDeadNodeReclaimTimeMs":   func(c *GossipConfig) { c.DeadNodeReclaimTime = -time.Second },
		"gossipLeaveTimeoutMs":          func(c *GossipConfig) { c.LeaveTimeout = 0 },
		"gossipSuspicionMaxTimeoutMult": func(c *GossipConfig) { c.SuspicionMaxTimeoutMult = 0 },
	}
	for key, mutate := range cases {
		c := DefaultGossipConfig()
		c.Name = "n0"
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidGossipConfig) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: want an ErrInvalidGossipConfig naming the key, got %v", key, err)
		}
	}
}
