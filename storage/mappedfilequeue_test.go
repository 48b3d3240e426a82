package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func fillQueue(t *testing.T, q *MappedFileQueue, n, recSize int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mf, err := q.LastOrCreate(0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mf.Append(bytes.Repeat([]byte{byte(i + 1)}, recSize)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMappedFileQueueLoadByName(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		qdir := filepath.Join(dir, "q")
		q, err := OpenMappedFileQueue(fsys, qdir, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if q.Last() != nil || q.MinOffset() != 0 || q.MaxOffset() != 0 {
			t.Fatal("empty queue not empty")
		}
		fillQueue(t, q, 10, 1024) // 2.5 files
		if got := len(q.Files()); got != 3 {
			t.Fatalf("%d files", got)
		}
		if q.MaxOffset() != 10240 {
			t.Fatalf("max offset %d", q.MaxOffset())
		}
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		// A stray file that is not a segment name is ignored.
		h, err := fsys.OpenFile(filepath.Join(qdir, "README"), 0x42, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()

		q, err = OpenMappedFileQueue(fsys, qdir, 4096)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		files := q.Files()
		if len(files) != 3 {
			t.Fatalf("reloaded %d files", len(files))
		}
		for i, mf := range files {
			if mf.FileFromOffset() != int64(i*4096) {
				t.Fatalf("file %d starts at %d", i, mf.FileFromOffset())
			}
		}
		if mf := q.FindByOffset(5000); mf != files[1] {
			t.Fatal("FindByOffset(5000) is not the second file")
		}
		if q.FindByOffset(3*4096) != nil || q.FindByOffset(-1) != nil {
			t.Fatal("FindByOffset outside the queue returned a file")
		}
		// Loaded files are fully readable until recovery says otherwise.
		if q.MaxOffset() != 3*4096 {
			t.Fatalf("reloaded max %d", q.MaxOffset())
		}
		if err := q.TruncateDirty(10240); err != nil {
			t.Fatal(err)
		}
		if q.MaxOffset() != 10240 {
			t.Fatalf("max after truncate %d", q.MaxOffset())
		}
		s, err := files[2].Read(1024, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if s.B[0] != 10 {
			t.Fatalf("record 10 = %d", s.B[0])
		}
		s.Release()
	})
}

func TestMappedFileQueueGapIsCorrupt(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		q, _ := OpenMappedFileQueue(fsys, dir, 4096)
		fillQueue(t, q, 12, 1024)
		q.Close()
		if err := fsys.Remove(filepath.Join(dir, FileName(4096))); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenMappedFileQueue(fsys, dir, 4096); !errors.Is(err, ErrCorruptFile) {
			t.Fatalf("gap: %v", err)
		}
	})
}

func TestMappedFileQueueTruncateDirtyDropsLaterFiles(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		q, _ := OpenMappedFileQueue(fsys, dir, 4096)
		defer q.Close()
		fillQueue(t, q, 16, 1024) // 4 full files
		if err := q.TruncateDirty(5000); err != nil {
			t.Fatal(err)
		}
		if n := len(q.Files()); n != 2 {
			t.Fatalf("%d files after truncate", n)
		}
		if q.MaxOffset() != 5000 {
			t.Fatalf("max %d", q.MaxOffset())
		}
		if _, err := fsys.Stat(filepath.Join(dir, FileName(8192))); err == nil {
			t.Fatal("file past the truncation point still on disk")
		}
		// The tail of the truncated file is zero.
		mf := q.Last()
		mf.SetWrotePosition(4096)
		s, _ := mf.Read(5000-4096, 4096-(5000-4096))
		if !bytes.Equal(s.B, make([]byte, len(s.B))) {
			t.Fatal("tail not zeroed")
		}
		s.Release()
		mf.SetWrotePosition(5000 - 4096)
		// Appending continues at the truncation point.
		mf2, err := q.LastOrCreate(0)
		if err != nil || mf2 != mf {
			t.Fatalf("LastOrCreate after truncate: %v", err)
		}
		pos, _ := mf2.Append([]byte{1})
		if pos != 5000-4096 {
			t.Fatalf("append at %d", pos)
		}
	})
}

func TestMappedFileQueueDelete(t *testing.T) {
	f := NewFaultFS(1)
	MkdirAllDurable(f, "/q")
	q, _ := OpenMappedFileQueue(f, "/q", 4096)
	defer q.Close()
	fillQueue(t, q, 20, 1024) // 5 files
	base := time.Unix(1_000_000, 0)
	for i, mf := range q.Files() {
		f.SetModTime(mf.Path(), base.Add(time.Duration(i)*time.Hour))
	}
	// A reader holding a view into the first file keeps its mapping.
	s, err := q.Files()[0].Read(0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	n, err := q.DeleteExpired(base.Add(150*time.Minute), 1, 2)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d (limit 2): %v", n, err)
	}
	if s.B[0] != 1 {
		t.Fatal("view of a deleted file changed")
	}
	s.Release()
	n, _ = q.DeleteExpired(base.Add(150*time.Minute), 1, 0)
	if n != 1 || q.MinOffset() != 3*4096 {
		t.Fatalf("second pass deleted %d, min %d", n, q.MinOffset())
	}
	// keepLast protects the newest files even if expired.
	n, _ = q.DeleteExpired(base.Add(100*time.Hour), 2, 0)
	if n != 0 {
		t.Fatalf("deleted %d protected files", n)
	}
	n, _ = q.DeleteBefore(1 << 40)
	if n != 1 || len(q.Files()) != 1 || q.MaxOffset() != 20*1024 {
		t.Fatalf("DeleteBefore: %d deleted, %d left, max %d", n, len(q.Files()), q.MaxOffset())
	}
	if q.FindByOffset(0) != nil {
		t.Fatal("deleted offset still found")
	}
}

// TestMappedFileQueueFailedDeleteLeavesNoGap: retention removing the oldest
// files fails on one of them (EIO from unlink). The files after it must
// not go meanwhile, now or at the next pass: the directory would hold a
// gap, and the queue (a CommitLog, a ConsumeQueue) would refuse to open at
// the next start. The file stays the queue's first, and the next pass
// removes it before the others.
func TestMappedFileQueueFailedDeleteLeavesNoGap(t *testing.T) {
	f, q := failingUnlinkQueue(t, 4096)
	var err error
	if _, err := q.DeleteBefore(3 * 4096); !errors.Is(err, unix.EIO) {
		t.Fatalf("DeleteBefore with a failing unlink: %v, want EIO", err)
	}
	if got := q.MinOffset(); got != 4096 {
		t.Fatalf("min offset after the failed deletion %d, want 4096 (the file that failed stays first)", got)
	}
	if s, err := q.FindByOffset(4096).Read(0, 1024); err != nil {
		t.Fatalf("read the file whose deletion failed: %v", err)
	} else {
		s.Release()
	}
	// Opened now, the directory holds no gap.
	if q2, err := OpenMappedFileQueue(f, "/q", 4096); err != nil {
		t.Fatalf("open after the failed deletion: %v", err)
	} else {
		q2.Close()
	}
	// The next pass, still failing, removes nothing after the file.
	if _, err := q.DeleteBefore(4 * 4096); !errors.Is(err, unix.EIO) {
		t.Fatalf("second pass: %v, want EIO", err)
	}
	f.SetFaultFunc(nil)
	if n, err := q.DeleteBefore(4 * 4096); err != nil || n != 3 || q.MinOffset() != 4*4096 {
		t.Fatalf("pass after the disk recovered: %d deleted, min %d, %v", n, q.MinOffset(), err)
	}
	q.Close()
	q, err = OpenMappedFileQueue(f, "/q", 4096)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer q.Close()
	if got := q.MinOffset(); got != 4*4096 {
		t.Fatalf("reopened min offset %d, want %d", got, 4*4096)
	}
}

// TestMappedFileQueueFailedDestroyLeavesNoGap: destroying a whole queue
// (a deleted topic's ConsumeQueue, a Raft log reset) meets failing
// unlinks (EIO) on two of its files. What it leaves must be contiguous,
// or the queue would refuse to open at the next start ("gap between
// segments") and the broker would not start; and a second Destroy once
// the disk recovered must remove every file that is left.
func TestMappedFileQueueFailedDestroyLeavesNoGap(t *testing.T) {
	f, q := failingUnlinkQueue(t, 4096, 3*4096)
	var err error
	if err := q.Destroy(); !errors.Is(err, unix.EIO) {
		t.Fatalf("Destroy with failing unlinks: %v, want EIO", err)
	}
	q2, err := OpenMappedFileQueue(f, "/q", 4096)
	if err != nil {
		t.Fatalf("open after the failed Destroy: %v", err)
	}
	q2.Close()
	f.SetFaultFunc(nil)
	if err := q.Destroy(); err != nil {
		t.Fatalf("Destroy after the disk recovered: %v", err)
	}
	ents, err := f.ReadDir("/q")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left after Destroy: %s", e.Name())
	}
}

// TestMappedFileQueueWithGapsOpensBothSides: a queue of derived data
// (ConsumeQueue) opened over files with a gap reports the missing range
// once and serves both sides; an offset in the gap has no file.
func TestMappedFileQueueWithGapsOpensBothSides(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		q, _ := OpenMappedFileQueue(fsys, dir, 4096)
		fillQueue(t, q, 24, 1024) // 6 files
		q.Close()
		for _, off := range []int64{4096, 2 * 4096, 4 * 4096} {
			if err := fsys.Remove(filepath.Join(dir, FileName(off))); err != nil {
				t.Fatal(err)
			}
		}
		var gaps [][2]int64
		q, err := OpenMappedFileQueueWithGaps(fsys, dir, 4096, func(from, to int64) { gaps = append(gaps, [2]int64{from, to}) })
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if want := [][2]int64{{4096, 3 * 4096}, {4 * 4096, 5 * 4096}}; !slices.Equal(gaps, want) {
			t.Fatalf("gaps reported %v, want %v", gaps, want)
		}
		for _, c := range []struct {
			off  int64
			from int64 // -1: no file
		}{{0, 0}, {4095, 0}, {4096, -1}, {3*4096 - 1, -1}, {3 * 4096, 3 * 4096}, {4*4096 - 1, 3 * 4096},
			{4 * 4096, -1}, {5 * 4096, 5 * 4096}, {6*4096 - 1, 5 * 4096}, {6 * 4096, -1}} {
			mf := q.FindByOffset(c.off)
			switch {
			case c.from < 0 && mf != nil:
				t.Errorf("offset %d: file %d, want none", c.off, mf.FileFromOffset())
			case c.from >= 0 && (mf == nil || mf.FileFromOffset() != c.from):
				t.Errorf("offset %d: file %v, want %d", c.off, mf, c.from)
			}
		}
		if s, err := q.FindByOffset(5*4096).Read(0, 1024); err != nil || s.B[0] != 21 {
			t.Fatalf("read after the gaps: %v", err)
		} else {
			s.Release()
		}
	})
}

// failingUnlinkQueue opens a queue of five 4 KiB files on a FaultFS whose
// unlink of the files starting at the given offsets fails with EIO.
func failingUnlinkQueue(t *testing.T, failing ...int64) (*FaultFS, *MappedFileQueue) {
	t.Helper()
	f := NewFaultFS(1)
	MkdirAllDurable(f, "/q")
	q, err := OpenMappedFileQueue(f, "/q", 4096)
	if err != nil {
		t.Fatal(err)
	}
	fillQueue(t, q, 20, 1024)
	f.SetFaultFunc(func(op FaultOp, name string) error {
		for _, off := range failing {
			if op == OpRemove && name == "/q/"+FileName(off) {
				return &os.PathError{Op: "unlink", Path: name, Err: unix.EIO}
			}
		}
		return nil
	})
	return f, q
}
