package raftlog

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/raftmq/raftmq/storage"
)

// StableStore is Raft's small durable key/value store (current term, last
// vote, last vote candidate) in a BoltDB file. Only the raft.StableStore side
// of raft-boltdb's BoltStore is used; the log lives in LogStore. Every Set is
// fsynced by BoltDB, which Raft's vote safety needs.
//
// Build note: raft-boltdb/v2 v2.3.1 imports go-metrics/compat, which
// go-metrics v0.7.0 (required by raft v1.8.0) removed; go.mod pins
// go-metrics to v0.6.1 with a replace directive for that reason.
type StableStore struct {
	*raftboltdb.BoltStore
}

var _ raft.StableStore = (*StableStore)(nil)

// OpenStableStore opens or creates the BoltDB file at path.
func OpenStableStore(path string) (*StableStore, error) {
	b, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open stable store %s: %w", path, err)
	}
	return &StableStore{BoltStore: b}, nil
}

// Close closes the BoltDB file.
func (s *StableStore) Close() error { return s.BoltStore.Close() }

// OpenSnapshotStore opens raft's file snapshot store under dir, keeping the
// newest retain snapshots, wrapped in IndexedSnapshotStore so that
// FSMSnapshot.Persist can record the log position (snapshot.go). raftmq's
// snapshots are small markers (Raft index, ConsumeQueue checkpoint, offsets,
// topic config), so retaining a few costs nothing.
func OpenSnapshotStore(dir string, retain int, log *zap.Logger) (IndexedSnapshotStore, error) {
	if err := storage.MkdirAllDurable(storage.OSFS(), dir); err != nil {
		return IndexedSnapshotStore{}, err
	}
	s, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, HCLogger(log, "raft-snapshot"))
	if err != nil {
		return IndexedSnapshotStore{}, fmt.Errorf("raftlog: open snapshot store %s: %w", dir, err)
	}
	return IndexedSnapshotStore{SnapshotStore: s}, nil
}

// HCLogger adapts a zap logger to the hclog.Logger hashicorp/raft wants.
// hclog formats the line; the adapter maps its level tag to the zap level,
// so raft's output lands in the broker's structured log. A nil logger
// discards everything.
func HCLogger(log *zap.Logger, name string) hclog.Logger {
	if log == nil {
		log = zap.NewNop()
	}
	// A stack trace of an hclog line shows this adapter under hclog, never
	// raft's caller, and raft logs an error per failed send to a member
	// that is down.
	log = log.WithOptions(zap.AddStacktrace(zapcore.FatalLevel))
	level := hclog.Info
	if log.Core().Enabled(zap.DebugLevel) {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       level,
		Output:      zapWriter{log},
		DisableTime: true,
	})
}

// zapWriter receives one formatted hclog line per Write.
type zapWriter struct{ log *zap.Logger }

// Write logs one hclog line at the zap level named by its [LEVEL] tag.
func (w zapWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	switch {
	case bytes.HasPrefix(p, []byte("[ERROR]")) && strings.Contains(line, raft.ErrTransportShutdown.Error()):
		// The transport's connection readers ending as the member closes:
		// part of a clean shutdown, which an error line would make look
		// like a failure.
		w.log.Info(trimLevel(line))
	case bytes.HasPrefix(p, []byte("[ERROR]")):
		w.log.Error(trimLevel(line))
	case bytes.HasPrefix(p, []byte("[WARN]")):
		w.log.Warn(trimLevel(line))
	case bytes.HasPrefix(p, []byte("[DEBUG]")), bytes.HasPrefix(p, []byte("[TRACE]")):
		w.log.Debug(trimLevel(line))
	default:
		w.log.Info(trimLevel(line))
	}
	return len(p), nil
}

func trimLevel(line string) string {
	if i := strings.IndexByte(line, ']'); i >= 0 {
		return strings.TrimSpace(line[i+1:])
	}
	return line
}
