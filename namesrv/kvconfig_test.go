package namesrv

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func TestKVConfigPersistence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nested", "kvConfig.json")
	m := NewKVConfigManager(path, DefaultKVLimits(), nil)
	if err := m.Load(); err != nil {
		t.Fatalf("missing file must load as empty: %v", err)
	}
	if err := m.Put("ORDER_TOPIC_CONFIG", "T", "b1:4;b2:4"); err != nil {
		t.Fatal(err)
	}
	if err := m.Put("NS", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete("NS", "k"); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete("NS", "absent"); err != nil {
		t.Fatal(err)
	}

	// The file is RocketMQ's KVConfigSerializeWrapper JSON.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]map[string]map[string]string
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("file %s: %v", raw, err)
	}
	want := map[string]map[string]string{"ORDER_TOPIC_CONFIG": {"T": "b1:4;b2:4"}, "NS": {}}
	if !reflect.DeepEqual(f["configTable"], want) {
		t.Fatalf("file content %s", raw)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the KV file", len(entries))
	}

	m2 := NewKVConfigManager(path, DefaultKVLimits(), nil)
	if err := m2.Load(); err != nil {
		t.Fatal(err)
	}
	if v, ok := m2.Get("ORDER_TOPIC_CONFIG", "T"); !ok || v != "b1:4;b2:4" {
		t.Fatalf("reloaded value %q %v", v, ok)
	}
	if kv, ok := m2.List("NS"); !ok || len(kv) != 0 {
		t.Fatalf("emptied namespace must still exist: %v %v", kv, ok)
	}
}

func TestKVConfigCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := NewKVConfigManager(path, DefaultKVLimits(), nil).Load()
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt file: want an error naming %s, got %v", path, err)
	}
}

func TestKVConfigPersistFailureKeepsValue(t *testing.T) {
	dir := t.TempDir()
	// A regular file where the parent directory should be: writes fail.
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewKVConfigManager(filepath.Join(blocker, "kv.json"), DefaultKVLimits(), nil)
	err := m.Put("NS", "k", "v")
	if err == nil || !strings.Contains(err.Error(), "kv.json") {
		t.Fatalf("want persist error naming the file, got %v", err)
	}
	if v, ok := m.Get("NS", "k"); !ok || v != "v" {
		t.Fatal("value lost from memory after a failed persist")
	}
}

// The KV table is bounded: PUT_KV_CONFIG of a new key when the table holds
// kvConfigMaxEntries keys, of a new namespace when it holds that many
// namespaces, or of a namespace, key or value longer than its limit is
// refused with SYSTEM_ERROR naming the limit, and nothing changes; an
// overwrite of an existing key is taken at the count limit.
func TestKVConfigBounded(t *testing.T) {
	n := testServer(t, func(c *Config) {
		c.KVConfigMaxEntries, c.KVConfigMaxNamespaceLength, c.KVConfigMaxKeyLength, c.KVConfigMaxValueLength = 2, 8, 8, 16
	})
	c := testClient(t)
	addr := n.Addr().String()
	put := func(ns, k, v string) *remoting.RemotingCommand {
		return call(t, c, addr, remoting.NewRequest(remoting.RequestPutKVConfig, &wire.KVConfigRequestHeader{Namespace: ns, Key: k, Value: v}, nil))
	}
	del := func(ns, k string) {
		if r := call(t, c, addr, remoting.NewRequest(remoting.RequestDeleteKVConfig, &wire.KVConfigRequestHeader{Namespace: ns, Key: k}, nil)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("delete %s/%s: %d %s", ns, k, r.Code, r.Remark)
		}
	}
	ok := func(ns, k, v string) {
		t.Helper()
		if r := put(ns, k, v); r.Code != remoting.ResponseSuccess {
			t.Fatalf("put %s/%s: %d %s", ns, k, r.Code, r.Remark)
		}
	}
	refused := func(ns, k, v, limit string) {
		t.Helper()
		if r := put(ns, k, v); r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, limit) {
			t.Fatalf("put %s/%s (%d-byte value): %d %q, want SYSTEM_ERROR naming %s", ns, k, len(v), r.Code, r.Remark, limit)
		}
	}
	value := func(ns, k string) string {
		v, _ := n.kv.Get(ns, k)
		return v
	}

	ok("a", "k1", "v1")
	ok("a", "k2", "v2")
	refused("a", "k3", "v3", "kvConfigMaxEntries=2")
	if _, found := n.kv.Get("a", "k3"); found {
		t.Fatal("a refused put was stored")
	}
	ok("a", "k1", "v1 again") // an overwrite at the limit
	if v := value("a", "k1"); v != "v1 again" {
		t.Fatalf("overwrite at the limit: a/k1 = %q", v)
	}
	refused("a", "k1", strings.Repeat("v", 17), "kvConfigMaxValueLength=16")
	if v := value("a", "k1"); v != "v1 again" {
		t.Fatalf("a refused overwrite changed a/k1 to %q", v)
	}
	del("a", "k2")
	ok("a", "k3", strings.Repeat("v", 16))
	refused(strings.Repeat("n", 9), "k", "v", "kvConfigMaxNamespaceLength=8")
	refused("a", strings.Repeat("k", 9), "v", "kvConfigMaxKeyLength=8")

	// An emptied namespace stays (as in RocketMQ) and counts toward the
	// namespaces' bound.
	del("a", "k1")
	del("a", "k3")
	ok("b", "x", "v")
	del("b", "x")
	refused("c", "y", "v", "kvConfigMaxEntries=2")
	if _, found := n.kv.List("c"); found {
		t.Fatal("a refused put created its namespace")
	}
	ok("a", "z", "v")
}

// A file holding more keys than kvConfigMaxEntries loads whole; new keys
// are refused until deletes bring it under the bound.
func TestKVConfigLoadOverBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.json")
	if err := os.WriteFile(path, []byte(`{"configTable":{"a":{"1":"v","2":"v"},"b":{"3":"v"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewKVConfigManager(path, KVLimits{KVConfigMaxEntries: 2}, nil)
	if err := m.Load(); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("b", "3"); !ok {
		t.Fatal("a key over the bound was dropped on load")
	}
	if err := m.Put("a", "4", "v"); !errors.Is(err, ErrKVLimit) {
		t.Fatalf("new key over the bound: %v, want ErrKVLimit", err)
	}
	if err := m.Put("a", "1", "w"); err != nil {
		t.Fatalf("overwrite over the bound: %v", err)
	}
	if err := m.Delete("a", "1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Put("a", "4", "v"); !errors.Is(err, ErrKVLimit) {
		t.Fatalf("new key at the bound: %v, want ErrKVLimit", err)
	}
	if err := m.Delete("a", "2"); err != nil {
		t.Fatal(err)
	}
	if err := m.Put("a", "4", "v"); err != nil {
		t.Fatalf("new key under the bound: %v", err)
	}
}
