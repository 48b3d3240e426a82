package namesrv

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/raftmq/raftmq/storage"
	"io/fs"
	"os"
	"sync"

	"go.uber.org/zap"
)

// kvConfigFile is the on-disk form, RocketMQ's KVConfigSerializeWrapper, so
// a kvConfig.json written by a Java name server loads unchanged.
type kvConfigFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// KVConfigManager is the name server's namespace → key → value table
// (KVConfigManager), persisted to one JSON file after every change. mu guards
// table and serialises file writes, so the file always matches some state
// the table was in, in order.
type KVConfigManager struct {
	path string
	log  *zap.Logger

	mu    sync.RWMutex
	table map[string]map[string]string
}

// NewKVConfigManager returns an empty table backed by path; call Load to read
// an existing file. log may be nil.
func NewKVConfigManager(path string, log *zap.Logger) *KVConfigManager {
	if log == nil {
		log = zap.NewNop()
	}
	return &KVConfigManager{path: path, log: log, table: make(map[string]map[string]string)}
}

// Load reads the file; a missing file is an empty table. A file that exists
// but does not parse is an error rather than silently dropping its contents.
func (m *KVConfigManager) Load() error {
	data, err := os.ReadFile(m.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("namesrv: read KV config %s: %w", m.path, err)
	}
	var f kvConfigFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("namesrv: KV config %s is not valid JSON (fix or remove it): %w", m.path, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for ns, kv := range f.ConfigTable {
		if kv == nil {
			kv = make(map[string]string)
		}
		m.table[ns] = kv
	}
	m.log.Info("KV config loaded", zap.String("path", m.path), zap.Int("namespaces", len(m.table)))
	return nil
}

// Put sets namespace/key to value and persists the table. On a persist
// error the change stays in memory and the error (wrapping ErrKVPersist)
// names the file.
func (m *KVConfigManager) Put(namespace, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	kv := m.table[namespace]
	if kv == nil {
		kv = make(map[string]string)
		m.table[namespace] = kv
	}
	kv[key] = value
	return m.persistLocked()
}

// Get returns the value of namespace/key.
func (m *KVConfigManager) Get(namespace, key string) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.table[namespace][key]
	return v, ok
}

// Delete removes namespace/key (absent keys are fine) and persists.
func (m *KVConfigManager) Delete(namespace, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	kv := m.table[namespace]
	if kv == nil {
		return nil
	}
	if _, ok := kv[key]; !ok {
		return nil
	}
	delete(kv, key)
	return m.persistLocked()
}

// List returns a copy of one namespace, or false when it does not exist
// (an emptied namespace still exists, as in RocketMQ).
func (m *KVConfigManager) List(namespace string) (map[string]string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	kv, ok := m.table[namespace]
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(kv))
	for k, v := range kv {
		out[k] = v
	}
	return out, true
}

// persistLocked writes the table to a temporary file in the same directory,
// fsyncs it, renames it over the old file and fsyncs the directory, so a
// crash leaves either the old or the new file, never a torn one.
func (m *KVConfigManager) persistLocked() error {
	data, err := json.Marshal(kvConfigFile{ConfigTable: m.table})
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrKVPersist, m.path, err)
	}
	if err := storage.WriteFileAtomic(storage.OSFS(), m.path, data); err != nil {
		m.log.Error("persisting KV config failed", zap.String("path", m.path), zap.Error(err))
		return fmt.Errorf("%w: %s: %v", ErrKVPersist, m.path, err)
	}
	return nil
}
