package namesrv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/config"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	d := DefaultConfig()
	if d.ListenPort != 9876 || d.ScanNotActiveBrokerInterval != 5*time.Second || d.BrokerChannelExpiredTime != 120*time.Second ||
		!strings.HasSuffix(d.KVConfigPath, filepath.Join("namesrv", "kvConfig.json")) {
		t.Fatalf("defaults %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"listenPort":                  func(c *Config) { c.ListenPort = 70000 },
		"kvConfigPath":                func(c *Config) { c.KVConfigPath = "" },
		"scanNotActiveBrokerInterval": func(c *Config) { c.ScanNotActiveBrokerInterval = 0 },
		"brokerChannelExpiredTime":    func(c *Config) { c.BrokerChannelExpiredTime = -1 },
		"kvConfigMaxEntries":          func(c *Config) { c.KVConfigMaxEntries = 0 },
		"kvConfigMaxNamespaceLength":  func(c *Config) { c.KVConfigMaxNamespaceLength = -1 },
		"kvConfigMaxKeyLength":        func(c *Config) { c.KVConfigMaxKeyLength = 0 },
		"kvConfigMaxValueLength":      func(c *Config) { c.KVConfigMaxValueLength = 0 },
	} {
		c := DefaultConfig()
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: want ErrInvalidConfig naming the key, got %v", name, err)
		}
	}
}

func TestConfigLoadsRocketMQKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "namesrv.conf")
	conf := "listenPort=9877\nscanNotActiveBrokerInterval=50\nbrokerChannelExpiredTime=300\nkvConfigPath=/tmp/x.json\norderMessageEnable=true\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	if err := config.LoadFile(path, &c); err != nil {
		t.Fatal(err)
	}
	if c.ListenPort != 9877 || c.ScanNotActiveBrokerInterval != 50*time.Millisecond ||
		c.BrokerChannelExpiredTime != 300*time.Millisecond || c.KVConfigPath != "/tmp/x.json" || !c.OrderMessageEnable {
		t.Fatalf("loaded %+v", c)
	}
}
