package raftlog

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// bigEntry is entry i of term 1 with 16 KiB of data.
func bigEntry(i uint64) *raft.Log {
	l := &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: make([]byte, 16<<10)}
	for j := range l.Data {
		l.Data[j] = byte(i + uint64(j))
	}
	return l
}

// TestWarmAhead, on the real file system: while batches are appended, the
// warmer turns the fallocated (unwritten) space ahead of the writer into
// written zeros — SEEK_DATA reports data there — every entry reads back
// intact, also after a reopen, and the segment roll and Close work with the
// warmer running.
func TestWarmAhead(t *testing.T) {
	dir := t.TempDir()
	o := Options{FS: storage.OSFS(), SegmentSize: 4 << 20, IndexFileSize: 64 << 10, Sync: true,
		WarmAhead: 1 << 20, WarmChunk: 128 << 10}
	s := mustOpen(t, dir, o)
	storeAll(t, s, []*raft.Log{bigEntry(1)})
	seg := s.segQ.Last()
	probe := seg.FileFromOffset() + 2<<20 // not yet warmed: the warmer stays within 1 MiB of the writer
	f, err := os.Open(seg.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	holes := true
	if start, err := unixSeekData(f, probe-seg.FileFromOffset()); err == nil && start == probe-seg.FileFromOffset() {
		holes = false // this file system does not report unwritten extents as holes
		t.Log("SEEK_DATA does not see unwritten extents here; checking contents only")
	}
	// Append ~1.6 MiB more, then wait for the warmer.
	var i uint64 = 2
	for ; i <= 100; i += 4 {
		storeAll(t, s, []*raft.Log{bigEntry(i), bigEntry(i + 1), bigEntry(i + 2), bigEntry(i + 3)})
	}
	last := i - 1
	var from, warmed int64
	// After a kick the warmer runs to a full distance ahead; it is kicked
	// again only when the writer comes within half of it.
	testutil.WaitFor(t, 10*time.Second, "the warmer at least half the distance ahead of the writer", func() bool {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		from, warmed = s.nextPos, s.warm.warmed
		return s.warm.claimHi == 0 && warmed >= min(s.nextPos+int64(o.WarmAhead)/2, seg.FileFromOffset()+int64(seg.Size()))
	})
	if holes {
		lo := (from + int64(o.WarmChunk) + warmPage - 1) / warmPage * warmPage
		start, err := unixSeekData(f, lo-seg.FileFromOffset())
		if err != nil || start != lo-seg.FileFromOffset() {
			t.Fatalf("warmed range [%d,%d) is not written on disk: SEEK_DATA(%d) = %d, %v", lo, warmed, lo, start, err)
		}
	}
	// Keep appending through the segment roll and beyond, warmer running.
	for ; i <= 400; i++ {
		storeAll(t, s, []*raft.Log{bigEntry(i)})
	}
	last = i - 1
	if len(s.segQ.Files()) < 2 {
		t.Fatalf("want a segment roll, have %d segment(s)", len(s.segQ.Files()))
	}
	raftlogtest.CheckRange(t, s, 1, last, bigEntry)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, o)
	defer s.Close()
	raftlogtest.CheckRange(t, s, 1, last, bigEntry)
}

// unixSeekData is lseek(SEEK_DATA) on f.
func unixSeekData(f *os.File, off int64) (int64, error) {
	n, err := f.Seek(off, 3) // SEEK_DATA
	if errors.Is(err, io.EOF) {
		return -1, err
	}
	return n, err
}
