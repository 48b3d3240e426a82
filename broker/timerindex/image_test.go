package timerindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// liveBuckets returns every bucket file's bytes of x (marks and
// set-aside files excluded), read through x's file system: under the
// crashfs build unsynced bytes live only there.
func liveBuckets(t *testing.T, x *Index) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	if err := x.walkBuckets(func(b int64) error {
		f, err := x.fs.OpenFile(x.path(b), os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		size, err := f.Size()
		if err != nil {
			return err
		}
		data := make([]byte, size)
		if _, err := f.ReadAt(data, 0); err != nil {
			return err
		}
		out[b] = data
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImageCarriesTheCut: an image written after the cut, while later
// entries append and an advance sets a bucket aside, holds the files as of
// the cut; a replica with other files that replaces its index with it
// holds exactly those files at the cut's mark, also after a reopen; then
// both apply the same later entries and end byte-identical.
func TestImageCarriesTheCut(t *testing.T) {
	src := open(t, storage.OSFS(), t.TempDir())
	apply := func(x *Index, i uint64, f func() error) {
		t.Helper()
		if err := x.Begin(i); err != nil {
			t.Fatal(err)
		}
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if err := x.SetApplied(i); err != nil {
			t.Fatal(err)
		}
	}
	apply(src, 3, func() error { return src.Append(10, recs(1, 2)) })
	apply(src, 5, func() error { return src.Append(5000, recs(3)) })
	apply(src, 6, func() error { return src.Append(11, recs(4)) })
	want := liveBuckets(t, src)
	cut, err := src.Cut()
	if err != nil || cut.Applied != 6 || cut.Empty() {
		t.Fatalf("cut %+v, %v", cut, err)
	}
	// After the cut: an append and an advance past bucket 10 (set aside
	// until the next Sync).
	apply(src, 7, func() error { return src.Append(11, recs(5)) })
	apply(src, 8, func() error { return src.Advance(10, 1, 11) })
	var img bytes.Buffer
	img.WriteString("\n") // what the snapshot's JSON ends with
	if err := src.WriteImage(&img, cut); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	dst := open(t, storage.OSFS(), dir)
	apply(dst, 2, func() error { return dst.Append(99, recs(42)) }) // stale files of its own
	r, err := ReadImage(bytes.NewReader(img.Bytes()))
	if err != nil || r == nil || r.Applied != 6 {
		t.Fatalf("read image: %+v, %v", r, err)
	}
	if err := dst.Replace(r); err != nil {
		t.Fatal(err)
	}
	if got := liveBuckets(t, dst); len(got) != len(want) || dst.Applied() != 6 {
		t.Fatalf("replaced index holds %d buckets at mark %d, want %d at 6", len(got), dst.Applied(), len(want))
	} else {
		for b, data := range want {
			if !bytes.Equal(got[b], data) {
				t.Fatalf("bucket %d differs after the replace", b)
			}
		}
	}
	dst.Close()
	dst = open(t, storage.OSFS(), dir)
	if dst.Applied() != 6 || dst.Buckets() != 3 {
		t.Fatalf("reopened: mark %d, %d buckets", dst.Applied(), dst.Buckets())
	}
	if q, ok := dst.MinQueueOffset(); !ok || q != 1 {
		t.Fatalf("min queue offset %d %v", q, ok)
	}
	apply(dst, 7, func() error { return dst.Append(11, recs(5)) })
	apply(dst, 8, func() error { return dst.Advance(10, 1, 11) })
	if a, b := liveBuckets(t, src), liveBuckets(t, dst); len(a) != len(b) {
		t.Fatalf("after the same entries: %d vs %d buckets", len(a), len(b))
	} else {
		for k := range a {
			if !bytes.Equal(a[k], b[k]) {
				t.Fatalf("bucket %d differs after the same entries", k)
			}
		}
	}

	// No image: nil. A damaged one: ErrCorrupt, and the index is left
	// empty at mark 0 (the next restore replaces it again).
	if r, err := ReadImage(bytes.NewReader([]byte("\n"))); r != nil || err != nil {
		t.Fatalf("no image: %+v, %v", r, err)
	}
	bad := bytes.Clone(img.Bytes())
	bad[len(bad)-10] ^= 1
	r, err = ReadImage(bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Replace(r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("replace from a damaged image: %v", err)
	}
	if dst.Applied() != 0 {
		t.Fatalf("mark %d after a failed replace", dst.Applied())
	}
	if _, err := os.Stat(filepath.Join(dir, syncedName)); !os.IsNotExist(err) {
		t.Fatalf("synced mark left after a failed replace: %v", err)
	}
}

// FuzzReadImage: the image header decoder never panics and bounds what it
// allocates.
func FuzzReadImage(f *testing.F) {
	x, err := Open(storage.OSFS(), f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer x.Close()
	x.Append(10, recs(1, 2))
	cut, _ := x.Cut()
	var img bytes.Buffer
	if err := x.WriteImage(&img, cut); err != nil {
		f.Fatal(err)
	}
	f.Add(img.Bytes())
	f.Add([]byte("\n" + imageMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := ReadImage(bytes.NewReader(b))
		if err == nil && img != nil {
			for _, bs := range img.sizes {
				if bs.size < 0 || bs.size%RecordSize != 0 {
					t.Fatalf("accepted bucket %+v", bs)
				}
			}
		}
	})
}

// TestReadImageShortHeaderAllocatesLittle: a header whose count claims
// the most buckets allowed, followed by nothing, fails without first
// allocating room for all of them (a damaged or hostile snapshot).
func TestReadImageShortHeaderAllocatesLittle(t *testing.T) {
	head := []byte(imageMagic)
	head = binary.LittleEndian.AppendUint64(head, 7)
	head = binary.LittleEndian.AppendUint32(head, maxImageBuckets)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadImage(bytes.NewReader(head))
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a truncated image header was accepted")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("reading a truncated header of %d bytes allocated %d bytes", len(head), n)
	}
}
