package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// startEnforcingNameServer starts a name server in tlsServerMode=enforcing
// with a certificate of a fresh test CA.
func startEnforcingNameServer(t *testing.T) (*namesrv.NameServer, *testutil.TestCA) {
	t.Helper()
	ca := testutil.NewTestCA(t, "rmq")
	files := ca.Issue("namesrv")
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort, cfg.MetricsPort = "127.0.0.1", testutil.FreePort(t), -1
	cfg.KVConfigPath = t.TempDir() + "/kv.json"
	cfg.TLS = remoting.TLSConfig{ServerMode: "enforcing", ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath}
	ns, err := namesrv.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ns.Shutdown(ctx)
	})
	return ns, ca
}

// TestAdminTLSFlags: admin reaches a name server in enforcing mode with
// --tls (unverified) and --tls-trust-cert (verified), and fails without
// TLS or when the certificate does not chain to the given CA.
func TestAdminTLSFlags(t *testing.T) {
	ns, ca := startEnforcingNameServer(t)
	n := []string{"-n", ns.Addr().String(), "--timeout", "2s", "clusterList"}
	mustAdmin(t, append(n, "--tls")...)
	mustAdmin(t, append(n, "--tls-trust-cert", ca.CertPath)...)
	if out, err := runAdmin(t, n...); err == nil {
		t.Fatalf("plaintext admin against enforcing succeeded: %s", out)
	}
	other := testutil.NewTestCA(t, "other")
	if out, err := runAdmin(t, append(n, "--tls-trust-cert", other.CertPath)...); err == nil {
		t.Fatalf("admin trusting another CA succeeded: %s", out)
	}
}
