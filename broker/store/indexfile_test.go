package store

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// memIndexStorage is an indexStorage over a plain byte slice.
type memIndexStorage struct{ b []byte }

func (m *memIndexStorage) Bytes() []byte { return m.b }
func (m *memIndexStorage) WriteAt(p []byte, pos int) error {
	copy(m.b[pos:], p)
	return nil
}

func newMemIndexFile(t *testing.T, slots, items int) *IndexFile {
	t.Helper()
	f, err := newIndexFile("mem", &memIndexStorage{b: make([]byte, IndexFileSize(slots, items))}, slots, items, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestJavaStringHashCode(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"hello", 99162322},
		{"Aa", 2112},
		{"BB", 2112},
		{"polygenelubricants", math.MinInt32},
		{"\U0001F600", 55357*31 + 56832}, // a surrogate pair counts as two UTF-16 units
		{"TopicTest#KEY1", javaStringHashCode("TopicTest#KEY1")},
	} {
		if got := javaStringHashCode(c.s); got != c.want {
			t.Errorf("hashCode(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	if got := indexKeyHash("polygenelubricants"); got != 0 {
		t.Errorf("abs(MinInt32) must map to 0 like RocketMQ, got %d", got)
	}
}

func TestIndexFileNameLooksLikeRocketMQ(t *testing.T) {
	ts := time.Date(2024, 3, 5, 7, 8, 9, 123_000_000, time.Local)
	if got := indexFileName(ts); got != "20240305070809123" {
		t.Fatalf("name %q", got)
	}
}

func TestIndexFilePutAndSelect(t *testing.T) {
	f := newMemIndexFile(t, 100, 50)
	base := int64(1_700_000_000_000)
	for i := range 10 {
		if err := f.PutKey(indexKey("T", "k"), int64(i*100), base+int64(i)*1000); err != nil {
			t.Fatal(err)
		}
		if err := f.PutKey(indexKey("T", "other"), int64(i*100+1), base+int64(i)*1000); err != nil {
			t.Fatal(err)
		}
	}
	got := f.SelectPhyOffsets(nil, indexKey("T", "k"), 100, 0, math.MaxInt64)
	want := []int64{900, 800, 700, 600, 500, 400, 300, 200, 100, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v want %v (newest first)", got, want)
	}
	if got := f.SelectPhyOffsets(nil, indexKey("T", "k"), 3, 0, math.MaxInt64); !slices.Equal(got, want[:3]) {
		t.Fatalf("max 3: got %v", got)
	}
	if got := f.SelectPhyOffsets(nil, indexKey("T", "missing"), 10, 0, math.MaxInt64); len(got) != 0 {
		t.Fatalf("missing key found %v", got)
	}
	// Time range [base+3s, base+5s] covers items 3..5.
	if got := f.SelectPhyOffsets(nil, indexKey("T", "k"), 10, base+3000, base+5000); !slices.Equal(got, []int64{500, 400, 300}) {
		t.Fatalf("time range: got %v", got)
	}
	if f.BeginTimestamp() != base || f.EndTimestamp() != base+9000 || f.BeginPhyOffset() != 0 || f.EndPhyOffset() != 901 {
		t.Fatalf("header %+v", f.hdr)
	}
	if f.IndexCount() != 21 {
		t.Fatalf("index count %d", f.IndexCount())
	}
	if !f.IsTimeMatched(base+500, base+700) || f.IsTimeMatched(base+20_000, base+30_000) || !f.IsTimeMatched(0, math.MaxInt64) {
		t.Fatal("IsTimeMatched")
	}
}

func TestIndexFileCollisionsInOneSlot(t *testing.T) {
	// One slot: every key lands in the same chain; keys must still be told apart
	// by their stored hash, and "Aa"/"BB" (same Java hash) are both returned
	// for either key, exactly as RocketMQ does (callers check the real key).
	f := newMemIndexFile(t, 1, 64)
	keys := []string{"a", "b", "c", "Aa", "BB"}
	for i := range 40 {
		k := keys[i%len(keys)]
		if err := f.PutKey(k, int64(i), 1000+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	got := f.SelectPhyOffsets(nil, "b", 100, 0, math.MaxInt64)
	want := []int64{36, 31, 26, 21, 16, 11, 6, 1}
	if !slices.Equal(got, want) {
		t.Fatalf("b: got %v want %v", got, want)
	}
	if got := f.SelectPhyOffsets(nil, "Aa", 100, 0, math.MaxInt64); len(got) != 16 {
		t.Fatalf("Aa/BB collide in Java hash: want 16 results, got %v", got)
	}
	if f.hdr.hashSlotCount != 1 {
		t.Fatalf("hashSlotCount %d, want 1 used slot", f.hdr.hashSlotCount)
	}
}

func TestIndexFileFull(t *testing.T) {
	f := newMemIndexFile(t, 8, 4)
	for i := range 3 { // item 0 is reserved: 4 items hold 3 keys
		if err := f.PutKey("k", int64(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if !f.IsWriteFull() {
		t.Fatal("not full")
	}
	if err := f.PutKey("k", 9, 1); !errors.Is(err, storage.ErrFileFull) {
		t.Fatalf("err %v, want storage.ErrFileFull", err)
	}
}

func TestIndexFileReopenKeepsContent(t *testing.T) {
	st := &memIndexStorage{b: make([]byte, IndexFileSize(16, 16))}
	f, err := newIndexFile("x", st, 16, 16, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := f.PutKey("k", int64(i), 5000); err != nil {
			t.Fatal(err)
		}
	}
	g, err := newIndexFile("x", st, 16, 16, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.hdr != f.hdr {
		t.Fatalf("header after reopen %+v, want %+v", g.hdr, f.hdr)
	}
	if got := g.SelectPhyOffsets(nil, "k", 10, 0, math.MaxInt64); !slices.Equal(got, []int64{4, 3, 2, 1, 0}) {
		t.Fatalf("got %v", got)
	}
	// A geometry that does not fit the file is refused, not misread.
	if _, err := newIndexFile("x", st, 32, 16, 0, 0); !errors.Is(err, ErrCorruptFile) {
		t.Fatalf("err %v", err)
	}
}

func TestIndexFileInheritsPreviousEnd(t *testing.T) {
	f, err := newIndexFile("y", &memIndexStorage{b: make([]byte, IndexFileSize(4, 4))}, 4, 4, 777, 12345)
	if err != nil {
		t.Fatal(err)
	}
	if f.BeginPhyOffset() != 777 || f.BeginTimestamp() != 12345 || f.EndTimestamp() != 12346 || f.IndexCount() != 1 {
		t.Fatalf("header %+v", f.hdr)
	}
}

func newTestIndexService(t *testing.T, fsys storage.FS, dir string, slots, items int, clock *manualClock) *IndexService {
	t.Helper()
	s := NewIndexService(fsys, filepath.Join(dir, "index"), slots, items, clock.Now, nil)
	if err := s.Load(true, 0); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIndexServiceBuildQueryRollReload(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
		s := newTestIndexService(t, fsys, dir, 16, 11, clock) // 10 keys per file
		base := clock.t.UnixMilli()
		// 30 messages, each with a UNIQ_KEY and two KEYS: 90 keys → 9 files.
		for i := range 30 {
			uniq := fmt.Sprintf("U%03d", i)
			keys := fmt.Sprintf("order-%d  shared", i%3) // double space: empty key skipped
			if err := s.BuildIndex("T", keys, uniq, 0, int64(i)*100, base+int64(i)*1000); err != nil {
				t.Fatal(err)
			}
			clock.t = clock.t.Add(time.Millisecond) // files created within ms of each other
		}
		if s.Files() != 9 {
			t.Fatalf("%d files, want 9", s.Files())
		}
		check := func(s *IndexService) {
			t.Helper()
			r := s.QueryOffset("T", "U017", 10, 0, math.MaxInt64)
			if !slices.Equal(r.PhyOffsets, []int64{1700}) {
				t.Fatalf("U017: %v", r.PhyOffsets)
			}
			if r.IndexLastUpdatePhyOffset != 2900 || r.IndexLastUpdateTimestamp != base+29000 {
				t.Fatalf("last update %d %d", r.IndexLastUpdatePhyOffset, r.IndexLastUpdateTimestamp)
			}
			r = s.QueryOffset("T", "order-1", 100, 0, math.MaxInt64)
			want := []int64{2800, 2500, 2200, 1900, 1600, 1300, 1000, 700, 400, 100}
			if !slices.Equal(r.PhyOffsets, want) {
				t.Fatalf("order-1 across files: %v", r.PhyOffsets)
			}
			if r := s.QueryOffset("T", "shared", 4, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{2900, 2800, 2700, 2600}) {
				t.Fatalf("shared max 4: %v", r.PhyOffsets)
			}
			r = s.QueryOffset("T", "shared", 100, base+10_000, base+12_000)
			if !slices.Equal(r.PhyOffsets, []int64{1200, 1100, 1000}) {
				t.Fatalf("time range: %v", r.PhyOffsets)
			}
			if r := s.QueryOffset("Other", "shared", 10, 0, math.MaxInt64); len(r.PhyOffsets) != 0 {
				t.Fatalf("other topic: %v", r.PhyOffsets)
			}
		}
		check(s)
		// Replays are skipped.
		if err := s.BuildIndex("T", "shared", "U017", 0, 1700, base+17000); err != nil {
			t.Fatal(err)
		}
		if r := s.QueryOffset("T", "U017", 10, 0, math.MaxInt64); len(r.PhyOffsets) != 1 {
			t.Fatalf("replay indexed twice: %v", r.PhyOffsets)
		}
		// Rolled-back transactional messages are not indexed.
		if err := s.BuildIndex("T", "rb", "", wire.SysFlagTransRollback, 3000, base+30000); err != nil {
			t.Fatal(err)
		}
		if r := s.QueryOffset("T", "rb", 10, 0, math.MaxInt64); len(r.PhyOffsets) != 0 {
			t.Fatalf("rollback indexed: %v", r.PhyOffsets)
		}
		ts, err := s.Flush()
		if err != nil || ts != base+29000 {
			t.Fatalf("flush: %d %v", ts, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := newTestIndexService(t, fsys, dir, 16, 11, clock)
		defer s2.Close()
		if s2.Files() != 9 || s2.RebuildFrom() != -1 {
			t.Fatalf("reload: %d files, rebuildFrom %d", s2.Files(), s2.RebuildFrom())
		}
		check(s2)
		// Retention: files whose entries all point below 1500 go (the first
		// four end at 300, 600, 900, 1300).
		n, err := s2.DeleteExpired(1500)
		if err != nil || n != 4 || s2.Files() != 5 {
			t.Fatalf("delete expired: %d %v, %d left", n, err, s2.Files())
		}
		if r := s2.QueryOffset("T", "order-1", 100, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{2800, 2500, 2200, 1900, 1600, 1300}) {
			t.Fatalf("after delete: %v", r.PhyOffsets)
		}
	})
}

func TestIndexServiceCrashDropsFilesPastCheckpoint(t *testing.T) {
	fsys := storage.NewFaultFS(5)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	s := newTestIndexService(t, fsys, "/store", 16, 11, clock)
	for i := range 25 { // 25 keys: files of 10, 10, 5
		if err := s.BuildIndex("T", "k", "", 0, int64(i)*100, int64(1000+i)); err != nil {
			t.Fatal(err)
		}
		clock.t = clock.t.Add(time.Millisecond)
	}
	s.Flush()
	s.Close()
	// Checkpoint says entries up to store time 1012 are durable: the third
	// file (1020..1024) and the second (1010..1019) are newer and dropped.
	s2 := NewIndexService(fsys, "/store/index", 16, 11, clock.Now, nil)
	if err := s2.Load(false, 1012); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Files() != 1 || s2.RebuildFrom() != 900 {
		t.Fatalf("%d files, rebuildFrom %d", s2.Files(), s2.RebuildFrom())
	}
	// Re-dispatching from RebuildFrom restores every entry exactly once.
	for i := 9; i < 25; i++ {
		if err := s2.BuildIndex("T", "k", "", 0, int64(i)*100, int64(1000+i)); err != nil {
			t.Fatal(err)
		}
		clock.t = clock.t.Add(time.Millisecond)
	}
	if r := s2.QueryOffset("T", "k", 100, 0, math.MaxInt64); len(r.PhyOffsets) != 25 || r.PhyOffsets[0] != 2400 || r.PhyOffsets[24] != 0 {
		t.Fatalf("after rebuild: %v", r.PhyOffsets)
	}
}

func TestNextIndexFileName(t *testing.T) {
	if got := nextIndexFileName("20240305070809999"); got != "20240305070810000" {
		t.Fatalf("got %s", got)
	}
}

// TestTopicKeyHashMatchesConcatenation: the dispatcher hashes topic#key
// without building the string; the result must be RocketMQ's hash of the
// concatenation, or files written by one could not be searched by the other.
func TestTopicKeyHashMatchesConcatenation(t *testing.T) {
	cases := [][2]string{{"", ""}, {"T", "k"}, {"TopicTest", "7F0000010000000000000000000000AA"},
		{"订单", "键😀"}, {"a\xffb", "\xc3"}, {strings.Repeat("x", 300), "y"}}
	for _, c := range cases {
		if got, want := topicKeyHash(c[0], c[1]), indexKeyHash(indexKey(c[0], c[1])); got != want {
			t.Errorf("topicKeyHash(%q, %q) = %d, want %d", c[0], c[1], got, want)
		}
	}
}

// TestIndexServiceCheckpointAfterCrash: whatever pages of the live index
// file reached the disk (FaultFS tears at page granularity; 2,048 slots
// make the file three pages), the checkpoint's index time has a crash
// recovery drop the live file when it took keys no flush covered, keep the
// sealed one, and indexing again from RebuildFrom restores every key
// exactly once. The periodic flush syncs a new live file once and then
// leaves it to the page cache.
func TestIndexServiceCheckpointAfterCrash(t *testing.T) {
	const slots, items = 2048, 11 // 10 keys per file
	type put struct {
		i  int
		ts int64
	}
	// Keys 0..9 fill the sealed file (store times 1000..1009).
	sealed := make([]put, 10)
	for i := range sealed {
		sealed[i] = put{i, int64(1000 + i)}
	}
	const (
		dropped = iota
		kept
		either // with write-back in offset order (the header page first)
	)
	cases := []struct {
		name string
		// before and after the checkpoint whose index time the crash finds
		before, after []put
		full          bool // the checkpoint is a snapshot's (Flush), not the periodic one
		want          int
	}{
		{name: "periodic, keys since", before: []put{{10, 1010}, {11, 1011}}, after: []put{{12, 1012}, {13, 1013}}},
		{name: "periodic, keys before only", before: []put{{10, 1010}, {11, 1011}}},
		{name: "periodic, clock behind", before: []put{{10, 1010}, {11, 1011}}, after: []put{{12, 990}, {13, 991}}},
		{name: "rollover with the clock behind", before: []put{{10, 900}, {11, 901}}, after: []put{{12, 902}}},
		{name: "periodic, idle since", before: []put{{10, 1010}}, want: kept},
		{name: "periodic after idle, same millisecond", before: []put{{10, 1010}}, after: []put{{11, 1010}}, want: either},
		{name: "snapshot, idle since", before: []put{{10, 1010}, {11, 1011}}, full: true, want: kept},
		{name: "snapshot, same millisecond", before: []put{{10, 1010}, {11, 1011}}, after: []put{{12, 1011}, {13, 1011}}, full: true, want: either},
	}
	for _, tc := range cases {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/%d", tc.name, seed), func(t *testing.T) {
				fsys := storage.NewFaultFS(seed)
				clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
				s := newTestIndexService(t, fsys, "/store", slots, items, clock)
				apply := func(s *IndexService, ps []put) {
					t.Helper()
					for _, p := range ps {
						if err := s.BuildIndex("T", "k", "", 0, int64(p.i)*100, p.ts); err != nil {
							t.Fatal(err)
						}
						clock.t = clock.t.Add(time.Millisecond)
					}
				}
				apply(s, sealed)
				apply(s, tc.before[:1])
				// The first periodic flush after the rollover syncs the new
				// live file; the next leaves it alone.
				if _, err := s.FlushSealed(); err != nil {
					t.Fatal(err)
				}
				apply(s, tc.before[1:])
				flush := s.FlushSealed
				if tc.full {
					flush = s.Flush
				}
				ckpt, err := flush()
				if err != nil {
					t.Fatal(err)
				}
				if ckpt < 1009 {
					t.Fatalf("checkpoint index time %d: the sealed file (end 1009) would be dropped", ckpt)
				}
				apply(s, tc.after)
				crash := storage.CrashOptions{TearPages: seed%2 == 1}
				if tc.want == either {
					crash = storage.CrashOptions{Tear: true}
				}
				crashed := fsys.Crash(crash)
				_ = s.Close()
				if !crash.TearPages && !crash.Tear && !tc.full { // only flushes reached the disk
					img := newTestIndexService(t, crashed, "/store", slots, items, clock)
					if r := img.QueryOffset("T", "k", 100, 0, math.MaxInt64); len(r.PhyOffsets) != 11 {
						t.Fatalf("the periodic flush wrote the live file back: %d keys on disk, want 11", len(r.PhyOffsets))
					}
					img.Close()
				}
				s2 := NewIndexService(crashed, "/store/index", slots, items, clock.Now, nil)
				if err := s2.Load(false, ckpt); err != nil {
					t.Fatal(err)
				}
				defer s2.Close()
				isDropped := s2.Files() == 1 && s2.RebuildFrom() == 900
				isKept := s2.Files() == 2 && s2.RebuildFrom() == -1
				if !(isDropped && tc.want != kept || isKept && tc.want != dropped) {
					t.Fatalf("after the crash: %d files, rebuildFrom %d (want %d: 0 dropped, 1 kept, 2 either)", s2.Files(), s2.RebuildFrom(), tc.want)
				}
				all := slices.Concat(sealed, tc.before, tc.after)
				apply(s2, all[9:]) // the dispatcher from RebuildFrom, or the re-apply
				r := s2.QueryOffset("T", "k", 100, 0, math.MaxInt64)
				if n := len(all); len(r.PhyOffsets) != n || r.PhyOffsets[0] != int64(n-1)*100 || r.PhyOffsets[n-1] != 0 {
					t.Fatalf("after indexing again: %v", r.PhyOffsets)
				}
			})
		}
	}
}

// TestIndexServiceCrashAfterRollover: a file created after the last
// checkpoint may not have its header on disk (it reads as a fresh file,
// whatever slot pages were written back); it is dropped, the file the
// checkpoint covered is kept, and indexing again from RebuildFrom
// restores every key.
func TestIndexServiceCrashAfterRollover(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fsys, clock, put := newCrashIndexRig(t, seed, func(i int) int64 { return int64(1000 + i) })
			s := newTestIndexService(t, fsys, "/store", 2048, 11, clock)
			for i := range 10 {
				put(s, i)
			}
			ckpt, err := s.FlushSealed()
			if err != nil {
				t.Fatal(err)
			}
			for i := 10; i < 14; i++ { // a new file
				put(s, i)
			}
			_, s2 := crashAndLoad(t, fsys, s, storage.CrashOptions{TearPages: true}, ckpt, clock)
			if s2.Files() != 1 || s2.RebuildFrom() != 900 {
				t.Fatalf("after the crash: %d files, rebuildFrom %d; want the first kept, 900", s2.Files(), s2.RebuildFrom())
			}
			indexAgain(t, s2, put, 14)
		})
	}
}

// TestIndexServiceFloorAfterRestart: after a crash recovery dropped the
// live file, the keys indexed again start a new file whose inherited end
// time is below the checkpoint's; the floor Load sets moves it past, so a
// second crash before the next checkpoint drops the new file too.
func TestIndexServiceFloorAfterRestart(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			// Store times 1000 (keys 0..9), 1010, 1020, 1030.
			fsys, clock, put := newCrashIndexRig(t, seed, func(i int) int64 { return int64(1000 + 10*max(0, i-9)) })
			s := newTestIndexService(t, fsys, "/store", 2048, 11, clock)
			for i := range 12 { // a sealed file (end 1000) and keys 10, 11 in the live one
				put(s, i)
			}
			if _, err := s.FlushSealed(); err != nil { // syncs the new live file: end 1020
				t.Fatal(err)
			}
			put(s, 12)
			ckpt, err := s.FlushSealed()
			if err != nil || ckpt != 1019 {
				t.Fatalf("checkpoint: %d %v, want 1019", ckpt, err)
			}
			crashed, s2 := crashAndLoad(t, fsys, s, storage.CrashOptions{}, ckpt, clock)
			if s2.Files() != 1 || s2.RebuildFrom() != 900 {
				t.Fatalf("first crash: %d files, rebuildFrom %d", s2.Files(), s2.RebuildFrom())
			}
			put(s2, 9)
			put(s2, 10) // store time 1010: below the checkpoint's 1019
			_, s3 := crashAndLoad(t, crashed, s2, storage.CrashOptions{TearPages: true}, ckpt, clock)
			if s3.Files() != 1 || s3.RebuildFrom() != 900 {
				t.Fatalf("second crash: %d files, rebuildFrom %d; want the new file dropped", s3.Files(), s3.RebuildFrom())
			}
			indexAgain(t, s3, put, 13)
		})
	}
}

// newCrashIndexRig returns a FaultFS, a clock, and put, which indexes key
// "k" of message i (CommitLog offset 100·i) at store time ts(i).
func newCrashIndexRig(t *testing.T, seed uint64, ts func(i int) int64) (*storage.FaultFS, *manualClock, func(*IndexService, int)) {
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	put := func(s *IndexService, i int) {
		t.Helper()
		if err := s.BuildIndex("T", "k", "", 0, int64(i)*100, ts(i)); err != nil {
			t.Fatal(err)
		}
		clock.t = clock.t.Add(time.Millisecond)
	}
	return storage.NewFaultFS(seed), clock, put
}

// crashAndLoad crashes fsys under s and loads the index of 10-key files
// the crash left, as a start after a crash with checkpoint index time
// ckpt does.
func crashAndLoad(t *testing.T, fsys *storage.FaultFS, s *IndexService, opts storage.CrashOptions, ckpt int64, clock *manualClock) (*storage.FaultFS, *IndexService) {
	t.Helper()
	crashed := fsys.Crash(opts)
	_ = s.Close() // its writes fail: the disk is gone
	s2 := NewIndexService(crashed, "/store/index", 2048, 11, clock.Now, nil)
	if err := s2.Load(false, ckpt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return crashed, s2
}

// indexAgain puts keys 9..n-1 again, as the dispatcher does from
// RebuildFrom 900, and checks that all n keys are found, each once.
func indexAgain(t *testing.T, s *IndexService, put func(*IndexService, int), n int) {
	t.Helper()
	for i := 9; i < n; i++ {
		put(s, i)
	}
	r := s.QueryOffset("T", "k", 100, 0, math.MaxInt64)
	if len(r.PhyOffsets) != n || r.PhyOffsets[0] != int64(n-1)*100 || r.PhyOffsets[n-1] != 0 {
		t.Fatalf("after indexing again: %v", r.PhyOffsets)
	}
}
