package store

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
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
	if err := f.PutKey("k", 9, 1); !errors.Is(err, ErrFileFull) {
		t.Fatalf("err %v, want ErrFileFull", err)
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
	if f.BeginPhyOffset() != 777 || f.EndTimestamp() != 12345 || f.IndexCount() != 1 {
		t.Fatalf("header %+v", f.hdr)
	}
}
