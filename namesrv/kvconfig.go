package namesrv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// kvConfigFile is the on-disk form, RocketMQ's KVConfigSerializeWrapper, so
// a kvConfig.json written by a Java name server loads unchanged.
type kvConfigFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// KVLimits bounds the KV table, which PUT_KV_CONFIG grows and every change
// rewrites whole to its file. RocketMQ sets no bound; a put beyond one is
// refused (ErrKVLimit) and changes nothing.
type KVLimits struct {
	// KVConfigMaxEntries bounds the keys over all namespaces, and the
	// namespaces (an emptied namespace stays, as in RocketMQ). An
	// overwrite of an existing key is taken at the limit.
	KVConfigMaxEntries int `prop:"kvConfigMaxEntries"`
	// KVConfigMaxNamespaceLength, KVConfigMaxKeyLength and
	// KVConfigMaxValueLength bound each string's length in bytes.
	KVConfigMaxNamespaceLength int `prop:"kvConfigMaxNamespaceLength"`
	KVConfigMaxKeyLength       int `prop:"kvConfigMaxKeyLength"`
	KVConfigMaxValueLength     int `prop:"kvConfigMaxValueLength"`
}

// DefaultKVLimits leaves room for ORDER_TOPIC_CONFIG (a key per ordered
// topic, a "broker:queues;" pair per broker in its value) on large
// clusters while keeping the table, and each rewrite of its file, to tens
// of megabytes at most.
func DefaultKVLimits() KVLimits {
	return KVLimits{
		KVConfigMaxEntries:         10000,
		KVConfigMaxNamespaceLength: 255,
		KVConfigMaxKeyLength:       255,
		KVConfigMaxValueLength:     4096,
	}
}

func (l KVLimits) validate() error {
	var errs []error
	for _, f := range []struct {
		key string
		v   int
	}{
		{"kvConfigMaxEntries", l.KVConfigMaxEntries},
		{"kvConfigMaxNamespaceLength", l.KVConfigMaxNamespaceLength},
		{"kvConfigMaxKeyLength", l.KVConfigMaxKeyLength},
		{"kvConfigMaxValueLength", l.KVConfigMaxValueLength},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s=%d must be positive", ErrInvalidConfig, f.key, f.v))
		}
	}
	return errors.Join(errs...)
}

// KVConfigManager is the name server's namespace → key → value table
// (KVConfigManager), persisted to one JSON file after every change. mu guards
// table and serialises file writes, so the file always matches some state
// the table was in, in order.
type KVConfigManager struct {
	path   string
	limits KVLimits
	log    *zap.Logger
	fs     storage.FS // the file's file system (tests inject faults)

	mu      sync.RWMutex
	table   map[string]map[string]string
	entries int // guarded by mu; the keys over all namespaces
}

// NewKVConfigManager returns an empty table backed by path and bounded by
// limits (a zero field is no bound); call Load to read an existing file.
// log may be nil.
func NewKVConfigManager(path string, limits KVLimits, log *zap.Logger) *KVConfigManager {
	if log == nil {
		log = zap.NewNop()
	}
	return &KVConfigManager{path: path, limits: limits, log: log, fs: storage.OSFS(), table: make(map[string]map[string]string)}
}

// Load reads the file; a missing file is an empty table. A file that exists
// but does not parse is an error rather than silently dropping its contents.
func (m *KVConfigManager) Load() error {
	data, err := readFile(m.fs, m.path)
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
		m.entries += len(kv) - len(m.table[ns])
		m.table[ns] = kv
	}
	m.log.Info("KV config loaded", zap.String("path", m.path), zap.Int("namespaces", len(m.table)), zap.Int("keys", m.entries))
	// A file written under other limits (or by a Java name server) loads
	// whole; only new keys are refused until it is back under the bound.
	if max := m.limits.KVConfigMaxEntries; max > 0 && (m.entries > max || len(m.table) > max) {
		m.log.Warn("KV config holds more than kvConfigMaxEntries: new keys and namespaces are refused until some are deleted",
			zap.Int("keys", m.entries), zap.Int("namespaces", len(m.table)), zap.Int("kvConfigMaxEntries", max))
	}
	return nil
}

// readFile returns the whole of path on fsys.
func readFile(fsys storage.FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(data)) {
		return nil, err
	}
	return data, nil
}

// Put sets namespace/key to value and persists the table. A put beyond
// the limits changes nothing and returns an error wrapping ErrKVLimit that
// names the limit's key. A put whose persist fails changes nothing either
// (the caller is told it failed, and a restart would not have it): the
// error wraps ErrKVPersist and names the file.
func (m *KVConfigManager) Put(namespace, key, value string) error {
	l := m.limits
	for _, f := range []struct {
		what, s, key string
		max          int
	}{
		{"namespace", namespace, "kvConfigMaxNamespaceLength", l.KVConfigMaxNamespaceLength},
		{"key", key, "kvConfigMaxKeyLength", l.KVConfigMaxKeyLength},
		{"value", value, "kvConfigMaxValueLength", l.KVConfigMaxValueLength},
	} {
		if f.max > 0 && len(f.s) > f.max {
			return fmt.Errorf("%w: the %s is %d bytes, over %s=%d", ErrKVLimit, f.what, len(f.s), f.key, f.max)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kv, nsFound := m.table[namespace]
	_, keyFound := kv[key]
	if max := l.KVConfigMaxEntries; max > 0 && !keyFound {
		if m.entries >= max {
			return fmt.Errorf("%w: the table holds %d keys, the most kvConfigMaxEntries=%d allows; delete some (DELETE_KV_CONFIG) or raise the key", ErrKVLimit, m.entries, max)
		}
		if !nsFound && len(m.table) >= max {
			return fmt.Errorf("%w: the table holds %d namespaces, the most kvConfigMaxEntries=%d allows; delete some or raise the key", ErrKVLimit, len(m.table), max)
		}
	}
	if !nsFound {
		kv = make(map[string]string)
		m.table[namespace] = kv
	}
	prev := kv[key]
	if !keyFound {
		m.entries++
	}
	kv[key] = value
	if err := m.persistLocked(); err != nil {
		if keyFound {
			kv[key] = prev
		} else {
			delete(kv, key)
			m.entries--
		}
		if !nsFound {
			delete(m.table, namespace)
		}
		m.undoLocked()
		return fmt.Errorf("%w; %s/%s is unchanged", err, namespace, key)
	}
	return nil
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
	prev := kv[key]
	delete(kv, key)
	m.entries--
	if err := m.persistLocked(); err != nil {
		kv[key] = prev
		m.entries++
		m.undoLocked()
		return fmt.Errorf("%w; %s/%s is not deleted", err, namespace, key)
	}
	return nil
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

// undoLocked rewrites the file with the table as it was before a change
// whose persist failed: a failure after the rename (the directory's sync)
// leaves the file holding the change the table no longer has.
func (m *KVConfigManager) undoLocked() {
	if err := m.persistLocked(); err != nil {
		m.log.Warn("rewriting the KV config file after a failed change failed too; "+
			"it may hold the change until the next successful one", zap.String("path", m.path), zap.Error(err))
	}
}

// persistLocked writes the table to a temporary file in the same directory,
// fsyncs it, renames it over the old file and fsyncs the directory, so a
// crash leaves either the old or the new file, never a torn one.
func (m *KVConfigManager) persistLocked() error {
	data, err := json.Marshal(kvConfigFile{ConfigTable: m.table})
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrKVPersist, m.path, err)
	}
	if err := storage.WriteFileAtomic(m.fs, m.path, data); err != nil {
		m.log.Error("persisting KV config failed", zap.String("path", m.path), zap.Error(err))
		return fmt.Errorf("%w: %s: %v", ErrKVPersist, m.path, err)
	}
	return nil
}
