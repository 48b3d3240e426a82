package namesrv

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
)

// TestNamesrvConfigRedactsSecrets: GET_NAMESRV_CONFIG answers anyone, so
// the console's and the cluster account's secret keys are masked.
func TestNamesrvConfigRedactsSecrets(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort, cfg.MetricsPort = "127.0.0.1", 0, -1
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	cfg.ConsoleAccessKey, cfg.ConsoleSecretKey = "console", "console-secret-value"
	cfg.ClusterAuthAccessKey, cfg.ClusterAuthSecretKey = "cluster", "cluster-secret-value"
	n, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := n.getNamesrvConfig(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := string(resp.Body)
	if strings.Contains(body, "secret-value") || !strings.Contains(body, "consoleSecretKey=******") || !strings.Contains(body, "consoleAccessKey=console") {
		t.Errorf("GET_NAMESRV_CONFIG body:\n%s", body)
	}
	if cfg.ConsoleSecretKey = ""; cfg.Validate() == nil {
		t.Error("consoleAccessKey without consoleSecretKey validated")
	}
}

// The console account is an admin account of the brokers, whose ACL
// takes no key of 6 characters or fewer; shorter ones were taken, and
// guarded the console's actions and message bodies with a guessable
// password. They are refused as RocketMQ refuses them.
func TestNamesrvConfigRefusesShortConsoleKeys(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort, cfg.MetricsPort = "127.0.0.1", 0, -1
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	cfg.ConsoleAccessKey, cfg.ConsoleSecretKey = "admin", "admin"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "at least 7 characters") {
		t.Errorf("consoleAccessKey=admin consoleSecretKey=admin: %v, want refused for their length", err)
	}
	cfg.ConsoleAccessKey, cfg.ConsoleSecretKey = "console", "console-secret"
	if err := cfg.Validate(); err != nil {
		t.Errorf("keys of 7 characters and more: %v", err)
	}
	// Keys of a console that is off guard nothing: the name server
	// starts as before the length check.
	cfg.ConsoleEnable = false
	cfg.ConsoleAccessKey, cfg.ConsoleSecretKey = "admin", "admin"
	if err := cfg.Validate(); err != nil {
		t.Errorf("consoleEnable=false with short keys: %v, want accepted", err)
	}
	cfg.ConsoleSecretKey = ""
	if err := cfg.Validate(); err == nil {
		t.Error("consoleEnable=false with consoleAccessKey alone: accepted, want refused as half an account")
	}
}

// TestNamesrvConfigRedactsGossipKey: GET_NAMESRV_CONFIG answers anyone,
// and gossipSecretKey is what keeps strangers out of the gossip pool (a
// member there can declare brokers dead and drop them from the routes),
// so it is masked like the other secrets.
func TestNamesrvConfigRedactsGossipKey(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort, cfg.MetricsPort = "127.0.0.1", 0, -1
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	cfg.Gossip.SecretKey = "Z29zc2lwLXNlY3JldC12YWw=" // base64 of 16 bytes
	n, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := n.getNamesrvConfig(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := string(resp.Body)
	if strings.Contains(body, cfg.Gossip.SecretKey) || !strings.Contains(body, "gossipSecretKey=******") {
		t.Errorf("GET_NAMESRV_CONFIG body:\n%s", body)
	}
}

// TestNamesrvConfigAnswerRoundTrips: GET_NAMESRV_CONFIG is Java properties
// text that mqadmin reads with Properties.load (MixAll.string2Properties):
// a value holding a backslash, '=', ':' and a line break reads back as
// configured.
func TestNamesrvConfigAnswerRoundTrips(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort, cfg.MetricsPort = "127.0.0.1", 0, -1
	cfg.KVConfigPath = filepath.Join(t.TempDir(), `C:\kv=a:b`+"\n"+`c.json`)
	n, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := n.getNamesrvConfig(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := config.ParseProperties(resp.Body)
	if err != nil || kv["kvConfigPath"] != cfg.KVConfigPath || kv["listenAddr"] != "127.0.0.1" {
		t.Fatalf("kvConfigPath %q read back as %q (%v) from:\n%s", cfg.KVConfigPath, kv["kvConfigPath"], err, resp.Body)
	}
}
