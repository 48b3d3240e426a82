package namesrv

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
)

// FuzzKVConfigLoad: the KV config file either loads (every namespace with
// a usable table) or is refused with an error naming it; a loaded table
// persists and loads back the same.
func FuzzKVConfigLoad(f *testing.F) {
	f.Add([]byte(`{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"b:4"}}}`))
	f.Add([]byte(`{"configTable":{"ns":null,"":{"":""}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"configTable":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "kvConfig.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		m := NewKVConfigManager(path, KVLimits{}, zap.NewNop())
		if err := m.Load(); err != nil {
			return
		}
		// A write through the loaded table must work in every namespace.
		for ns := range m.table {
			if err := m.Put(ns, "fuzz-key", "v"); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Put("fuzz-ns", "k", "v"); err != nil {
			t.Fatal(err)
		}
		back := NewKVConfigManager(path, KVLimits{}, zap.NewNop())
		if err := back.Load(); err != nil {
			t.Fatalf("persisted table does not load: %v", err)
		}
		if len(back.table) != len(m.table) {
			t.Fatalf("%d namespaces persisted, %d loaded", len(m.table), len(back.table))
		}
		for ns, kv := range m.table {
			if !maps.Equal(back.table[ns], kv) {
				t.Fatalf("namespace %q: %v loaded as %v", ns, kv, back.table[ns])
			}
		}
	})
}
