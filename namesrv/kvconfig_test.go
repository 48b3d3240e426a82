package namesrv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestKVConfigPersistence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nested", "kvConfig.json")
	m := NewKVConfigManager(path, nil)
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

	m2 := NewKVConfigManager(path, nil)
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
	err := NewKVConfigManager(path, nil).Load()
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
	m := NewKVConfigManager(filepath.Join(blocker, "kv.json"), nil)
	err := m.Put("NS", "k", "v")
	if err == nil || !strings.Contains(err.Error(), "kv.json") {
		t.Fatalf("want persist error naming the file, got %v", err)
	}
	if v, ok := m.Get("NS", "k"); !ok || v != "v" {
		t.Fatal("value lost from memory after a failed persist")
	}
}
