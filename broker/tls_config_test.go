package broker

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// TestSecurityKeysLoad: the TLS, Raft TLS, gossip key and monitoring keys
// load from broker.conf and (the ones it has) namesrv.conf.
func TestSecurityKeysLoad(t *testing.T) {
	kv := map[string]string{
		"tlsServerMode": "enforcing", "tlsServerCertPath": "c.pem", "tlsServerKeyPath": "k.pem",
		"tlsServerNeedClientAuth": "require", "tlsServerAuthClient": "true", "tlsServerTrustCertPath": "ca.pem",
		"tlsEnable": "true", "tlsClientTrustCertPath": "ca.pem", "tlsClientCertPath": "cc.pem", "tlsClientKeyPath": "ck.pem",
		"gossipSecretKey": "a2V5a2V5a2V5a2V5a2V5aw==",
	}
	b := DefaultConfig()
	bkv := map[string]string{"raftTlsCertPath": "n0.pem", "raftTlsKeyPath": "n0-key.pem", "raftTlsCaPath": "ca.pem",
		"metricsBindAddr": "0.0.0.0", "pprofEnable": "true"}
	for k, v := range kv {
		bkv[k] = v
	}
	if err := config.Apply(bkv, "broker.conf", &b); err != nil {
		t.Fatal(err)
	}
	if b.TLS.ServerMode != "enforcing" || !b.TLS.ServerAuthClient || b.TLS.ClientKeyPath != "ck.pem" ||
		b.RaftTLS.CAPath != "ca.pem" || b.Gossip.SecretKey == "" || b.MetricsBindAddr != "0.0.0.0" || !b.PprofEnable {
		t.Fatalf("broker keys not applied: %+v %+v", b.TLS, b.RaftTLS)
	}
	n := namesrv.DefaultConfig()
	nkv := map[string]string{"metricsBindAddr": "0.0.0.0", "pprofEnable": "true"}
	for k, v := range kv {
		nkv[k] = v
	}
	if err := config.Apply(nkv, "namesrv.conf", &n); err != nil {
		t.Fatal(err)
	}
	if n.TLS.ServerCertPath != "c.pem" || n.Gossip.SecretKey == "" || !n.PprofEnable {
		t.Fatalf("namesrv keys not applied: %+v", n.TLS)
	}
}

// TestMonitorLocalWithoutPprofByDefault: with the remoting listeners on
// every interface the monitor still binds 127.0.0.1, and /debug/pprof/ is
// not served unless pprofEnable.
func TestMonitorLocalWithoutPprofByDefault(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.ListenAddr, c.MetricsPort = "0.0.0.0", testutil.FreePort(t)
	})
	addr := tc.nodes[0].MetricsAddr()
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("monitor bound to %s, want 127.0.0.1", addr)
	}
	for path, want := range map[string]int{"/metrics": http.StatusOK, "/debug/pprof/": http.StatusNotFound,
		"/debug/pprof/cmdline": http.StatusNotFound} {
		resp, err := monClient.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: HTTP %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestTLSKeysWithoutSwitchRefused: certificate keys whose switch is off
// (tlsServerMode left at its default, disabled; tlsEnable false) stop the
// broker and the name server from starting, instead of leaving their
// connections plaintext.
func TestTLSKeysWithoutSwitchRefused(t *testing.T) {
	ca := testutil.NewTestCA(t, "rmq")
	files := ca.Issue("127.0.0.1")
	for name, set := range map[string]func(*remoting.TLSConfig){
		"listener certificate, no tlsServerMode": func(c *remoting.TLSConfig) {
			c.ServerCertPath, c.ServerKeyPath = files.CertPath, files.KeyPath
		},
		"name server trust path, no tlsEnable": func(c *remoting.TLSConfig) { c.ClientTrustCertPath = ca.CertPath },
	} {
		cfg := testBrokerConfig(t, "127.0.0.1:1", testutil.FreePort(t))
		set(&cfg.TLS)
		if _, err := New(cfg, newFakeReplica(t, cfg.RemotingAddr()), nil); !errors.Is(err, ErrInvalidBrokerConfig) || !strings.Contains(err.Error(), "plaintext") {
			t.Errorf("broker with %s: %v, want ErrInvalidBrokerConfig saying it would be plaintext", name, err)
		}
	}
	ncfg := namesrv.DefaultConfig()
	ncfg.TLS.ServerCertPath, ncfg.TLS.ServerKeyPath = files.CertPath, files.KeyPath
	if _, err := namesrv.New(ncfg, nil); !errors.Is(err, namesrv.ErrInvalidConfig) || !strings.Contains(err.Error(), "plaintext") {
		t.Errorf("name server with a listener certificate and no tlsServerMode: %v", err)
	}
}

// TestEnforcingMemberWithoutTLSClientRefused: a member of a several-member
// group whose listeners enforce TLS must call the other members over TLS
// too (they enforce it as well): without tlsEnable its status probes and
// /readyz's catch-up check would fail for good, so it refuses to start. A
// single-member group calls no peer and starts.
func TestEnforcingMemberWithoutTLSClientRefused(t *testing.T) {
	ca := testutil.NewTestCA(t, "rmq")
	files := ca.Issue("127.0.0.1")
	for _, c := range []struct {
		name, peers string
		client      bool
		refused     bool
	}{
		{"three members, no tlsEnable", "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913", false, true},
		{"three members, tlsEnable", "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913", true, false},
		{"one member, no tlsEnable", "n0-127.0.0.1:40911", false, false},
	} {
		cfg := testBrokerConfig(t, "127.0.0.1:1", testutil.FreePort(t))
		cfg.Raft.DLegerSelfID, cfg.Raft.DLegerPeers = "n0", c.peers
		cfg.TLS.ServerMode, cfg.TLS.ServerCertPath, cfg.TLS.ServerKeyPath = "enforcing", files.CertPath, files.KeyPath
		if c.client {
			cfg.TLS.ClientEnable, cfg.TLS.ClientTrustCertPath = true, ca.CertPath
		}
		err := cfg.Validate()
		if refused := errors.Is(err, ErrInvalidBrokerConfig) && strings.Contains(err.Error(), "tlsEnable: is false while tlsServerMode=enforcing"); refused != c.refused {
			t.Errorf("%s: Validate() = %v, want refused %v", c.name, err, c.refused)
		}
	}
}
