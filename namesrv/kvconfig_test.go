package namesrv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
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

// TestKVConfigPersistFailureChangesNothing: a put or delete whose file
// write fails is refused and leaves the table as the file has it: reads
// do not show a change a restart would lose, the key count is not moved
// (new keys still fit up to kvConfigMaxEntries), and a failure after the
// rename (the directory's sync) leaves the file as it was too, so a
// restart reads the same table. PUT_KV_CONFIG answers SYSTEM_ERROR
// naming the file and saying the key is unchanged.
func TestKVConfigPersistFailureChangesNothing(t *testing.T) {
	ffs := storage.NewFaultFS(1)
	const path = "/ns/kvConfig.json"
	open := func() *KVConfigManager {
		m := NewKVConfigManager(path, KVLimits{KVConfigMaxEntries: 2}, nil)
		m.fs = ffs
		if err := m.Load(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	if err := m.Put("NS", "k", "v1"); err != nil {
		t.Fatal(err)
	}
	unchanged := func(m *KVConfigManager, when string) {
		t.Helper()
		if v, ok := m.Get("NS", "k"); !ok || v != "v1" {
			t.Fatalf("%s: NS/k = %q %v, want v1", when, v, ok)
		}
		if _, ok := m.Get("NS", "new"); ok {
			t.Fatalf("%s: NS/new is set", when)
		}
		if _, ok := m.List("NEW"); ok {
			t.Fatalf("%s: namespace NEW exists", when)
		}
	}
	for _, op := range []storage.FaultOp{storage.OpSync, storage.OpSyncDir} {
		ffs.InjectError(op, unix.EIO)
		for _, f := range []struct {
			what string
			do   func() error
		}{
			{"overwrite", func() error { return m.Put("NS", "k", "v2") }},
			{"new key", func() error { return m.Put("NS", "new", "x") }},
			{"new namespace", func() error { return m.Put("NEW", "k", "x") }},
			{"delete", func() error { return m.Delete("NS", "k") }},
		} {
			err := f.do()
			if !errors.Is(err, ErrKVPersist) || !strings.Contains(err.Error(), path) {
				t.Fatalf("%s failing at %s: %v, want ErrKVPersist naming %s", f.what, op, err, path)
			}
			unchanged(m, fmt.Sprintf("after a %s failing at %s", f.what, op))
		}
		ffs.InjectError(op, nil)
		data, err := readFile(ffs, path)
		if err != nil || strings.Contains(string(data), "v2") || !strings.Contains(string(data), "v1") {
			t.Fatalf("after the failures at %s the file holds %s (%v), want NS/k=v1", op, data, err)
		}
	}
	unchanged(open(), "after a restart")
	if err := m.Put("NS", "new", "x"); err != nil {
		t.Fatalf("the second key, within kvConfigMaxEntries=2 after the failed puts: %v", err)
	}

	n := testServer(t, nil)
	n.kv.mu.Lock()
	n.kv.fs = ffs
	n.kv.mu.Unlock()
	ffs.InjectError(storage.OpSync, unix.EIO)
	c := testClient(t)
	r := call(t, c, n.Addr().String(), remoting.NewRequest(remoting.RequestPutKVConfig, &wire.PutKVConfigRequestHeader{Namespace: "NS", Key: "k", Value: "v"}, nil))
	if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "kvConfig.json") || !strings.Contains(r.Remark, "unchanged") {
		t.Fatalf("PUT_KV_CONFIG failing to persist: %d %q, want SYSTEM_ERROR naming the file and saying NS/k is unchanged", r.Code, r.Remark)
	}
	r = call(t, c, n.Addr().String(), remoting.NewRequest(remoting.RequestGetKVConfig, &wire.KVConfigRequestHeader{Namespace: "NS", Key: "k"}, nil))
	if r.Code != remoting.ResponseQueryNotFound {
		t.Fatalf("GET_KV_CONFIG after a put that failed to persist: %d %q %v, want QUERY_NOT_FOUND", r.Code, r.Remark, r.ExtFields)
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
		return call(t, c, addr, remoting.NewRequest(remoting.RequestPutKVConfig, &wire.PutKVConfigRequestHeader{Namespace: ns, Key: k, Value: v}, nil))
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

// TestPutKVConfigWithoutValueRefused: PUT_KV_CONFIG's value is required
// (RocketMQ's header marks it @CFNotNull): a put that names no value is
// refused with a remark naming the field, and nothing is stored; an empty
// value sent as such is a value and is stored.
func TestPutKVConfigWithoutValueRefused(t *testing.T) {
	n := testServer(t, nil)
	c := testClient(t)
	addr := n.Addr().String()
	r := call(t, c, addr, remoting.NewRequest(remoting.RequestPutKVConfig, &wire.KVConfigRequestHeader{Namespace: "NS", Key: "k"}, nil))
	if r.Code == remoting.ResponseSuccess || !strings.Contains(r.Remark, "value") {
		t.Fatalf("PUT_KV_CONFIG without a value: %d %q, want refused naming the value field", r.Code, r.Remark)
	}
	get := func() *remoting.RemotingCommand {
		return call(t, c, addr, remoting.NewRequest(remoting.RequestGetKVConfig, &wire.KVConfigRequestHeader{Namespace: "NS", Key: "k"}, nil))
	}
	if r := get(); r.Code != remoting.ResponseQueryNotFound {
		t.Fatalf("GET_KV_CONFIG after the refused put: %d %q %v, want QUERY_NOT_FOUND", r.Code, r.Remark, r.ExtFields)
	}
	if r := call(t, c, addr, remoting.NewRequest(remoting.RequestPutKVConfig, &wire.PutKVConfigRequestHeader{Namespace: "NS", Key: "k"}, nil)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("PUT_KV_CONFIG of an empty value: %d %q, want SUCCESS", r.Code, r.Remark)
	}
	if r := get(); r.Code != remoting.ResponseSuccess || r.ExtFields["value"] != "" {
		t.Fatalf("GET_KV_CONFIG after putting an empty value: %d %q %v, want SUCCESS with an empty value", r.Code, r.Remark, r.ExtFields)
	}
}
