package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// crashWithFlip stores entries 1..n in batches of 8 (synced, no checkpoint
// after the first), crashes cleanly and flips one bit in the middle of the
// frame of index bad.
// It returns the FS to reopen, the file, the frame's offset in it and the
// flipped byte's offset.
func crashWithFlip(t *testing.T, n, bad uint64) (*storage.FaultFS, Options, string, int64, int64) {
	t.Helper()
	f := storage.NewFaultFS(7)
	o := testOptions(f)
	o.CheckpointBytes = 1 << 40
	o.SegmentSize = 64 << 10
	s := mustOpen(t, "/log", o)
	for i := uint64(1); i <= n; i += 8 {
		storeAll(t, s, raftlogtest.Entries(i, min(i+7, n), 1))
	}
	pos, frame, err := s.ReadFrame(bad)
	if err != nil {
		t.Fatal(err)
	}
	mf := s.segQ.FindByOffset(pos)
	path, off := mf.Path(), pos-mf.FileFromOffset()+int64(len(frame)/2)
	f = f.Crash(storage.CrashOptions{})
	s.Close()
	if err := f.FlipBit(path, off, 3); err != nil {
		t.Fatal(err)
	}
	o.FS = f
	return f, o, path, pos - mf.FileFromOffset(), off
}

// TestMidLogCorruptionRefusesToTruncate: a bit flipped in a synced frame
// with many acknowledged frames after it fails Open with an error naming
// the file and offset, and cuts nothing: with the bit flipped back every
// entry is there.
func TestMidLogCorruptionRefusesToTruncate(t *testing.T) {
	const n, bad = 400, 150
	f, o, path, off, flipped := crashWithFlip(t, n, bad)
	_, err := Open("/log", o)
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrMidLogCorruption) {
		t.Fatalf("Open after a mid-log bit flip: %v, want a CorruptionError", err)
	}
	if ce.Path != path || ce.FileOffset != off || ce.Index != bad || ce.ValidIndex != n {
		t.Fatalf("CorruptionError %+v, want %s offset %d index %d valid to %d", ce, path, off, bad, n)
	}
	if msg := err.Error(); !strings.Contains(msg, filepath.Base(path)) || !strings.Contains(msg, "offset") {
		t.Fatalf("error does not name the file and offset: %s", msg)
	}
	t.Logf("%v", err)
	// Nothing was cut: repairing the bit gives the whole log back.
	if err := f.FlipBit(path, flipped, 3); err != nil {
		t.Fatal(err)
	}
	s, err := Open("/log", o)
	if err != nil {
		t.Fatalf("reopen after repair: %v", err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != n {
		t.Fatalf("last index %d after repair, want %d", last, n)
	}
	raftlogtest.CheckRange(t, s, 1, n, term1)
}

// TestTornLastBatchStillCut: a bad frame within the last batch's window
// (what a torn unsynced write looks like) is cut as before.
func TestTornLastBatchStillCut(t *testing.T) {
	const n, bad = 400, 390
	_, o, _, _, _ := crashWithFlip(t, n, bad)
	s := mustOpen(t, "/log", o)
	defer s.Close()
	if last, _ := s.LastIndex(); last != bad-1 {
		t.Fatalf("last index %d, want %d (cut at the torn frame)", last, bad-1)
	}
	if s.Recovery().StopErr == nil {
		t.Fatal("recovery reported no stop")
	}
}

// msyncCrashFS is a FaultFS whose next msync of a segment, once armed,
// is a power loss: it takes the crash image (unsynced pages torn) at that
// moment, before any error handling of the store changes the page cache,
// and fails.
type msyncCrashFS struct {
	*storage.FaultFS
	armed   bool
	crashed *storage.FaultFS
}

func (f *msyncCrashFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	file, err := f.FaultFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return msyncCrashFile{File: file, fs: f}, nil
}

type msyncCrashFile struct {
	storage.File
	fs *msyncCrashFS
}

func (m msyncCrashFile) Msync(b []byte) error {
	if m.fs.armed && strings.Contains(m.Name(), segmentDirName) {
		m.fs.armed = false
		m.fs.crashed = m.fs.FaultFS.Crash(storage.CrashOptions{TearPages: true})
		return unix.EIO
	}
	return m.File.Msync(b)
}

// reopenAfterTornBatch stores entries 1..10 (synced, checkpointed) with
// batch window writeWindow, then StoreLogs of entries 11..74 torn by a
// power loss during its sync, and reopens the crash image with window
// reopenWindow. It fails the test unless the synced entries are there.
func reopenAfterTornBatch(t *testing.T, seed uint64, writeWindow, reopenWindow int) (*LogStore, Options) {
	t.Helper()
	f := &msyncCrashFS{FaultFS: storage.NewFaultFS(seed)}
	o := testOptions(f)
	o.SegmentSize = 1 << 20
	o.CheckpointBytes = 1 << 40
	o.MaxBatchEntries = writeWindow
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 10, 1))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	f.armed = true
	if err := s.StoreLogs(raftlogtest.Entries(11, 74, 1)); err == nil {
		t.Fatalf("seed %d: StoreLogs returned nil with its sync failing", seed)
	}
	s.Close()
	o.FS = f.crashed
	o.MaxBatchEntries = reopenWindow
	s, err := Open("/log", o)
	if err != nil {
		t.Fatalf("seed %d: reopen after a torn batch (window %d, reopened with %d): %v", seed, writeWindow, reopenWindow, err)
	}
	last, _ := s.LastIndex()
	if last < 10 {
		t.Fatalf("seed %d: last index %d, the synced entries end at 10", seed, last)
	}
	raftlogtest.CheckRange(t, s, 1, last, term1)
	return s, o
}

// TestBatchLongerThanTheWindowTornIsCut: a StoreLogs call holding more
// entries than MaxBatchEntries (a leader configured with a larger
// raftMaxAppendEntries than this member) torn by a power loss during its
// sync is cut like any torn batch: Open must not take valid frames a
// window or more past a torn one for damage to acknowledged entries.
func TestBatchLongerThanTheWindowTornIsCut(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		s, _ := reopenAfterTornBatch(t, seed, 8, 8)
		s.Close()
	}
}

// TestTornBatchCutAfterWindowLowered: a batch of 64 entries torn by a power
// loss, reopened by a process configured with a window of 8 (an operator
// lowered raftMaxAppendEntries in the restart), is cut like any torn
// batch: the window that tore it is the writing process's, recorded in
// windowFileName, not the one configured now.
func TestTornBatchCutAfterWindowLowered(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		s, o := reopenAfterTornBatch(t, seed, 64, 8)
		if w, err := readWindow(o.FS, "/log"); err != nil || w != 8 {
			t.Fatalf("seed %d: recorded window %d (%v) after reopening with 8", seed, w, err)
		}
		s.Close()
	}
}
