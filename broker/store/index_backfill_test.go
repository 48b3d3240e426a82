package store

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/storage"
)

// TestIndexBackfill: a member indexes the messages after its snapshot
// live, then backfills the older range. The backfill's files, rolled when
// full, sort before the live one (also after a reload), queries find the
// older messages once each, and an interrupted backfill, started again,
// skips what its completed files hold and indexes the rest.
func TestIndexBackfill(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
		s := newTestIndexService(t, fsys, dir, 16, 11, clock) // 10 keys per file
		base := clock.t.UnixMilli() - 3_600_000               // the older range was stored an hour ago
		// After the snapshot (position 10000 on): live.
		for i := 100; i < 103; i++ {
			if err := s.BuildIndex("T", "", fmt.Sprintf("U%03d", i), 0, int64(i)*100, clock.t.UnixMilli()); err != nil {
				t.Fatal(err)
			}
		}
		req := func(i int) *DispatchRequest {
			return &DispatchRequest{Topic: "T", Keys: fmt.Sprintf("K%d", i%4), UniqKey: fmt.Sprintf("U%03d", i),
				CommitLogOffset: int64(i) * 100, StoreTimestamp: base + int64(i)*1000}
		}
		// The first attempt indexes 0..11 (two keys each, so two full files
		// moved in) and stops.
		b, err := s.BeginBackfill()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			if err := b.Dispatch(req(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if s.Files() != 3 {
			t.Fatalf("%d files after the interrupted backfill, want the live one and two moved in (ten keys each)", s.Files())
		}
		// The second attempt goes over the whole range.
		if b, err = s.BeginBackfill(); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if err := b.Dispatch(req(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if b.Indexed != 30 {
			t.Fatalf("the second attempt indexed %d messages, want the 30 not in the moved-in files", b.Indexed)
		}
		check := func(s *IndexService) {
			t.Helper()
			for i := 0; i < 40; i++ {
				if r := s.QueryOffset("T", fmt.Sprintf("U%03d", i), 10, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{int64(i) * 100}) {
					t.Fatalf("U%03d: %v", i, r.PhyOffsets)
				}
			}
			if r := s.QueryOffset("T", "K1", 100, 0, math.MaxInt64); len(r.PhyOffsets) != 10 {
				t.Fatalf("K1: %v", r.PhyOffsets)
			}
			if r := s.QueryOffset("T", "U101", 10, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{10100}) {
				t.Fatalf("live U101: %v", r.PhyOffsets)
			}
			r := s.QueryOffset("T", "K2", 100, base+10_000, base+20_000)
			if !slices.Equal(r.PhyOffsets, []int64{1800, 1400, 1000}) {
				t.Fatalf("K2 by time: %v", r.PhyOffsets)
			}
			s.mu.RLock()
			defer s.mu.RUnlock()
			for i := 1; i < len(s.files); i++ {
				if s.files[i-1].Name() >= s.files[i].Name() || s.files[i-1].EndPhyOffset() >= s.files[i].BeginPhyOffset() {
					t.Fatalf("files out of order: %s [%d, %d] before %s [%d, %d]", s.files[i-1].Name(), s.files[i-1].BeginPhyOffset(),
						s.files[i-1].EndPhyOffset(), s.files[i].Name(), s.files[i].BeginPhyOffset(), s.files[i].EndPhyOffset())
				}
			}
		}
		check(s)
		// New live messages still go to the live file.
		if err := s.BuildIndex("T", "", "U103", 0, 10300, clock.t.UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if r := s.QueryOffset("T", "U103", 10, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{10300}) {
			t.Fatalf("live U103: %v", r.PhyOffsets)
		}
		if _, err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := newTestIndexService(t, fsys, dir, 16, 11, clock)
		defer s2.Close()
		check(s2)
		// A backfill after everything was indexed adds nothing.
		b, err = s2.BeginBackfill()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if err := b.Dispatch(req(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil || b.Indexed != 0 {
			t.Fatalf("a repeated backfill indexed %d (%v)", b.Indexed, err)
		}
	})
}

// TestIndexBackfillNamesAcrossClocks: backfilled messages stored by a
// leader whose clock ran ahead of this member's (their store times are
// after the live file's name) still get files named before the live one,
// so a reload keeps the order.
func TestIndexBackfillNamesAcrossClocks(t *testing.T) {
	fsys := storage.OSFS()
	dir := t.TempDir()
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	s := newTestIndexService(t, fsys, dir, 16, 11, clock)
	if err := s.BuildIndex("T", "", "live", 0, 50_000, clock.t.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	b, err := s.BeginBackfill()
	if err != nil {
		t.Fatal(err)
	}
	ahead := clock.t.Add(time.Hour).UnixMilli()
	for i := range 12 { // two files
		if err := b.Dispatch(&DispatchRequest{Topic: "T", UniqKey: fmt.Sprintf("U%d", i), CommitLogOffset: int64(i) * 100, StoreTimestamp: ahead + int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newTestIndexService(t, fsys, dir, 16, 11, clock)
	defer s2.Close()
	s2.mu.RLock()
	var begins []int64
	for _, f := range s2.files {
		begins = append(begins, f.BeginPhyOffset())
	}
	s2.mu.RUnlock()
	if !slices.Equal(begins, []int64{0, 1000, 50_000}) {
		t.Fatalf("files after a reload begin at %v, want the backfilled ones first", begins)
	}
	for _, k := range []string{"U0", "U11", "live"} {
		if r := s2.QueryOffset("T", k, 10, 0, math.MaxInt64); len(r.PhyOffsets) != 1 {
			t.Fatalf("%s: %v", k, r.PhyOffsets)
		}
	}
}

// TestIndexBackfillCoveredTakenBefore: the live tail appends to the last
// kept file (it had room), so that file's range comes to span older
// messages it never held. A backfill begun with the ranges taken before
// the live tail started indexes them; one begun afterwards would take them
// as indexed.
func TestIndexBackfillCoveredTakenBefore(t *testing.T) {
	fsys := storage.OSFS()
	dir := t.TempDir()
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	s := newTestIndexService(t, fsys, dir, 16, 11, clock)
	defer s.Close()
	if err := s.BuildIndex("T", "", "kept", 0, 100, clock.t.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	before := s.CoveredRanges()
	if err := s.BuildIndex("T", "", "live", 0, 90_000, clock.t.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if after := s.CoveredRanges(); len(after) != 1 || after[0][1] != 90_000 {
		t.Fatalf("the live tail did not widen the kept file: %v", after)
	}
	b, err := s.BeginBackfillCovered(before)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := 1; i <= 3; i++ {
		if err := b.Dispatch(&DispatchRequest{Topic: "T", UniqKey: fmt.Sprintf("old%d", i), CommitLogOffset: int64(i) * 1000,
			StoreTimestamp: clock.t.UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if b.Indexed != 3 || len(b.Moved) != 1 {
		t.Fatalf("indexed %d, moved %v: want 3 in one file", b.Indexed, b.Moved)
	}
	for _, k := range []string{"kept", "old1", "old3", "live"} {
		if r := s.QueryOffset("T", k, 10, 0, math.MaxInt64); len(r.PhyOffsets) != 1 {
			t.Fatalf("%s: %v", k, r.PhyOffsets)
		}
	}
}
