package timerindex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

func open(t *testing.T, fsys storage.FS, dir string) *Index {
	t.Helper()
	x, err := Open(fsys, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func recs(offsets ...int64) []Record {
	out := make([]Record, len(offsets))
	for i, o := range offsets {
		out[i] = Record{DeliverMs: 1000*o + 7, QueueOffset: o}
	}
	return out
}

func offsetsOf(rs []Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.QueueOffset
	}
	return out
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestIndexAppendReadNext(t *testing.T) {
	x := open(t, storage.OSFS(), t.TempDir())
	if err := x.Append(10, recs(1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(5000, recs(3)); err != nil { // another group directory
		t.Fatal(err)
	}
	if err := x.Append(10, recs(4)); err != nil {
		t.Fatal(err)
	}
	got, total, err := x.Read(10, 1, 10)
	if err != nil || total != 3 || !equal(offsetsOf(got), []int64{2, 4}) {
		t.Fatalf("Read(10,1) = %v %d %v", got, total, err)
	}
	if got[0].DeliverMs != 2007 {
		t.Fatalf("deliver time %d", got[0].DeliverMs)
	}
	if _, total, _ := x.Read(11, 0, 10); total != 0 {
		t.Fatalf("empty bucket holds %d", total)
	}
	for _, c := range []struct {
		from, to, want int64
		ok             bool
	}{{0, 100, 10, true}, {10, 10, 10, true}, {11, 4999, 0, false}, {11, 1 << 40, 5000, true}, {5001, 1 << 40, 0, false}} {
		if b, ok := x.Next(c.from, c.to); ok != c.ok || (ok && b != c.want) {
			t.Errorf("Next(%d,%d) = %d %v, want %d %v", c.from, c.to, b, ok, c.want, c.ok)
		}
	}
	if x.Buckets() != 2 {
		t.Fatalf("Buckets = %d", x.Buckets())
	}
}

// Advance moves what follows the delivered prefix and every bucket between
// the two cursors into the target, and removes the sources.
func TestIndexAdvanceMovesLateRecords(t *testing.T) {
	x := open(t, storage.OSFS(), t.TempDir())
	must(t, x.Append(10, recs(1, 2, 3)))
	must(t, x.Append(12, recs(4)))
	must(t, x.Append(20, recs(5)))
	must(t, x.Append(30, recs(6)))
	must(t, x.Advance(10, 2, 20))
	got, total, err := x.Read(20, 0, 10)
	if err != nil || total != 3 || !equal(offsetsOf(got), []int64{5, 3, 4}) {
		t.Fatalf("bucket 20 = %v (%d) %v", offsetsOf(got), total, err)
	}
	if b, _ := x.Next(0, 100); b != 20 {
		t.Fatalf("first bucket after advance %d", b)
	}
	if m, ok := x.MinQueueOffset(); !ok || m != 1 {
		t.Fatalf("MinQueueOffset = %d %v", m, ok)
	}
	must(t, x.DropBelow(30))
	if b, ok := x.Next(0, 100); !ok || b != 30 || x.Buckets() != 1 {
		t.Fatalf("after DropBelow: %d %v %d buckets", b, ok, x.Buckets())
	}
}

// An advance from a fully delivered bucket to one without records removes
// the delivered records and creates no file for the target: the index is
// empty and pins nothing.
func TestIndexAdvanceToEmptyBucket(t *testing.T) {
	dir := t.TempDir()
	x := open(t, storage.OSFS(), dir)
	must(t, x.Append(10, recs(1, 2)))
	must(t, x.Advance(10, 2, 15))
	if n := x.Buckets(); n != 0 {
		t.Fatalf("%d buckets after the advance", n)
	}
	if m, ok := x.MinQueueOffset(); ok {
		t.Fatalf("MinQueueOffset = %d after every record was delivered", m)
	}
	if _, err := os.Stat(filepath.Join(dir, "0", "15")); !os.IsNotExist(err) {
		t.Fatalf("target bucket file: %v", err)
	}
	// A record that arrived after the leader looked still moves.
	must(t, x.Append(15, recs(3)))
	must(t, x.Append(15+1, recs(4)))
	must(t, x.Advance(15, 0, 20))
	if got, total, err := x.Read(20, 0, 10); err != nil || total != 2 || !equal(offsetsOf(got), []int64{3, 4}) {
		t.Fatalf("bucket 20 = %v (%d) %v", offsetsOf(got), total, err)
	}
}

// Reopening finds the buckets, cuts a torn record and keeps the applied
// mark.
func TestIndexReopen(t *testing.T) {
	dir := t.TempDir()
	x, err := Open(storage.OSFS(), dir, nil)
	must(t, err)
	must(t, x.Append(-3, recs(1)))
	must(t, x.Append(7, recs(2, 3)))
	must(t, x.SetApplied(42))
	must(t, x.Sync())
	must(t, x.Close())
	// A torn append: half a record at the end of bucket 7.
	f, err := os.OpenFile(filepath.Join(dir, "0", "7"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write(make([]byte, RecordSize/2))
	must(t, err)
	f.Close()
	y := open(t, storage.OSFS(), dir)
	if y.Applied() != 42 {
		t.Fatalf("applied %d", y.Applied())
	}
	if got, total, _ := y.Read(7, 0, 10); total != 2 || !equal(offsetsOf(got), []int64{2, 3}) {
		t.Fatalf("bucket 7 after reopen: %v (%d)", got, total)
	}
	if m, ok := y.MinQueueOffset(); !ok || m != 1 {
		t.Fatalf("MinQueueOffset after reopen = %d %v", m, ok)
	}
	if b, ok := y.Next(-100, 100); !ok || b != -3 {
		t.Fatalf("first bucket %d %v", b, ok)
	}
	must(t, y.Append(7, recs(4)))
	if _, total, _ := y.Read(7, 0, 10); total != 3 {
		t.Fatalf("append after the cut: %d records", total)
	}
}

// A record whose bytes were damaged is reported, not returned as data.
func TestIndexCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	x := open(t, storage.OSFS(), dir)
	must(t, x.Append(1, recs(1, 2)))
	must(t, x.Sync()) // the damage is done to the disk's copy
	must(t, x.Close())
	f, err := os.OpenFile(filepath.Join(dir, "0", "1"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte{0xff}, 3)
	must(t, err)
	f.Close()
	y := open(t, storage.OSFS(), dir)
	got, _, err := y.Read(1, 0, 10)
	if err != nil || got[0].QueueOffset != -1 || got[1].QueueOffset != 2 {
		t.Fatalf("read %v %v", got, err)
	}
}

// The in-memory FS of the group tests works too.
func TestIndexOnFaultFS(t *testing.T) {
	x := open(t, storage.NewFaultFS(1), "/data/timer")
	must(t, x.Append(99, recs(1)))
	must(t, x.Sync())
	if _, total, err := x.Read(99, 0, 1); err != nil || total != 1 {
		t.Fatalf("%d %v", total, err)
	}
}

func TestBucketOf(t *testing.T) {
	for ms, want := range map[int64]int64{0: 0, 999: 0, 1000: 1, -1: -1, -1000: -1, -1001: -2} {
		if got := BucketOf(ms); got != want {
			t.Errorf("BucketOf(%d) = %d, want %d", ms, got, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, Record{DeliverMs: 1700000000123, QueueOffset: 42}))
	f.Add(AppendRecord(nil, Record{DeliverMs: -1, QueueOffset: 0}))
	f.Add([]byte{})
	f.Add(make([]byte, RecordSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if again := AppendRecord(nil, r); string(again) != string(b[:RecordSize]) {
			t.Fatalf("round trip: %x != %x", again, b[:RecordSize])
		}
	})
}

// FuzzOpenBucketFile: a bucket file as found at startup, whatever its
// length and bytes, opens to an index that holds the bucket exactly when
// the file has a whole record, reads back no more records than asked for
// or than the file holds, keeps taking records, and reopens the same.
func FuzzOpenBucketFile(f *testing.F) {
	var good []byte
	for _, r := range recs(5, 6, 7) {
		good = AppendRecord(good, r)
	}
	f.Add(int64(1700000000), good)
	f.Add(int64(1700000000), good[:RecordSize+7])
	f.Add(int64(0), []byte{1, 2, 3})
	f.Add(int64(-4097), make([]byte, 3*RecordSize))
	f.Fuzz(func(t *testing.T, b int64, content []byte) {
		fsys := storage.NewFaultFS(1)
		const dir = "/timer"
		x := &Index{dir: dir}
		name := x.path(b)
		if err := storage.MkdirAllDurable(fsys, filepath.Dir(name)); err != nil {
			t.Fatal(err)
		}
		fl, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fl.WriteAt(content, 0); err != nil {
			t.Fatal(err)
		}
		fl.Close()
		whole := int64(len(content) / RecordSize)
		minOff, haveMin := int64(9), true // the record appended below
		for i := int64(0); i < whole; i++ {
			if r, err := DecodeRecord(content[i*RecordSize:]); err == nil && r.QueueOffset < minOff {
				minOff = r.QueueOffset
			}
		}
		check := func(x *Index, want int64, appended bool) {
			t.Helper()
			if got, ok := x.Next(b, b); ok != (want > 0) || (ok && got != b) {
				t.Fatalf("bucket %d of %d records: Next = %d, %v", b, want, got, ok)
			}
			got, total, err := x.Read(b, 0, 2)
			if err != nil || total != want || int64(len(got)) != min(2, want) {
				t.Fatalf("bucket %d of %d records: read %d of %d (%v)", b, want, len(got), total, err)
			}
			if !appended {
				return
			}
			if m, ok := x.MinQueueOffset(); ok != haveMin || m != minOff {
				t.Fatalf("bucket of %d records: minimum offset %d, %v; want %d", want, m, ok, minOff)
			}
		}
		x, err = Open(fsys, dir, nil)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		check(x, whole, false)
		if err := x.Append(b, recs(9)); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		check(x, whole+1, true)
		if err := x.Sync(); err != nil {
			t.Fatal(err)
		}
		x.Close()
		x, err = Open(fsys, dir, nil)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer x.Close()
		check(x, whole+1, true)
		got, _, _ := x.Read(b, whole, 1)
		if len(got) != 1 || got[0] != recs(9)[0] {
			t.Fatalf("appended record reads back as %+v", got)
		}
	})
}
