package broker

import (
	"bufio"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
)

// readKeyList reads a testdata list of RocketMQ key names (# comments).
func readKeyList(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k := strings.TrimSpace(sc.Text()); k != "" && !strings.HasPrefix(k, "#") {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestRocketMQKeysClassified: every key of RocketMQ 4.9.8's BrokerConfig,
// MessageStoreConfig, NettyServerConfig and NettyClientConfig is either
// used (a BrokerConfig field) or ignored with a reason, so a RocketMQ
// broker.conf never fails on a real RocketMQ key.
func TestRocketMQKeysClassified(t *testing.T) {
	var cfg BrokerConfig
	fields, err := config.Keys(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	isField := func(k string) bool { i := sort.SearchStrings(fields, k); return i < len(fields) && fields[i] == k }
	ignored := cfg.IgnoredKeys()
	rmq := readKeyList(t, "testdata/rocketmq-4.9.8-broker.keys")
	used, skipped := 0, 0
	for _, k := range rmq {
		ig, ok := ignored[k]
		switch {
		case isField(k):
			used++
		case !ok:
			t.Errorf("RocketMQ key %s is neither a field nor ignored", k)
		case ig.Reason == "":
			t.Errorf("ignored key %s has no reason", k)
		default:
			skipped++
		}
	}
	for k := range ignored {
		if isField(k) {
			// A field wins (the key is used); the entry is dead and
			// should go.
			t.Logf("key %s is a field and also listed as ignored: the field is used", k)
		}
	}
	t.Logf("%d RocketMQ 4.9 broker keys: %d used, %d ignored with a reason", len(rmq), used, skipped)
}

// TestIgnoredKeysLoadWithOneWarning: a file setting ignored keys loads;
// the one warning names each key and its reason; unknown keys fail with a
// suggestion; a value asking for a missing feature (enableLmq=true) is refused; and all of
// that is reported in one run.
func TestIgnoredKeysLoadWithOneWarning(t *testing.T) {
	path := t.TempDir() + "/broker.conf"
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("brokerRole=SYNC_MASTER\nhaListenPort=10912\nserverWorkerThreads=8\nlistenPort=10911\nenableLmq=false\n")
	cfg := DefaultConfig()
	rep, err := config.Load(path, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := rep.Warning()
	for _, want := range []string{"4 RocketMQ key(s)", "brokerRole, haListenPort (replication is Raft",
		"serverWorkerThreads (Java thread-pool", "enableLmq (light message queues (LMQ) are not supported"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	if strings.Count(w, "\n") != 0 {
		t.Fatalf("the warning must be one line: %q", w)
	}

	write("brokerRol=SLAVE\nflushDiskTyp=SYNC_FLUSH\nlistenport=1\nenableLmq=true\nlistenPort=ten\nnoSuchThing=1\n")
	cfg = DefaultConfig()
	_, err = config.Load(path, &cfg)
	if !errors.Is(err, config.ErrUnknownKey) || !errors.Is(err, config.ErrIgnoredKey) || !errors.Is(err, config.ErrBadValue) {
		t.Fatalf("want all three kinds of error in one: %v", err)
	}
	for _, want := range []string{`"brokerRol": did you mean "brokerRole"?`, `"flushDiskTyp": did you mean "flushDiskType"?`,
		`"listenport": did you mean "listenPort"?`, "enableLmq=true refused: light message queues (LMQ) are not supported", `"listenPort": cannot use value "ten"`,
		`unknown key "noSuchThing" (neither`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if n := len(config.Problems(err)); n != 6 {
		t.Errorf("%d problems reported, want 6: %v", n, err)
	}
}

// TestValidateReportsEverySetting: Validate names every bad setting at
// once, across the broker, group, store and Raft parts.
func TestValidateReportsEverySetting(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BrokerClusterName = ""
	cfg.MaxPullBatch = 0
	cfg.Store.FlushDiskType = "ASYNC_FLUSH"
	cfg.Store.FileReservedTime = 0
	cfg.Raft.DLegerPeers = ""
	cfg.Log.Format = "xml"
	err := cfg.Validate()
	for _, key := range []string{"brokerClusterName", "maxPullBatch", "flushDiskType", "fileReservedTime", "dLegerPeers", "logFormat"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("Validate did not name %s:\n%v", key, err)
		}
	}
}

// TestRuntimeUpdateRefusesIgnoredKey: UPDATE_BROKER_CONFIG's Apply refuses
// an ignored key, saying why, instead of accepting a change that does
// nothing.
func TestRuntimeUpdateRefusesIgnoredKey(t *testing.T) {
	cfg := DefaultConfig()
	err := config.Apply(map[string]string{"brokerRole": "SLAVE"}, "UPDATE_BROKER_CONFIG", &cfg)
	if !errors.Is(err, config.ErrIgnoredKey) || !strings.Contains(err.Error(), "replication is Raft") {
		t.Fatalf("got %v", err)
	}
}

// TestConfigDocTable: docs/config.md's broker table is the classification
// of every RocketMQ 4.9 broker key (RAFTMQ_WRITE_DOCS=1 rewrites it).
func TestConfigDocTable(t *testing.T) {
	var cfg BrokerConfig
	table, err := config.ClassTable(readKeyList(t, "testdata/rocketmq-4.9.8-broker.keys"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	const doc = "../docs/config.md"
	if os.Getenv("RAFTMQ_WRITE_DOCS") != "" {
		if err := config.ReplaceSection(doc, "broker-keys", table); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), table) {
		t.Fatalf("%s's broker-keys table is stale: run RAFTMQ_WRITE_DOCS=1 go test -run TestConfigDocTable ./broker/ ./namesrv/", doc)
	}
}
