package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fsCase is one FS implementation the contract tests run against.
type fsCase struct {
	name string
	// mk returns a file system and a directory in it to work under.
	mk func(t *testing.T) (FS, string)
}

func allFS() []fsCase {
	return []fsCase{
		{"os", func(t *testing.T) (FS, string) { return OSFS(), t.TempDir() }},
		{"fault", func(t *testing.T) (FS, string) {
			f := NewFaultFS(1)
			if err := MkdirAllDurable(f, "/data"); err != nil {
				t.Fatal(err)
			}
			return f, "/data"
		}},
	}
}

func forAllFS(t *testing.T, fn func(t *testing.T, fsys FS, dir string)) {
	for _, c := range allFS() {
		t.Run(c.name, func(t *testing.T) {
			fsys, dir := c.mk(t)
			fn(t, fsys, dir)
		})
	}
}

func TestMappedFileAppendReadFlush(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		path := filepath.Join(dir, FileName(4096))
		mf, err := OpenMappedFile(fsys, path, 4096, 8192)
		if err != nil {
			t.Fatal(err)
		}
		if mf.WrotePosition() != 0 || mf.FlushedPosition() != 0 || mf.FileFromOffset() != 4096 || mf.Size() != 8192 {
			t.Fatalf("fresh file positions: wrote %d flushed %d from %d size %d", mf.WrotePosition(), mf.FlushedPosition(), mf.FileFromOffset(), mf.Size())
		}
		pos, err := mf.Append([]byte("hello"))
		if err != nil || pos != 0 {
			t.Fatalf("append: pos %d err %v", pos, err)
		}
		pos, err = mf.Append([]byte("world"))
		if err != nil || pos != 5 {
			t.Fatalf("append: pos %d err %v", pos, err)
		}
		s, err := mf.Read(0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if string(s.B) != "helloworld" || s.Offset != 4096 {
			t.Fatalf("read %q at %d", s.B, s.Offset)
		}
		s.Release()
		// Reads never go past the written end.
		if _, err := mf.Read(5, 6); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("read past wrote: %v", err)
		}
		if _, err := mf.Read(-1, 1); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("negative read: %v", err)
		}
		if _, err := mf.Append(make([]byte, 8192)); !errors.Is(err, ErrFileFull) {
			t.Fatalf("oversized append: %v", err)
		}
		if mf.WrotePosition() != 10 {
			t.Fatalf("failed append moved wrote to %d", mf.WrotePosition())
		}
		fl, err := mf.Flush()
		if err != nil || fl != 10 || mf.FlushedPosition() != 10 {
			t.Fatalf("flush: %d %v", fl, err)
		}
		if _, err := mf.Append(make([]byte, 8192-10)); err != nil {
			t.Fatal(err)
		}
		if !mf.IsFull() {
			t.Fatal("file should be full")
		}
		if err := mf.WriteAt([]byte("XY"), 100); err != nil {
			t.Fatal(err)
		}
		if _, err := mf.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := mf.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := mf.Read(0, 1); !errors.Is(err, ErrFileClosed) {
			t.Fatalf("read after close: %v", err)
		}
		// Reopen: an existing file opens fully readable with its bytes.
		mf2, err := OpenMappedFile(fsys, path, 4096, 8192)
		if err != nil {
			t.Fatal(err)
		}
		defer mf2.Close()
		if mf2.WrotePosition() != 8192 {
			t.Fatalf("reopened wrote %d", mf2.WrotePosition())
		}
		s, err = mf2.Read(0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if string(s.B) != "helloworld" {
			t.Fatalf("reopened read %q", s.B)
		}
		s.Release()
		s, _ = mf2.Read(100, 2)
		if string(s.B) != "XY" {
			t.Fatalf("random write lost: %q", s.B)
		}
		s.Release()
	})
}

func TestMappedFileSizeMismatch(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		path := filepath.Join(dir, FileName(0))
		mf, err := OpenMappedFile(fsys, path, 0, 8192)
		if err != nil {
			t.Fatal(err)
		}
		mf.Close()
		if _, err := OpenMappedFile(fsys, path, 0, 4096); !errors.Is(err, ErrCorruptFile) {
			t.Fatalf("smaller size: %v", err)
		}
	})
}

func TestMappedFileRefcountKeepsMappingDuringDestroy(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		path := filepath.Join(dir, FileName(0))
		mf, err := OpenMappedFile(fsys, path, 0, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mf.Append(bytes.Repeat([]byte{0xAB}, 1000)); err != nil {
			t.Fatal(err)
		}
		s, err := mf.Read(0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := mf.Destroy(); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(path); err == nil {
			t.Fatal("destroyed file still exists")
		}
		if mf.IsUnmapped() {
			t.Fatal("unmapped while a view is held")
		}
		if mf.Retain() {
			t.Fatal("retain succeeded after destroy")
		}
		// The held view is still readable (on the real FS this would fault if
		// the mapping were gone).
		for i, b := range s.B {
			if b != 0xAB {
				t.Fatalf("byte %d = %x", i, b)
			}
		}
		s.Release()
		if !mf.IsUnmapped() {
			t.Fatal("mapping not released after the last view")
		}
		s.Release() // double release of a view is a no-op
	})
}

func TestMappedFileConcurrentReadersAndWriter(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		mf, err := OpenMappedFile(fsys, filepath.Join(dir, FileName(0)), 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer mf.Close()
		const rec = 64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for r := 0; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					w := mf.WrotePosition()
					if w == 0 {
						continue
					}
					s, err := mf.Read(0, w)
					if err != nil {
						t.Error(err)
						return
					}
					// Every complete record visible must be intact.
					for i := 0; i+rec <= len(s.B); i += rec {
						want := byte(i / rec)
						if s.B[i] != want || s.B[i+rec-1] != want {
							t.Errorf("record at %d torn: %x..%x want %x", i, s.B[i], s.B[i+rec-1], want)
							break
						}
					}
					s.Release()
				}
			}()
		}
		wg.Add(1)
		go func() { // concurrent flusher
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := mf.Flush(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for i := 0; i < 2000; i++ {
			if _, err := mf.Append(bytes.Repeat([]byte{byte(i)}, rec)); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
	})
}

func TestMappedFileFallocateENOSPC(t *testing.T) {
	f := NewFaultFS(1)
	MkdirAllDurable(f, "/d")
	f.SetCapacity(10000)
	if _, err := OpenMappedFile(f, "/d/"+FileName(0), 0, 8192); err != nil {
		t.Fatal(err)
	}
	_, err := OpenMappedFile(f, "/d/"+FileName(8192), 8192, 8192)
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("want ErrDiskFull, got %v", err)
	}
	if _, serr := f.Stat("/d/" + FileName(8192)); serr == nil {
		t.Fatal("failed preallocation left a file behind")
	}
	f.SetCapacity(0)
	f.InjectError(OpFallocate, unix.ENOSPC)
	if _, err := OpenMappedFile(f, "/d/"+FileName(8192), 8192, 8192); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("injected ENOSPC: %v", err)
	}
}

func TestMappedFileTruncateTailSurvivesCrash(t *testing.T) {
	f := NewFaultFS(7)
	MkdirAllDurable(f, "/d")
	path := "/d/" + FileName(0)
	mf, err := OpenMappedFile(f, path, 0, 16384)
	if err != nil {
		t.Fatal(err)
	}
	mf.Append(bytes.Repeat([]byte{1}, 9000))
	if _, err := mf.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := mf.TruncateTail(100); err != nil {
		t.Fatal(err)
	}
	if mf.WrotePosition() != 100 {
		t.Fatalf("wrote %d", mf.WrotePosition())
	}
	if _, err := mf.Flush(); err != nil {
		t.Fatal(err)
	}
	mf.Close()
	g := f.Crash(CrashOptions{})
	mf2, err := OpenMappedFile(g, path, 0, 16384)
	if err != nil {
		t.Fatal(err)
	}
	defer mf2.Close()
	s, _ := mf2.Read(0, 16384)
	defer s.Release()
	for i, b := range s.B {
		want := byte(0)
		if i < 100 {
			want = 1
		}
		if b != want {
			t.Fatalf("byte %d = %d after truncate+crash, want %d", i, b, want)
		}
	}
}

// TestMappedFileRewriteZerosAfterFailedSync: zeros whose sync failed are
// in the page cache only, so a reopened file shows them, TruncateTail finds
// nothing to clear and a crash brings the old bytes back; RewriteZeros
// writes them for real.
func TestMappedFileRewriteZerosAfterFailedSync(t *testing.T) {
	f := NewFaultFS(8)
	MkdirAllDurable(f, "/d")
	path := "/d/" + FileName(0)
	mf, err := OpenMappedFile(f, path, 0, 16384)
	if err != nil {
		t.Fatal(err)
	}
	mf.Append(bytes.Repeat([]byte{1}, 9000))
	if _, err := mf.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := mf.TruncateTail(100); err != nil {
		t.Fatal(err)
	}
	f.InjectError(OpMsync, unix.EIO)
	if _, err := mf.Flush(); err == nil {
		t.Fatal("Flush succeeded with EIO")
	}
	f.InjectError(OpMsync, nil)
	mf.Close()
	mf, err = OpenMappedFile(f, path, 0, 16384)
	if err != nil {
		t.Fatal(err)
	}
	if err := mf.TruncateTail(100); err != nil {
		t.Fatal(err)
	}
	if err := mf.RewriteZeros(50, 9000); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("RewriteZeros below the write position: %v, want ErrOutOfRange", err)
	}
	if err := mf.RewriteZeros(100, 9000); err != nil {
		t.Fatal(err)
	}
	mf.Close()
	g := f.Crash(CrashOptions{})
	mf2, err := OpenMappedFile(g, path, 0, 16384)
	if err != nil {
		t.Fatal(err)
	}
	defer mf2.Close()
	s, _ := mf2.Read(0, 16384)
	defer s.Release()
	for i, b := range s.B {
		want := byte(0)
		if i < 100 {
			want = 1
		}
		if b != want {
			t.Fatalf("byte %d = %d after rewrite+crash, want %d", i, b, want)
		}
	}
}

func TestFaultFSCrashDropsUnsynced(t *testing.T) {
	f := NewFaultFS(3)
	MkdirAllDurable(f, "/d")
	mf, err := OpenMappedFile(f, "/d/"+FileName(0), 0, 8192)
	if err != nil {
		t.Fatal(err)
	}
	mf.Append([]byte("durable"))
	mf.Flush()
	mf.Append([]byte("volatile"))
	// A file created but whose directory was never synced vanishes.
	h, _ := f.OpenFile("/d/unsynced-name", 0x42, 0o644) // O_RDWR|O_CREATE
	h.WriteAt([]byte("x"), 0)
	h.Sync()
	h.Close()
	f.Freeze()
	if _, err := mf.Flush(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("flush on frozen fs: %v", err)
	}
	mf.Close()
	g := f.Crash(CrashOptions{})
	if _, err := g.Stat("/d/unsynced-name"); err == nil {
		t.Fatal("file with unsynced directory entry survived")
	}
	mf2, err := OpenMappedFile(g, "/d/"+FileName(0), 0, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer mf2.Close()
	s, _ := mf2.Read(0, 15)
	defer s.Release()
	if string(s.B[:7]) != "durable" || !bytes.Equal(s.B[7:], make([]byte, 8)) {
		t.Fatalf("after crash: %q", s.B)
	}
	if _, err := f.Stat("/d"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("old fs still alive: %v", err)
	}
}

func TestFaultFSTearKeepsPrefixOfUnsynced(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		f := NewFaultFS(seed)
		MkdirAllDurable(f, "/d")
		mf, _ := OpenMappedFile(f, "/d/"+FileName(0), 0, 8192)
		mf.Append(bytes.Repeat([]byte{7}, 100))
		mf.Flush()
		mf.Append(bytes.Repeat([]byte{9}, 100))
		mf.Close()
		g := f.Crash(CrashOptions{Tear: true})
		mf2, _ := OpenMappedFile(g, "/d/"+FileName(0), 0, 8192)
		s, _ := mf2.Read(0, 300)
		i := 0
		for i < 100 && s.B[i] == 7 {
			i++
		}
		if i != 100 {
			t.Fatalf("seed %d: synced prefix damaged at %d", seed, i)
		}
		for i < 200 && s.B[i] == 9 {
			i++
		}
		for ; i < 300; i++ {
			if s.B[i] != 0 {
				t.Fatalf("seed %d: byte %d = %d past the tear", seed, i, s.B[i])
			}
		}
		s.Release()
		mf2.Close()
	}
}

func TestFaultFSInjectedErrorsAndUsage(t *testing.T) {
	f := NewFaultFS(1)
	MkdirAllDurable(f, "/d")
	mf, _ := OpenMappedFile(f, "/d/"+FileName(0), 0, 4096)
	defer mf.Close()
	mf.Append([]byte("abc"))
	f.InjectError(OpMsync, unix.EIO)
	if _, err := mf.Flush(); !errors.Is(err, unix.EIO) {
		t.Fatalf("want EIO, got %v", err)
	}
	if mf.FlushedPosition() != 0 {
		t.Fatal("failed flush advanced the flushed position")
	}
	f.InjectError(OpMsync, nil)
	if _, err := mf.Flush(); err != nil {
		t.Fatal(err)
	}
	used, total, _ := f.DiskUsage("/d")
	if used != 4096 || total != 1<<40 {
		t.Fatalf("usage %d/%d", used, total)
	}
	f.SetDiskUsage(95, 100)
	used, total, _ = f.DiskUsage("/d")
	if used != 95 || total != 100 {
		t.Fatalf("override %d/%d", used, total)
	}
	when := time.Unix(1000, 0)
	if err := f.SetModTime("/d/"+FileName(0), when); err != nil {
		t.Fatal(err)
	}
	if !mf.ModTime().Equal(when) {
		t.Fatalf("mod time %v", mf.ModTime())
	}
}

func TestOSFSDiskUsage(t *testing.T) {
	used, total, err := OSFS().DiskUsage(t.TempDir())
	if err != nil || total == 0 || used > total {
		t.Fatalf("statfs: %d/%d %v", used, total, err)
	}
}

// TestFaultFSCleanAfterFailedSync: with SetCleanAfterFailedSync, a page
// whose msync failed keeps its bytes in memory but is not written back by
// a later msync, until a write changes it or WriteAt rewrites it.
func TestFaultFSCleanAfterFailedSync(t *testing.T) {
	f := NewFaultFS(4)
	f.SetCleanAfterFailedSync(true)
	MkdirAllDurable(f, "/d")
	mf, err := OpenMappedFile(f, "/d/"+FileName(0), 0, 3*4096)
	if err != nil {
		t.Fatal(err)
	}
	mf.Append(bytes.Repeat([]byte{1}, 4096)) // page 0: synced
	if _, err := mf.Flush(); err != nil {
		t.Fatal(err)
	}
	mf.Append(bytes.Repeat([]byte{2}, 2*4096)) // pages 1, 2: writeback fails
	f.InjectError(OpMsync, unix.EIO)
	if _, err := mf.Flush(); !errors.Is(err, unix.EIO) {
		t.Fatalf("flush with EIO: %v", err)
	}
	f.InjectError(OpMsync, nil)
	if _, err := mf.Flush(); err != nil {
		t.Fatal(err)
	}
	if s, _ := mf.Read(4096, 1); s.B[0] != 2 {
		t.Fatalf("page cache lost the failed page: %d", s.B[0])
	} else {
		s.Release()
	}
	mf.Bytes()[2*4096] = 3 // a store through the mapping dirties page 2 again
	h, _ := f.OpenFile("/d/"+FileName(0), os.O_RDWR, 0)
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	h.Close()
	mf.Close()
	// The page-1 msync never happened on disk; page 2 went with the fsync.
	g := f.Crash(CrashOptions{})
	h, _ = g.OpenFile("/d/"+FileName(0), os.O_RDONLY, 0)
	defer h.Close()
	b := make([]byte, 3*4096)
	h.ReadAt(b, 0)
	if b[0] != 1 || b[4096] != 0 || b[2*4096] != 3 {
		t.Fatalf("durable bytes %d %d %d, want 1 0 3", b[0], b[4096], b[2*4096])
	}
}

// TestBufferedFileDropsBuffersWhenFull: a buffered file keeps its pending
// buffer and a recycled spare between commits. Every segment of a log stays
// open, so a full file that kept them would hold up to twice the largest
// commit for as long as the segment exists, for every segment.
func TestBufferedFileDropsBuffersWhenFull(t *testing.T) {
	const size = 1 << 20
	mf, err := OpenMappedFile(osFS{}, filepath.Join(t.TempDir(), FileName(0)), 0, size)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	mf.SetBuffered(true)
	chunk := bytes.Repeat([]byte{7}, size/4)
	for i := range 4 {
		if _, err := mf.AppendBytes(chunk); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			break
		}
		if err := mf.Commit(); err != nil {
			t.Fatal(err)
		}
		if cap(mf.spare) == 0 && cap(mf.pending) == 0 {
			t.Fatal("a file with room left should recycle its buffers")
		}
	}
	if _, err := mf.Flush(); err != nil {
		t.Fatal(err)
	}
	if !mf.IsFull() {
		t.Fatal("file not full")
	}
	if c := cap(mf.pending) + cap(mf.spare); c != 0 {
		t.Fatalf("full file still holds %d bytes of buffers", c)
	}
	s, err := mf.Read(size-len(chunk), len(chunk))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if !bytes.Equal(s.B, chunk) {
		t.Fatal("last chunk not in the file")
	}
}

// TestBufferedFileFullTruncateRefill: a buffered file is filled while
// another goroutine flushes and readers check every record they can see;
// once full and written it holds no buffers, and a truncation makes it
// take appends again (with buffers regrown and dropped once more), every
// record ending up in the file.
func TestBufferedFileFullTruncateRefill(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		const size, rec = 64 << 10, 64
		mf, err := OpenMappedFile(fsys, filepath.Join(dir, FileName(0)), 0, size)
		if err != nil {
			t.Fatal(err)
		}
		defer mf.Close()
		mf.SetBuffered(true)
		// cut is held by readers while they look and by the truncation,
		// which zeroes bytes under any reader (the raftlog store's mu).
		var cut sync.RWMutex
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var stopOnce sync.Once
		stopAll := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
		defer stopAll() // before the file closes, also on a failure
		run := func(fn func() bool) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if !fn() {
						return
					}
				}
			}()
		}
		run(func() bool { // flusher
			if _, err := mf.Flush(); err != nil {
				t.Error(err)
				return false
			}
			return true
		})
		run(func() bool { // reader
			cut.RLock()
			defer cut.RUnlock()
			s, err := mf.ReadFrom(0)
			if err != nil {
				t.Error(err)
				return false
			}
			defer s.Release()
			for i := 0; i+rec <= len(s.B); i += rec {
				if s.B[i] == 0 || !bytes.Equal(s.B[i:i+rec], bytes.Repeat(s.B[i:i+1], rec)) {
					t.Errorf("record at %d torn or missing: %x", i, s.B[i:i+rec])
					return false
				}
			}
			return true
		})
		rounds := []int{0, size / 2, size - rec}
		recValue := func(round, pos int) byte { return byte(1 + (round*size/rec+pos/rec)%255) } // never 0
		for r, from := range rounds {
			if r > 0 {
				cut.Lock()
				err := mf.TruncateTail(from)
				cut.Unlock()
				if err != nil {
					t.Fatal(err)
				}
			}
			for pos := from; pos < size; pos += rec {
				v := recValue(r, pos)
				if _, err := mf.AppendBytes(bytes.Repeat([]byte{v}, rec)); err != nil {
					t.Fatalf("round %d: append at %d: %v", r, pos, err)
				}
			}
			if _, err := mf.AppendBytes([]byte{1}); !errors.Is(err, ErrFileFull) {
				t.Fatalf("round %d: append to a full file: %v", r, err)
			}
			if _, err := mf.Flush(); err != nil {
				t.Fatal(err)
			}
			mf.mu.Lock()
			held := cap(mf.pending) + cap(mf.spare)
			mf.mu.Unlock()
			if held != 0 || mf.WrotePosition() != size {
				t.Fatalf("round %d: full file written to %d holds %d bytes of buffers", r, mf.WrotePosition(), held)
			}
		}
		stopAll()
		s, err := mf.ReadFrom(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		for pos := 0; pos < size; pos += rec {
			r := 0
			for r+1 < len(rounds) && pos >= rounds[r+1] {
				r++
			}
			if want := recValue(r, pos); s.B[pos] != want {
				t.Fatalf("record at %d is %d, want %d (round %d)", pos, s.B[pos], want, r)
			}
		}
	})
}

// gatedWriteFile blocks every WriteAt until release is closed, after
// announcing it on entered.
type gatedWriteFile struct {
	File
	entered chan struct{}
	release chan struct{}
}

func (g *gatedWriteFile) WriteAt(p []byte, off int64) (int, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.File.WriteAt(p, off)
}

// TestTruncateTailWaitsForInFlightCommit: a commit writes its pending
// bytes without holding the append lock. A truncation that ran during
// that pwrite would be undone by it: the old bytes would land past the
// cut and the commit would move WrotePosition back over them. So
// TruncateTail and SetWrotePosition wait for a commit in flight.
func TestTruncateTailWaitsForInFlightCommit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cut    func(mf *MappedFile, pos int) error
		zeroes bool // the cut clears the bytes past it
	}{
		{"TruncateTail", (*MappedFile).TruncateTail, true},
		{"SetWrotePosition", func(mf *MappedFile, pos int) error { mf.SetWrotePosition(pos); return nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const size = 64 << 10
			mf, err := OpenMappedFile(osFS{}, filepath.Join(t.TempDir(), FileName(0)), 0, size)
			if err != nil {
				t.Fatal(err)
			}
			defer mf.Close()
			mf.SetBuffered(true)
			first := bytes.Repeat([]byte{1}, 4096)
			if _, err := mf.AppendBytes(first); err != nil {
				t.Fatal(err)
			}
			if err := mf.Commit(); err != nil {
				t.Fatal(err)
			}
			gate := &gatedWriteFile{File: mf.file, entered: make(chan struct{}, 1), release: make(chan struct{})}
			mf.file = gate
			release := sync.OnceFunc(func() { close(gate.release) })
			defer release()
			if _, err := mf.AppendBytes(bytes.Repeat([]byte{2}, 4096)); err != nil {
				t.Fatal(err)
			}
			committed := make(chan error, 1)
			go func() { committed <- mf.Commit() }()
			<-gate.entered

			truncated := make(chan error, 1)
			go func() { truncated <- tc.cut(mf, len(first)) }()
			// The truncation must not finish while the pwrite is held. A
			// broken lock order lets it return at once; the bound only
			// limits how long a correct one is given to show it waits.
			select {
			case err := <-truncated:
				t.Fatalf("%s returned (%v) while a commit's pwrite was in flight", tc.name, err)
			case <-time.After(200 * time.Millisecond):
			}
			release()
			if err := <-committed; err != nil {
				t.Fatal(err)
			}
			if err := <-truncated; err != nil {
				t.Fatal(err)
			}
			if w := mf.WrotePosition(); w != len(first) {
				t.Fatalf("WrotePosition %d after truncating to %d", w, len(first))
			}
			if !tc.zeroes {
				return
			}
			if _, err := mf.Flush(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4096)
			if _, err := gate.File.ReadAt(got, int64(len(first))); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, make([]byte, len(got))) {
				t.Fatal("the commit's bytes are back in the file past the truncation point")
			}
		})
	}
}

// TestCommitAfterCloseFails: pending bytes a closed file can no longer
// write are an error for the caller, not a silent success.
func TestCommitAfterCloseFails(t *testing.T) {
	mf, err := OpenMappedFile(osFS{}, filepath.Join(t.TempDir(), FileName(0)), 0, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	mf.SetBuffered(true)
	if _, err := mf.AppendBytes([]byte("pending")); err != nil {
		t.Fatal(err)
	}
	if err := mf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mf.Commit(); !errors.Is(err, ErrFileClosed) {
		t.Fatalf("Commit after Close: %v, want ErrFileClosed", err)
	}
}

// TestFaultFSCrashKeepsOnlyDurablyNamedDirectories: a directory whose
// parent was never synced vanishes in a crash with the synced files in it;
// MkdirAllDurable's directories survive.
func TestFaultFSCrashKeepsOnlyDurablyNamedDirectories(t *testing.T) {
	f := NewFaultFS(1)
	if err := f.MkdirAll("/plain/q", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllDurable(f, "/durable/q"); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/plain/q", "/durable/q"} {
		if err := WriteFileAtomic(f, dir+"/file", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	c := f.Crash(CrashOptions{})
	if _, err := c.Stat("/plain/q/file"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file under a directory never named durably survived the crash: %v", err)
	}
	if _, err := c.Stat("/durable/q/file"); err != nil {
		t.Fatalf("a file under MkdirAllDurable's directory: %v", err)
	}
	if ents, err := c.ReadDir("/durable"); err != nil || len(ents) != 1 {
		t.Fatalf("ReadDir(/durable) after the crash: %v %v", ents, err)
	}
}

// TestSyncNamesMakesLeftoverNamesDurable: directories and a file a killed
// process left with unsynced names. A clean open's SyncNames makes the
// root and the directories directly under it durable; after an unclean
// stop (walk) every name under the root survives a power cut.
func TestSyncNamesMakesLeftoverNamesDurable(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(fmt.Sprint("walk=", walk), func(t *testing.T) {
			f := NewFaultFS(1)
			if err := f.MkdirAll("/data/store/cq/T/0", 0o755); err != nil {
				t.Fatal(err)
			}
			fl, err := f.OpenFile("/data/store/cq/T/0/seg", os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fl.WriteAt([]byte("x"), 0); err != nil {
				t.Fatal(err)
			}
			if err := fl.Sync(); err != nil {
				t.Fatal(err)
			}
			fl.Close()
			if err := SyncNames(f, "/data/store", walk); err != nil {
				t.Fatal(err)
			}
			c := f.Crash(CrashOptions{})
			if fi, err := c.Stat("/data/store/cq/T"); err != nil || !fi.IsDir() {
				t.Fatalf("a name in a directory under the root after the crash: %v", err)
			}
			_, err = c.Stat("/data/store/cq/T/0/seg")
			if walk && err != nil {
				t.Fatalf("the synced file after the crash: %v", err)
			}
			if _, terr := c.Stat("/data/store/cq/T/0"); !walk && !errors.Is(terr, os.ErrNotExist) {
				t.Fatalf("a clean open synced a queue's directory name: %v", terr)
			}
		})
	}
	if err := SyncNames(NewFaultFS(1), "/missing", true); err != nil {
		t.Fatalf("SyncNames of a missing root: %v", err)
	}
}

// TestSyncNamesSkipsUnreadableDirectories: a store root that is a mount
// point holds lost+found, which only root may read, and an operator may
// make the root inside a directory the broker's user may not read; opening
// the store as that user must not fail on them.
func TestSyncNamesSkipsUnreadableDirectories(t *testing.T) {
	f := NewFaultFS(1)
	for _, d := range []string{"/data/lost+found", "/data/commitlog"} {
		if err := MkdirAllDurable(f, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFileAtomic(f, "/data/commitlog/seg", []byte("x")); err != nil {
		t.Fatal(err)
	}
	f.SetFaultFunc(func(op FaultOp, name string) error {
		if (name == "/data/lost+found" && (op == OpRead || op == OpSyncDir)) || (name == "/" && op == OpSyncDir) {
			return &os.PathError{Op: op.String(), Path: name, Err: unix.EACCES}
		}
		return nil
	})
	if err := SyncNames(f, "/data", true); err != nil {
		t.Fatalf("SyncNames with an unreadable lost+found and parent: %v", err)
	}
	f.SetFaultFunc(func(op FaultOp, name string) error {
		if name == "/data/commitlog" && op == OpSyncDir {
			return &os.PathError{Op: "fsync", Path: name, Err: unix.EIO}
		}
		return nil
	})
	if err := SyncNames(f, "/data", true); !errors.Is(err, unix.EIO) {
		t.Fatalf("SyncNames with a failing directory sync: %v, want EIO", err)
	}
}

// A mapping written while another goroutine syncs it is what the stores do
// (an index file's header is written while a flush msyncs the appended
// range): the FaultFS model of that msync must not itself be a data race,
// or every -race test of a store on a FaultFS can fail at random.
func TestFaultFSMsyncWhileMappingIsWritten(t *testing.T) {
	f := NewFaultFS(3)
	MkdirAllDurable(f, "/d")
	mf, err := OpenMappedFile(f, "/d/"+FileName(0), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if p := mf.WrotePosition(); p > 0 {
				if err := mf.WriteAt([]byte{byte(i)}, p-1); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	chunk := make([]byte, 4096)
	for range 200 {
		if _, err := mf.Append(chunk); err != nil {
			t.Fatal(err)
		}
		if _, err := mf.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
}
