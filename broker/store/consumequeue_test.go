package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// forEachFS runs a contract test over the real file system and the fault FS.
func forEachFS(t *testing.T, fn func(t *testing.T, fsys storage.FS, dir string)) {
	t.Run("osfs", func(t *testing.T) { fn(t, storage.OSFS(), t.TempDir()) })
	t.Run("faultfs", func(t *testing.T) { fn(t, storage.NewFaultFS(7), "/store") })
}

// unitN is the test unit for message n: 100-byte messages laid end to end.
func unitN(n int64) CQUnit { return CQUnit{PhyOffset: n * 100, Size: 100, TagsCode: n % 7} }

func openTestCQStore(t *testing.T, fsys storage.FS, dir string, units int) *ConsumeQueueStore {
	t.Helper()
	s := NewConsumeQueueStore(fsys, filepath.Join(dir, "consumequeue"), units, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	return s
}

func appendUnits(t *testing.T, cq *ConsumeQueue, from, to int64) {
	t.Helper()
	for n := from; n < to; n++ {
		off, dup, err := cq.Append(unitN(n))
		if err != nil || dup || off != n {
			t.Fatalf("append %d: off %d dup %v err %v", n, off, dup, err)
		}
	}
}

func TestConsumeQueuePutReadMinMax(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 10)
		defer s.Close()
		cq, err := s.FindOrCreate("T", 3)
		if err != nil {
			t.Fatal(err)
		}
		if cq.MinOffset() != 0 || cq.MaxOffset() != 0 {
			t.Fatalf("empty: [%d,%d)", cq.MinOffset(), cq.MaxOffset())
		}
		if _, err := cq.Read(0, 32); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("read empty: %v", err)
		}
		appendUnits(t, cq, 0, 25)
		if cq.MinOffset() != 0 || cq.MaxOffset() != 25 || cq.MaxPhysicOffset() != 2500 {
			t.Fatalf("[%d,%d) maxPhy %d", cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicOffset())
		}
		if got := len(cq.mfq.Files()); got != 3 {
			t.Fatalf("%d files, want 3 of 10 units", got)
		}
		// A batch stops at its file's end; the next one continues.
		for _, c := range []struct{ at, max, wantLen int64 }{{0, 32, 10}, {7, 32, 3}, {10, 4, 4}, {20, 32, 5}, {24, 32, 1}} {
			b, err := cq.Read(c.at, int(c.max))
			if err != nil {
				t.Fatalf("read %d: %v", c.at, err)
			}
			if int64(b.Len()) != c.wantLen || b.StartOffset() != c.at {
				t.Fatalf("read %d max %d: len %d start %d", c.at, c.max, b.Len(), b.StartOffset())
			}
			for i := range b.Len() {
				if u := b.Unit(i); u != unitN(c.at+int64(i)) {
					t.Fatalf("unit %d = %+v", c.at+int64(i), u)
				}
			}
			b.Release()
		}
		if _, err := cq.Read(25, 1); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("read past end: %v", err)
		}
		if u, err := cq.Get(13); err != nil || u != unitN(13) {
			t.Fatalf("get 13: %+v %v", u, err)
		}
		if s.MaxPhysicOffset() != 2500 {
			t.Fatalf("store max phy %d", s.MaxPhysicOffset())
		}
	})
}

func TestConsumeQueueIdempotentPut(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 10)
		defer s.Close()
		cq, _ := s.FindOrCreate("T", 0)
		appendUnits(t, cq, 0, 12)
		// Same unit at an existing offset: no-op.
		if err := cq.Put(5, unitN(5)); err != nil {
			t.Fatalf("re-put: %v", err)
		}
		if err := cq.Put(12, unitN(12)); err != nil || cq.MaxOffset() != 13 {
			t.Fatalf("put at end: %v max %d", err, cq.MaxOffset())
		}
		// A different message at an existing offset, or a gap: refused.
		if err := cq.Put(5, unitN(6)); !errors.Is(err, ErrCorruptFile) {
			t.Fatalf("conflicting put: %v", err)
		}
		if err := cq.Put(20, unitN(20)); !errors.Is(err, ErrCorruptFile) {
			t.Fatalf("gap put: %v", err)
		}
		// Replaying a dispatched message returns its offset, adds nothing.
		off, dup, err := cq.Append(unitN(7))
		if err != nil || !dup || off != 7 || cq.MaxOffset() != 13 {
			t.Fatalf("replay: off %d dup %v err %v max %d", off, dup, err, cq.MaxOffset())
		}
		if _, _, err := cq.Append(CQUnit{PhyOffset: 150, Size: 10}); !errors.Is(err, ErrCorruptFile) {
			t.Fatalf("unknown old offset: %v", err)
		}
	})
}

func TestConsumeQueueSearchByTimestamp(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 8)
		defer s.Close()
		cq, _ := s.FindOrCreate("T", 0)
		appendUnits(t, cq, 0, 30)
		// Message n was stored at 1000 + 10*(n/2): pairs share a timestamp.
		minPhy := int64(0)
		storeTime := func(phy int64, size int32) (int64, error) {
			if phy < minPhy {
				return 0, ErrOutOfRange
			}
			return 1000 + 10*(phy/100/2), nil
		}
		for _, c := range []struct{ ts, want int64 }{
			{0, 0}, {1000, 0}, {1001, 2}, {1010, 2}, {1075, 16}, {1140, 28}, {1145, 30}, {9999, 30},
		} {
			got, err := cq.SearchByTimestamp(c.ts, storeTime)
			if err != nil || got != c.want {
				t.Errorf("search %d = %d (%v), want %d", c.ts, got, err, c.want)
			}
		}
		// UPPER: the last message stored at or before the time (the first
		// one when every message is later).
		for _, c := range []struct{ ts, want int64 }{
			{0, 0}, {1000, 1}, {1001, 1}, {1010, 3}, {1075, 15}, {1140, 29}, {9999, 29},
		} {
			got, err := cq.SearchUpperByTimestamp(c.ts, storeTime)
			if err != nil || got != c.want {
				t.Errorf("upper search %d = %d (%v), want %d", c.ts, got, err, c.want)
			}
		}
		// Messages whose CommitLog bytes are gone count as older than anything.
		minPhy = 1000
		if got, _ := cq.SearchByTimestamp(0, storeTime); got != 10 {
			t.Errorf("search with messages 0..9 gone = %d, want 10", got)
		}
	})
}

func TestConsumeQueueTruncateAndReload(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 10)
		cq, _ := s.FindOrCreate("T", 1)
		appendUnits(t, cq, 0, 27)
		// The CommitLog was recovered to 1550: messages 16+ (at 1600..) are gone,
		// message 15 (1500..1600) starts below the cut and stays.
		if err := s.TruncateDirtyLogicFiles(1550); err != nil {
			t.Fatal(err)
		}
		if cq.MaxOffset() != 16 || cq.MaxPhysicOffset() != 1600 {
			t.Fatalf("after truncate: max %d maxPhy %d", cq.MaxOffset(), cq.MaxPhysicOffset())
		}
		if got := len(cq.mfq.Files()); got != 2 {
			t.Fatalf("%d files after truncate, want 2", got)
		}
		// New messages continue densely after the cut.
		appendUnits(t, cq, 16, 18)
		if _, err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s2 := openTestCQStore(t, fsys, dir, 10)
		defer s2.Close()
		cq2 := s2.Get("T", 1)
		if cq2 == nil {
			t.Fatal("queue not found on reload")
		}
		if cq2.MinOffset() != 0 || cq2.MaxOffset() != 18 || cq2.MaxPhysicOffset() != 1800 {
			t.Fatalf("reloaded [%d,%d) maxPhy %d", cq2.MinOffset(), cq2.MaxOffset(), cq2.MaxPhysicOffset())
		}
		for n := int64(0); n < 18; n++ {
			if u, err := cq2.Get(n); err != nil || u != unitN(n) {
				t.Fatalf("reloaded unit %d: %+v %v", n, u, err)
			}
		}
		appendUnits(t, cq2, 18, 21)
		// Truncating everything leaves an empty queue that restarts at 0.
		if err := cq2.TruncateDirty(0); err != nil || cq2.MaxOffset() != 0 || cq2.MaxPhysicOffset() != 0 {
			t.Fatalf("truncate all: %v max %d", err, cq2.MaxOffset())
		}
	})
}

func TestConsumeQueueReloadStopsAtBrokenUnit(t *testing.T) {
	fsys := storage.NewFaultFS(3)
	s := openTestCQStore(t, fsys, "/store", 10)
	cq, _ := s.FindOrCreate("T", 0)
	appendUnits(t, cq, 0, 8)
	// A unit that goes backwards in the CommitLog (stale data) ends the queue.
	var b [CQUnitSize]byte
	unitN(2).encode(b[:])
	if _, err := cq.mfq.Last().Append(b[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openTestCQStore(t, fsys, "/store", 10)
	defer s2.Close()
	if got := s2.Get("T", 0).MaxOffset(); got != 8 {
		t.Fatalf("reloaded max %d, want 8", got)
	}
}

func TestConsumeQueueFillPreBlank(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 10)
		cq, _ := s.FindOrCreate("T", 0)
		// An empty queue may start mid-file (e.g. restored from a snapshot).
		if err := cq.Put(23, unitN(23)); err != nil {
			t.Fatal(err)
		}
		if cq.MinOffset() != 23 || cq.MaxOffset() != 24 || cq.mfq.MinOffset() != 20*CQUnitSize {
			t.Fatalf("[%d,%d) first file at %d", cq.MinOffset(), cq.MaxOffset(), cq.mfq.MinOffset())
		}
		if _, err := cq.Get(22); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("blank unit readable: %v", err)
		}
		appendUnits(t, cq, 24, 26)
		s.Flush()
		s.Close()
		s2 := openTestCQStore(t, fsys, dir, 10)
		defer s2.Close()
		cq2 := s2.Get("T", 0)
		if cq2.MinOffset() != 23 || cq2.MaxOffset() != 26 || cq2.MaxPhysicOffset() != 2600 {
			t.Fatalf("reloaded [%d,%d) maxPhy %d", cq2.MinOffset(), cq2.MaxOffset(), cq2.MaxPhysicOffset())
		}
	})
}

func TestConsumeQueueDeleteExpiredKeepsReadersSafe(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 10)
		defer s.Close()
		cq, _ := s.FindOrCreate("T", 0)
		appendUnits(t, cq, 0, 35)
		held, err := cq.Read(3, 5) // a reader holds the first file
		if err != nil {
			t.Fatal(err)
		}
		if got := cq.RetiredBelow(); got != 0 {
			t.Fatalf("RetiredBelow %d before any retention, want 0", got)
		}
		// The CommitLog now starts at message 22: files 0 and 1 (units 0..19)
		// only point below it.
		n, err := s.DeleteExpired(2200)
		if err != nil || n != 2 {
			t.Fatalf("deleted %d, %v", n, err)
		}
		if cq.MinOffset() != 22 || cq.MaxOffset() != 35 || cq.RetiredBelow() != 2200 {
			t.Fatalf("[%d,%d) retired below %d", cq.MinOffset(), cq.MaxOffset(), cq.RetiredBelow())
		}
		// Every unit from there on is still found by its message's offset.
		for n := int64(22); n < 35; n++ {
			if off, ok, err := cq.OffsetOfPhy(unitN(n).PhyOffset); err != nil || !ok || off != n {
				t.Fatalf("offset of unit %d's message: %d %v %v", n, off, ok, err)
			}
		}
		if _, err := cq.Read(10, 1); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("read deleted: %v", err)
		}
		if u := held.Unit(4); u != unitN(7) {
			t.Fatalf("held batch changed: %+v", u)
		}
		held.Release()
		// Even when everything is below the minimum the last file stays, so
		// MaxOffset survives. Only the units written so far are retired:
		// messages after them get units (cleanUnusedTopic asks past
		// everything; its topic may be created again).
		if _, err := s.DeleteExpired(1 << 40); err != nil {
			t.Fatal(err)
		}
		if cq.MinOffset() != 35 || cq.MaxOffset() != 35 || len(cq.mfq.Files()) != 1 || cq.RetiredBelow() != unitN(34).end() {
			t.Fatalf("all expired: [%d,%d) files %d retired below %d", cq.MinOffset(), cq.MaxOffset(), len(cq.mfq.Files()), cq.RetiredBelow())
		}
		appendUnits(t, cq, 35, 36)
	})
}

func TestConsumeQueueStoreTopicsAndNames(t *testing.T) {
	fsys := storage.NewFaultFS(1)
	s := openTestCQStore(t, fsys, "/store", 10)
	for _, bad := range []string{"", "..", "a/b"} {
		if _, err := s.FindOrCreate(bad, 0); !errors.Is(err, ErrMessageIllegal) {
			t.Errorf("topic %q: %v", bad, err)
		}
	}
	for _, topic := range []string{"A", "%RETRY%g1"} {
		for q := int32(0); q < 3; q++ {
			cq, err := s.FindOrCreate(topic, q)
			if err != nil {
				t.Fatal(err)
			}
			appendUnits(t, cq, 0, int64(q)+1)
		}
	}
	s.Close()
	s = openTestCQStore(t, fsys, "/store", 10)
	defer s.Close()
	if len(s.All()) != 6 || len(s.Queues("%RETRY%g1")) != 3 || s.Get("A", 2).MaxOffset() != 3 {
		t.Fatalf("reload: %d queues", len(s.All()))
	}
	if err := s.DeleteTopic("A"); err != nil {
		t.Fatal(err)
	}
	if s.Get("A", 0) != nil || len(s.All()) != 3 {
		t.Fatal("topic not deleted")
	}
}

func TestConsumeQueueReloadWhenLastFilesLost(t *testing.T) {
	fsys := storage.NewFaultFS(3)
	s := openTestCQStore(t, fsys, "/store", 10)
	cq, _ := s.FindOrCreate("T", 0)
	appendUnits(t, cq, 0, 45)
	// A crash lost the contents of the last three files (never flushed).
	files := cq.mfq.Files()
	for _, mf := range files[2:] {
		if err := mf.WriteAt(make([]byte, mf.Size()), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openTestCQStore(t, fsys, "/store", 10)
	defer s2.Close()
	cq2 := s2.Get("T", 0)
	if cq2.MaxOffset() != 20 || cq2.MaxPhysicOffset() != 2000 {
		t.Fatalf("reloaded max %d maxPhy %d, want 20 and 2000", cq2.MaxOffset(), cq2.MaxPhysicOffset())
	}
	// Replays of kept messages are recognised; lost ones are re-added densely.
	if off, dup, err := cq2.Append(unitN(5)); err != nil || !dup || off != 5 {
		t.Fatalf("replay: %d %v %v", off, dup, err)
	}
	appendUnits(t, cq2, 20, 45)
}

func TestConsumeQueuePutOutOfOrderRefused(t *testing.T) {
	s := openTestCQStore(t, storage.NewFaultFS(1), "/store", 10)
	defer s.Close()
	cq, _ := s.FindOrCreate("T", 0)
	appendUnits(t, cq, 0, 3)
	if err := cq.Put(3, unitN(1)); !errors.Is(err, ErrCorruptFile) || cq.MaxOffset() != 3 {
		t.Fatalf("out-of-order put: %v, max %d", err, cq.MaxOffset())
	}
}
