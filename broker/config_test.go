package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/config"
)

// TestDeployConfsLoad: the example confs in deploy/ load, validate and
// map each member to its follower brokerId (dLegerPeers index + 1).
func TestDeployConfsLoad(t *testing.T) {
	for i, want := range []int64{1, 2, 3} {
		cfg := DefaultConfig()
		path := "../deploy/broker-n" + string(rune('0'+i)) + ".conf"
		if err := config.LoadFile(path, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Derive(); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got := cfg.FollowerBrokerID(); got != want {
			t.Fatalf("%s: follower brokerId %d, want %d", path, got, want)
		}
		if cfg.Store.StoreHost.String() != cfg.RemotingAddr() {
			t.Fatalf("%s: store host %v, want the remoting address %s", path, cfg.Store.StoreHost, cfg.RemotingAddr())
		}
	}
}

func TestDelayLevels(t *testing.T) {
	got, err := parseDelayLevels("1s 5s 1m 2h 1d 250ms 0s")
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Second, 5 * time.Second, time.Minute, 2 * time.Hour, 24 * time.Hour, 250 * time.Millisecond, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("level %d = %v, want %v", i+1, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "5x", "s", "-1s", "1.5s"} {
		if _, err := parseDelayLevels(bad); !errors.Is(err, ErrInvalidBrokerConfig) {
			t.Fatalf("%q: got %v, want ErrInvalidBrokerConfig", bad, err)
		}
	}
	if len(mustDefault(t)) != 18 {
		t.Fatal("RocketMQ's default table has 18 levels")
	}
}

func mustDefault(t *testing.T) []time.Duration {
	c := DefaultConfig()
	l, err := c.DelayLevels()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCatchupPaceValidate: the catch-up pace keys are checked at load
// with a message that names the key, not clamped silently.
func TestCatchupPaceValidate(t *testing.T) {
	for _, tc := range []struct {
		max, min int64
		key      string
	}{
		{-1, 0, "raftCatchupBytesPerSecond"},
		{64 << 20, -1, "raftCatchupMinBytesPerSecond"},
		{1 << 20, 2 << 20, ""}, // a maximum below the default floor: the floor is the maximum
		{64 << 20, 2 << 20, ""},
		{0, 2 << 20, ""}, // unpaced: no floor to compare
	} {
		g := DefaultGroupConfig()
		g.CatchupBytesPerSecond, g.CatchupMinBytesPerSecond = tc.max, tc.min
		err := g.Validate()
		switch {
		case tc.key == "" && err != nil && strings.Contains(err.Error(), "raftCatchup"):
			t.Errorf("max %d min %d: %v", tc.max, tc.min, err)
		case tc.key != "" && (err == nil || !strings.Contains(err.Error(), tc.key)):
			t.Errorf("max %d min %d: want an error naming %s, got %v", tc.max, tc.min, tc.key, err)
		}
	}
}

// TestValidateNamesrvAddrAndRegisterTimeout: a namesrvAddr the broker
// could never dial (a port left out, ',' for ';', a port that is not
// one) and a registration timeout that expires at once would start a
// broker that never registers, logging warnings only; they are refused at
// start naming the key.
func TestValidateNamesrvAddrAndRegisterTimeout(t *testing.T) {
	valid := func(mutate func(*BrokerConfig)) error {
		c := DefaultConfig()
		c.Raft.DLegerPeers, c.Raft.DLegerSelfID = "n0-127.0.0.1:40911", "n0"
		mutate(&c)
		if err := c.Derive(); err != nil {
			return err
		}
		return c.Validate()
	}
	for _, addr := range []string{"127.0.0.1", "10.0.0.1:9876,10.0.0.2:9876", "10.0.0.1:abc", "10.0.0.1:0", "10.0.0.1:98760"} {
		err := valid(func(c *BrokerConfig) { c.NamesrvAddr = addr })
		if err == nil || !strings.Contains(err.Error(), "namesrvAddr") {
			t.Errorf("namesrvAddr=%s: %v; want an error naming namesrvAddr", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:9876", "ns1.example.com:9876; ns2.example.com:9876;", "[::1]:9876"} {
		if err := valid(func(c *BrokerConfig) { c.NamesrvAddr = addr }); err != nil {
			t.Errorf("namesrvAddr=%s: %v", addr, err)
		}
	}
	for _, d := range []time.Duration{0, -time.Millisecond} {
		err := valid(func(c *BrokerConfig) { c.RegisterBrokerTimeoutMills = d })
		if err == nil || !strings.Contains(err.Error(), "registerBrokerTimeoutMills") {
			t.Errorf("registerBrokerTimeoutMills=%v: %v; want an error naming the key", d, err)
		}
	}
}
