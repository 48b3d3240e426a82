package raftlog

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestLocateHeaderCacheAcrossResetAndBackfill: a follower whose cached
// entries 31..60 conflict with the leader's installs the leader's snapshot
// at 60, so its log resets to continue at 61 at the leader's position. Its
// next append (61) continues the old cached run by index, and the backfill
// then makes 1..60 present again at the leader's positions: LocateHeader
// must answer every index as the files hold it, not from what was cached
// before the reset.
func TestLocateHeaderCacheAcrossResetAndBackfill(t *testing.T) {
	const snap, last = 60, 70
	lead := mustOpen(t, "/lead", testOptions(storage.NewFaultFS(1)))
	defer lead.Close()
	storeAll(t, lead, raftlogtest.Entries(1, 30, 1))
	storeAll(t, lead, raftlogtest.Entries(31, last, 2))
	fol := mustOpen(t, "/fol", testOptions(storage.NewFaultFS(2)))
	defer fol.Close()
	storeAll(t, fol, raftlogtest.Entries(1, snap, 1))
	if _, _, ok := fol.recent.locate(snap); !ok {
		t.Fatalf("index %d not cached before the reset: the test needs it", snap)
	}

	p, err := lead.SnapshotPosition(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := fol.RestoreFrom(p); err != nil {
		t.Fatal(err)
	}
	if err := fol.DeleteRange(1, snap); err != nil { // Raft after InstallSnapshot
		t.Fatal(err)
	}
	storeAll(t, fol, raftlogtest.Entries(snap+1, last, 2))
	st, gen, ok := fol.Backfill()
	if !ok || st.NextIndex != snap+1 || st.NextPos != p.EndPos {
		t.Fatalf("after the reset: backfill %+v %v", st, ok)
	}
	fi, fp, err := lead.FirstPosition()
	if err != nil {
		t.Fatal(err)
	}
	pos, err := fol.BackfillBegin(gen, fi, fp)
	if err != nil {
		t.Fatal(err)
	}
	for pos < p.EndPos {
		b, err := lead.ReadRange(pos, int(min(3000, p.EndPos-pos)))
		if err != nil {
			t.Fatalf("ReadRange(%d): %v", pos, err)
		}
		if err := fol.BackfillWrite(gen, pos, b); err != nil {
			t.Fatalf("BackfillWrite(%d): %v", pos, err)
		}
		pos += int64(len(b))
	}
	if err := fol.BackfillCommit(gen); err != nil {
		t.Fatal(err)
	}

	for i := fi; i <= last; i++ {
		wp, wh, err := lead.Locate(i)
		if err != nil {
			t.Fatalf("leader Locate(%d): %v", i, err)
		}
		dp, dh, err := fol.Locate(i)
		if err != nil || dp != wp || dh != wh {
			t.Fatalf("index %d: follower file %d %+v %v, leader %d %+v", i, dp, dh, err, wp, wh)
		}
		if cp, ch, err := fol.LocateHeader(i); err != nil || cp != wp || ch != wh {
			t.Fatalf("index %d: LocateHeader %d %+v %v, leader %d %+v", i, cp, ch, err, wp, wh)
		}
	}
	if _, _, ok := fol.recent.locate(last); !ok {
		t.Fatalf("index %d not cached: LocateHeader never answered from the cache", last)
	}
}

// TestLocateHeaderCacheBelowFirstIndex: entries still cached but no longer
// in the log (a prefix deleted by Raft, segments removed by retention) are
// not answered.
func TestLocateHeaderCacheBelowFirstIndex(t *testing.T) {
	s := mustOpen(t, "/below", testOptions(storage.NewFaultFS(1)))
	defer s.Close()
	storeAll(t, s, raftlogtest.Entries(1, 150, 1))
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	first, err := s.DeleteSegmentsBefore(140)
	if err != nil || first <= 11 {
		t.Fatalf("retention: first index %d, %v", first, err)
	}
	for i := uint64(1); i < first; i++ {
		if _, _, ok := s.recent.locate(i); !ok {
			t.Fatalf("index %d not cached: the test needs it", i)
		}
		if _, _, err := s.LocateHeader(i); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("LocateHeader(%d) below first index %d: %v", i, first, err)
		}
	}
	for i := first; i <= 150; i++ {
		p1, h1, err1 := s.Locate(i)
		p2, h2, err2 := s.LocateHeader(i)
		if err1 != nil || err2 != nil || p1 != p2 || h1 != h2 {
			t.Fatalf("index %d: Locate %d %+v %v, LocateHeader %d %+v %v", i, p1, h1, err1, p2, h2, err2)
		}
	}
}

// TestLocateHeaderCacheConcurrentWriters: while one writer appends across
// segment rolls, evicts, and truncates and rewrites its tail with entries
// of other sizes (a follower taking a new leader's entries), readers find
// the cache's answer for every present index equal to the header in the
// mapping, checked together under the read lock. Run with -race.
func TestLocateHeaderCacheConcurrentWriters(t *testing.T) {
	o := testOptions(storage.NewFaultFS(1))
	o.CacheBytes = 6 << 10
	s := mustOpen(t, "/conc", o)
	defer s.Close()
	storeAll(t, s, raftlogtest.Entries(1, 10, 1))

	done := make(chan struct{})
	var compared atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				s.mu.RLock()
				for i := s.first; !s.emptyLocked() && i <= s.tail; i++ {
					cp, ch, ok := s.recent.locate(i)
					if !ok {
						continue
					}
					dp, dh, err := s.locateWithLocked(i, DecodeFrameHeader)
					if err != nil || cp != dp || ch != dh {
						s.mu.RUnlock()
						errs <- fmt.Errorf("index %d: cache %d %+v, mapping %d %+v %v", i, cp, ch, dp, dh, err)
						return
					}
					compared.Add(1)
				}
				s.mu.RUnlock()
				last, err := s.LastIndex()
				if err == nil {
					_, _, err = s.LocateHeader(last)
				}
				if err != nil && !errors.Is(err, raft.ErrLogNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	next, term := uint64(11), uint64(1)
	// Past 150 rounds, write on until a reader was scheduled in between
	// (a loaded box can run all 150 before either reader runs).
	deadline := time.Now().Add(10 * time.Second)
	for round := 0; round < 150 || compared.Load() == 0 && time.Now().Before(deadline); round++ {
		storeAll(t, s, raftlogtest.Entries(next, next+4, term))
		next += 5
		if round%5 == 4 {
			// A new leader's entries replace the last eight.
			if err := s.DeleteRange(next-8, next-1); err != nil {
				t.Fatal(err)
			}
			next -= 8
			term++
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if compared.Load() == 0 {
		t.Fatal("no cached entry was compared")
	}
	t.Logf("%d cache answers compared, log ends at %d in term %d", compared.Load(), next-1, term)
}

// TestRecentEntriesCacheBoundsEmptyEntries: entries without data (noops,
// barriers, configuration changes carry little) still pin a raft.Log and a
// position each, so they count against the bound too.
func TestRecentEntriesCacheBoundsEmptyEntries(t *testing.T) {
	c := recentLogs{maxBytes: 64 << 10}
	for i := uint64(1); i <= 100_000; i++ {
		c.add([]*raft.Log{{Index: i, Type: raft.LogNoop}}, []int64{int64(i) * 64})
	}
	if n := len(c.logs); n > 1000 {
		t.Fatalf("a 64 KiB cache holds %d empty entries", n)
	}
	if len(c.logs) == 0 || c.logs[len(c.logs)-1].Index != 100_000 || len(c.pos) != len(c.logs) {
		t.Fatalf("cache lost the newest entries: %d logs, %d positions", len(c.logs), len(c.pos))
	}
}
