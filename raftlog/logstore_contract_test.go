package raftlog

import (
	"testing"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testOptions uses small segments so that tests cross segment boundaries
// (blank fillers) and small index files so that they roll too.
func testOptions(fsys storage.FS) Options {
	return Options{FS: fsys, SegmentSize: 16 << 10, IndexFileSize: 512, CheckpointBytes: 20 << 10, Sync: true}
}

func mustOpen(t testing.TB, dir string, o Options) *LogStore {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

// TestContractInmem runs the suite against hashicorp's InmemStore: it
// proves the suite asks only for what Raft's reference store does.
func TestContractInmem(t *testing.T) {
	raftlogtest.Run(t, func(t *testing.T) *raftlogtest.Harness {
		s := raft.NewInmemStore()
		return &raftlogtest.Harness{
			Store: s,
			Reset: func(t *testing.T, next uint64) {
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if err := s.DeleteRange(first, last); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// harness wraps a LogStore on fsys; crash (FaultFS only) replaces fsys.
func harness(t *testing.T, fsys storage.FS, faulty *storage.FaultFS) *raftlogtest.Harness {
	dir := "/log"
	if faulty == nil {
		dir = t.TempDir()
	}
	o := testOptions(fsys)
	h := &raftlogtest.Harness{}
	cur := mustOpen(t, dir, o)
	h.Store = cur
	h.Reopen = func(t *testing.T) raft.LogStore {
		if err := cur.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		cur = mustOpen(t, dir, o)
		h.Store = cur
		return cur
	}
	h.Reset = func(t *testing.T, next uint64) {
		// Any position works for the contract; use one mid-segment and past
		// the old end to exercise alignment.
		if err := cur.ResetAt(next, int64(next)*1000+13); err != nil {
			t.Fatalf("ResetAt: %v", err)
		}
	}
	h.Close = func(t *testing.T) { cur.Close() }
	if faulty != nil {
		h.Crash = func(t *testing.T) raft.LogStore {
			faulty = faulty.Crash(storage.CrashOptions{Tear: true})
			cur.Close() // the old FS is dead; this only drops mappings
			o.FS = faulty
			cur = mustOpen(t, dir, o)
			h.Store = cur
			return cur
		}
	}
	return h
}

func TestContractFiles(t *testing.T) {
	raftlogtest.Run(t, func(t *testing.T) *raftlogtest.Harness {
		return harness(t, storage.OSFS(), nil)
	})
}

func TestContractFaultFS(t *testing.T) {
	raftlogtest.Run(t, func(t *testing.T) *raftlogtest.Harness {
		f := storage.NewFaultFS(1)
		return harness(t, f, f)
	})
}
