package namesrv

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
)

// TestRocketMQKeysClassified: every key of RocketMQ 4.9.8's NamesrvConfig
// and NettyServerConfig is used or ignored with a reason.
func TestRocketMQKeysClassified(t *testing.T) {
	var cfg Config
	fields, err := config.Keys(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/rocketmq-4.9.8-namesrv.keys")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		k := strings.TrimSpace(sc.Text())
		if k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		n++
		if ig, ok := cfg.IgnoredKeys()[k]; !slices.Contains(fields, k) && (!ok || ig.Reason == "") {
			t.Errorf("RocketMQ name server key %s is neither used nor ignored with a reason", k)
		}
	}
	if n < 15 {
		t.Fatalf("read only %d keys", n)
	}
}

// TestIgnoredKeysWarnOnce: RocketMQ-only keys load with one warning line.
func TestIgnoredKeysWarnOnce(t *testing.T) {
	path := t.TempDir() + "/namesrv.conf"
	if err := os.WriteFile(path, []byte("rocketmqHome=/opt/rocketmq\nserverWorkerThreads=8\nlistenPort=9876\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	rep, err := config.Load(path, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w := rep.Warning(); !strings.Contains(w, "2 RocketMQ key(s)") || !strings.Contains(w, "rocketmqHome (") ||
		!strings.Contains(w, "serverWorkerThreads (") || strings.Contains(w, "\n") {
		t.Fatalf("warning %q", w)
	}
}

// TestConfigDocTable: docs/config.md's name server table is the
// classification of every RocketMQ 4.9 name server key
// (RAFTMQ_WRITE_DOCS=1 rewrites it).
func TestConfigDocTable(t *testing.T) {
	var keys []string
	raw, err := os.ReadFile("testdata/rocketmq-4.9.8-namesrv.keys")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	var cfg Config
	table, err := config.ClassTable(keys, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	const doc = "../docs/config.md"
	if os.Getenv("RAFTMQ_WRITE_DOCS") != "" {
		if err := config.ReplaceSection(doc, "namesrv-keys", table); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := os.ReadFile(doc); err != nil || !strings.Contains(string(d), table) {
		t.Fatalf("%s's namesrv-keys table is stale (%v): run RAFTMQ_WRITE_DOCS=1 go test -run TestConfigDocTable ./broker/ ./namesrv/", doc, err)
	}
}
