package console

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
)

// A page of another site could drive the console from a visitor's
// browser by rebinding its DNS name to the console's address: the console
// answered whatever Host the request named, so the page read the cluster
// map and, once the visitor had signed in there, posted actions as a
// same-origin page. A Host that does not name the console is now refused
// on every path, over the name server's real monitoring port.
func TestForeignHostRefused(t *testing.T) {
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.MetricsPort, cfg.MetricsBindAddr = testutil.FreePort(t), "127.0.0.1"
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	ns, err := namesrv.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	c, err := New(ns, Options{AccessKey: "console-ak", SecretKey: "console-sk", AllowedHosts: []string{"Console.Example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mount(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + ns.MetricsAddr()
	do := func(method, path, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(`{"dryRun":true}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("console-ak", "console-sk")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	port := ns.MetricsAddr()[strings.LastIndex(ns.MetricsAddr(), ":"):]
	for _, host := range []string{"rebind.attacker.example" + port, "rebind.attacker.example", "localhost.attacker.example" + port} {
		for _, p := range []struct{ method, path string }{{"GET", "/api/cluster"}, {"GET", "/console/"}, {"GET", "/api/auth"},
			{"POST", "/api/raft/balance"}, {"GET", "/"}} {
			code, body := do(p.method, p.path, host)
			var e apiError
			if code != http.StatusForbidden || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, "consoleAllowedHosts") {
				t.Errorf("%s %s with Host %s: %d %q, want 403 naming consoleAllowedHosts", p.method, p.path, host, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST." + port, "[::1]" + port, "10.1.2.3" + port,
		"console.example.org" + port, "console.example.org"} {
		if code, body := do("GET", "/api/auth", host); code != http.StatusOK {
			t.Errorf("GET /api/auth with Host %s: %d %s, want 200", host, code, body)
		}
	}
	// /metrics is not the console's: left as it was.
	if code, _ := do("GET", "/metrics", "rebind.attacker.example"+port); code != http.StatusOK {
		t.Errorf("/metrics: %d", code)
	}
}

// consoleAllowedHosts=* answers any Host.
func TestAnyHostAllowedByStar(t *testing.T) {
	ns := startNamesrv(t)
	c, err := New(ns, Options{AllowedHosts: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.hostAllowed("anything.example:80") {
		t.Error("* did not allow a name")
	}
}
