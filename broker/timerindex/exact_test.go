package timerindex

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// A process killed while applying an entry (after some of its writes,
// before its applied mark) leaves no trace once it restarts and Raft
// re-applies the log: the bucket files are byte-identical to those of a
// replica that was never interrupted, so every record sits at the same
// position on every replica and the replicated cursor (bucket, fired)
// means the same records everywhere. Each entry of timerLog is cut at each
// of its steps.
func TestIndexKillMidEntryLeavesFilesExact(t *testing.T) {
	want := t.TempDir()
	z := open(t, storage.OSFS(), want)
	replay(t, z, timerLog, 1, cursor{10, 0})
	must(t, z.Close())
	wantFiles := bucketFiles(t, storage.OSFS(), want)

	for k := 1; k <= len(timerLog); k++ {
		e := timerLog[k-1]
		for _, step := range killSteps(e) {
			dir := t.TempDir()
			x, err := Open(storage.OSFS(), dir, nil)
			must(t, err)
			cur := replay(t, x, timerLog[:k-1], 1, cursor{10, 0})
			if !step(t, x, uint64(k), e, cur) {
				x.Close()
				continue // the entry changes no file
			}
			// Killed: x is abandoned without SetApplied or Close.
			y, err := Open(storage.OSFS(), dir, nil)
			must(t, err)
			end := replay(t, y, timerLog, 1, cursor{10, 0})
			if got := pending(t, y, end); !slices.Equal(got, timerLogPending) {
				t.Errorf("killed in entry %d: pending %v, want %v", k, got, timerLogPending)
			}
			must(t, y.Close())
			x.Close()
			got := bucketFiles(t, storage.OSFS(), dir)
			if len(got) != len(wantFiles) {
				t.Errorf("killed in entry %d: files %v, want %v", k, keys(got), keys(wantFiles))
			}
			for name, b := range wantFiles {
				if !bytes.Equal(got[name], b) {
					t.Errorf("killed in entry %d: %s holds %v, want %v", k, name, decodeAll(got[name]), decodeAll(b))
				}
			}
		}
	}
}

type killStep func(t *testing.T, x *Index, i uint64, e logEntry, cur cursor) bool

// killSteps are the points at which an entry's application is cut: after
// its intent only, after part of its writes, after all of them, and (for
// an advance) after its mark but before the set-aside sources are removed.
func killSteps(e logEntry) []killStep {
	if e.recs == nil {
		advance := func(t *testing.T, x *Index, i uint64, e logEntry, cur cursor) bool {
			if cur != e.from || e.to.bucket == e.from.bucket {
				return false
			}
			must(t, x.Begin(i))
			must(t, x.Advance(e.from.bucket, e.done, e.to.bucket))
			return true
		}
		return []killStep{
			advance,
			// Moved records appended, sources still in place.
			func(t *testing.T, x *Index, i uint64, e logEntry, cur cursor) bool {
				if cur != e.from || e.to.bucket == e.from.bucket {
					return false
				}
				must(t, x.Begin(i))
				for b, ok := x.Next(e.from.bucket, e.to.bucket-1); ok; b, ok = x.Next(b+1, e.to.bucket-1) {
					skip := int64(0)
					if b == e.from.bucket {
						skip = e.done
					}
					recs, _, err := x.Read(b, skip, 1<<20)
					must(t, err)
					must(t, x.Append(e.to.bucket, recs))
				}
				return true
			},
			// The mark written, the set-aside sources not yet removed.
			func(t *testing.T, x *Index, i uint64, e logEntry, cur cursor) bool {
				if !advance(t, x, i, e, cur) {
					return false
				}
				var buf [20]byte
				binary.LittleEndian.PutUint64(buf[:8], i)
				binary.LittleEndian.PutUint64(buf[8:16], x.boot)
				binary.LittleEndian.PutUint32(buf[16:], crc32.Checksum(buf[:16], castagnoli))
				_, err := x.mark.WriteAt(buf[:], 0)
				must(t, err)
				return true
			},
		}
	}
	var steps []killStep
	for n := 0; n <= len(e.recs); n++ {
		steps = append(steps, func(t *testing.T, x *Index, i uint64, e logEntry, cur cursor) bool {
			must(t, x.Begin(i, e.buckets(cur)...))
			for _, r := range e.recs[:n] {
				must(t, x.Append(max(BucketOf(r.DeliverMs), cur.bucket), []Record{r}))
			}
			return true
		})
	}
	return steps
}

// After a reboot (another boot id) the files are cut back to their sizes
// at the synced mark, whatever this boot's intent says, and the entries
// after it are indexed again: each record once.
func TestIndexRebootCutsToSyncedSizes(t *testing.T) {
	t.Cleanup(func(old func() string) func() { return func() { bootID = old } }(bootID))
	bootID = func() string { return "boot-1" }
	dir := t.TempDir()
	x, err := Open(storage.OSFS(), dir, nil)
	must(t, err)
	must(t, x.Begin(1, 10))
	must(t, x.Append(10, recs(1)))
	must(t, x.SetApplied(1))
	must(t, x.Sync())
	must(t, x.Begin(2, 10))
	must(t, x.Append(10, recs(2)))
	must(t, x.SetApplied(2))
	must(t, x.Begin(3, 10, 11))
	must(t, x.Append(10, recs(3)))
	must(t, x.Append(11, recs(4)))
	must(t, x.Close())

	bootID = func() string { return "boot-2" }
	y := open(t, storage.OSFS(), dir)
	if y.Applied() != 1 {
		t.Fatalf("applied %d, want the synced 1", y.Applied())
	}
	got, total, err := y.Read(10, 0, 10)
	must(t, err)
	if total != 1 || !equal(offsetsOf(got), []int64{1}) {
		t.Fatalf("bucket 10 after a reboot %v (total %d), want [1]", offsetsOf(got), total)
	}
	if _, ok := y.Next(11, 11); ok {
		t.Fatal("bucket 11, written after the synced mark, survived the reboot")
	}
}

// bucketFiles maps each non-empty file under dir's group directories to
// its bytes, read through fsys (under the crashfs tag, the page cache it
// emulates).
func bucketFiles(t *testing.T, fsys storage.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Dir(p) == dir {
			return err
		}
		f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		size, err := f.Size()
		if err != nil || size == 0 {
			return err
		}
		b := make([]byte, size)
		if _, err := f.ReadAt(b, 0); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return nil
	}))
	return out
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func decodeAll(b []byte) []int64 {
	var out []int64
	for ; len(b) >= RecordSize; b = b[RecordSize:] {
		r, _ := DecodeRecord(b)
		out = append(out, r.QueueOffset)
	}
	return out
}

// The intent decoder never panics, takes only intents of its own boot, and
// reads back what was encoded.
func FuzzDecodeIntent(f *testing.F) {
	f.Add(encodeIntent(7, 3, []bucketSize{{10, 40}, {12, 0}}), uint64(3))
	f.Add(encodeIntent(7, 3, nil), uint64(3))
	f.Add(encodeIntent(7, 3, []bucketSize{{10, 40}}), uint64(5))
	f.Add([]byte{}, uint64(1))
	f.Add(make([]byte, 64), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, boot uint64) {
		entry, sizes, ok := decodeIntent(b, boot)
		if !ok {
			return
		}
		if boot == 0 {
			t.Fatal("an intent matched an unknown boot")
		}
		again := encodeIntent(entry, boot, sizes)
		if !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("decoded %d %v from %x, which encodes as %x", entry, sizes, b, again)
		}
	})
}

// The synced mark's decoder never panics and reads back what was encoded;
// the earlier 12-byte form has no sizes.
func FuzzDecodeSynced(f *testing.F) {
	f.Add(encodeSynced(9, []bucketSize{{10, 40}, {20, 20}}))
	f.Add(encodeSynced(0, nil))
	f.Add(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint64(nil, 3), crc32.Checksum(binary.LittleEndian.AppendUint64(nil, 3), castagnoli)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		applied, sizes, err := decodeSynced(b)
		if err != nil || sizes == nil {
			return
		}
		if again := encodeSynced(applied, sizes); !bytes.Equal(again, b) {
			t.Fatalf("decoded %d %v from %x, which encodes as %x", applied, sizes, b, again)
		}
	})
}
