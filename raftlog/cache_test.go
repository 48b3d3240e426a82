package raftlog

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// fromMemory reports whether GetLog(index) returned the very bytes given to
// StoreLogs (a cache hit) rather than a copy read from the file.
func fromMemory(t *testing.T, s *LogStore, stored *raft.Log) bool {
	t.Helper()
	var l raft.Log
	if err := s.GetLog(stored.Index, &l); err != nil {
		t.Fatalf("GetLog(%d): %v", stored.Index, err)
	}
	if err := raftlogtest.Equal(&l, stored); err != nil {
		t.Fatalf("GetLog(%d): %v", stored.Index, err)
	}
	return len(l.Data) > 0 && &l.Data[0] == &stored.Data[0]
}

// TestRecentEntriesCache: the latest appends are served from memory with
// the stored content; a truncated and rewritten suffix is never served
// stale; entries evicted by CacheBytes, and every entry after a reopen,
// come from the files with the same content; a negative CacheBytes turns
// the cache off.
func TestRecentEntriesCache(t *testing.T) {
	o := testOptions(storage.NewFaultFS(1))
	o.CacheBytes = 3000 // a handful of test entries (up to 600 bytes each)
	s := mustOpen(t, "/c", o)
	t1 := raftlogtest.Entries(1, 40, 1)
	storeAll(t, s, t1)
	if !fromMemory(t, s, t1[39]) { // index 40 carries data (40%11 != 0)
		t.Fatal("GetLog of the last stored entry was not served from memory")
	}
	if fromMemory(t, s, t1[0]) {
		t.Fatal("index 1 should have been evicted by CacheBytes")
	}
	// Follower-style conflict: cut 30..40, rewrite 30..45 in term 2.
	if err := s.DeleteRange(30, 40); err != nil {
		t.Fatal(err)
	}
	t2 := raftlogtest.Entries(30, 45, 2)
	storeAll(t, s, t2)
	want := func(i uint64) *raft.Log {
		if i >= 30 {
			return raftlogtest.Entry(i, 2)
		}
		return raftlogtest.Entry(i, 1)
	}
	raftlogtest.CheckRange(t, s, 1, 45, want)
	if !fromMemory(t, s, t2[len(t2)-1]) {
		t.Fatal("rewritten suffix not served from memory")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, "/c", o)
	raftlogtest.CheckRange(t, s, 1, 45, want)
	if fromMemory(t, s, t2[len(t2)-1]) {
		t.Fatal("a reopened store cannot hold entries in memory")
	}
	s.Close()

	o.CacheBytes = -1
	off := mustOpen(t, "/off", o)
	defer off.Close()
	storeAll(t, off, t1)
	if fromMemory(t, off, t1[39]) {
		t.Fatal("CacheBytes < 0 must turn the cache off")
	}
}
