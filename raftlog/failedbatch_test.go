package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// A StoreLogs batch whose sync failed was never acknowledged, but its bytes
// may stay readable in the page cache (after a failed writeback Linux marks
// the pages clean), and the zeros that cut it back may reach only the page
// cache too. Neither a process restart nor a later power loss may bring
// the batch back.

// sameSizeRange returns sameSize entries from..to of term.
func sameSizeRange(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, sameSize(i, term))
	}
	return out
}

// checkTerms checks that 1..last holds sameSize entries of term 1 below
// from and of term after.
func checkTerms(t *testing.T, s *LogStore, last, from, after uint64) {
	t.Helper()
	if got, _ := s.LastIndex(); got != last {
		t.Fatalf("last index %d, want %d", got, last)
	}
	raftlogtest.CheckRange(t, s, 1, last, func(i uint64) *raft.Log {
		if i < from {
			return sameSize(i, 1)
		}
		return sameSize(i, after)
	})
}

// TestFailedBatchNotServedAfterProcessRestart: the msync of a batch fails
// (EIO) and the process restarts without a machine restart, so the reopened
// log sees the page cache, which still holds the batch. The batch must be
// gone: not in LastIndex, not readable. Entries stored afterwards survive a
// power loss. The same holds when even the meta record of the failed batch
// cannot be written.
func TestFailedBatchNotServedAfterProcessRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metaFail bool // the meta file cannot be written either
		recover  bool // a Recover attempt fails before the restart
	}{
		{"restart", false, false},
		{"recover-fails-then-restart", false, true},
		{"meta-fails-then-restart", true, false},
		{"meta-fails-recover-fails-then-restart", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := storage.NewFaultFS(31)
			f.SetCleanAfterFailedSync(true)
			var bad atomic.Bool
			f.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if !bad.Load() {
					return nil
				}
				if op == storage.OpMsync && strings.Contains(name, segmentDirName) {
					return unix.EIO
				}
				if tc.metaFail && op == storage.OpWrite && strings.Contains(name, metaFileName) {
					return unix.EIO
				}
				return nil
			})
			o := testOptions(f)
			o.CheckpointBytes = 1 << 40
			s := mustOpen(t, "/log", o)
			storeAll(t, s, sameSizeRange(1, 30, 1))
			bad.Store(true)
			if err := s.StoreLogs(sameSizeRange(31, 40, 1)); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("StoreLogs with EIO: %v", err)
			}
			if tc.recover {
				if err := s.Recover(); err == nil {
					t.Fatal("Recover succeeded while syncs still fail")
				}
			}
			s.Close()
			bad.Store(false)
			s = mustOpen(t, "/log", o) // same FaultFS: the page cache is kept
			if last, _ := s.LastIndex(); last != 30 {
				t.Fatalf("last index %d after the restart, want 30: the failed batch is served", last)
			}
			var l raft.Log
			if err := s.GetLog(31, &l); err != raft.ErrLogNotFound {
				t.Fatalf("GetLog(31) after the restart: %v, want raft.ErrLogNotFound", err)
			}
			storeAll(t, s, sameSizeRange(31, 33, 2))
			f = f.Crash(storage.CrashOptions{TearPages: true})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			defer s.Close()
			checkTerms(t, s, 33, 31, 2)
		})
	}
}

// TestFailedBatchRollbackDurable: a batch across a segment boundary is
// synced in its first segment and fails in the second, so the disk holds
// part of it. Its cut-back zeros reach only the page cache at first (the
// disk stays bad for a while, so their msync fails too); a later attempt, by Recover or by the Open
// after a process restart, must still make them durable. Otherwise a power
// loss after shorter new entries brings the old batch's tail back behind
// them.
func TestFailedBatchRollbackDurable(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "recover", true: "restart"}[restart], func(t *testing.T) {
			f := storage.NewFaultFS(32)
			f.SetCleanAfterFailedSync(true)
			const (
				none = iota
				secondSegment
				allSegments
			)
			var mode atomic.Int32
			seg2 := fmt.Sprintf("%020d", 16<<10)
			f.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if op != storage.OpMsync || !strings.Contains(name, segmentDirName) {
					return nil
				}
				switch mode.Load() {
				case secondSegment:
					if strings.Contains(name, seg2) {
						mode.Store(allSegments) // the disk goes bad
						return unix.EIO
					}
				case allSegments:
					return unix.EIO
				}
				return nil
			})
			o := testOptions(f)
			o.CheckpointBytes = 1 << 40
			s := mustOpen(t, "/log", o)
			storeAll(t, s, sameSizeRange(1, 60, 1))
			mode.Store(secondSegment)
			if err := s.StoreLogs(sameSizeRange(61, 70, 1)); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("StoreLogs with EIO in the second segment: %v", err)
			}
			if mode.Load() != allSegments {
				t.Fatal("the batch did not reach the second segment")
			}
			if err := s.Recover(); err == nil {
				t.Fatal("Recover succeeded while syncs fail")
			}
			mode.Store(none)
			if restart {
				s.Close()
				s = mustOpen(t, "/log", o)
			} else if err := s.Recover(); err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if last, _ := s.LastIndex(); last != 60 {
				t.Fatalf("last index %d after the cut, want 60", last)
			}
			storeAll(t, s, sameSizeRange(61, 63, 2))
			f = f.Crash(storage.CrashOptions{})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			defer s.Close()
			checkTerms(t, s, 63, 61, 2)
		})
	}
}

// TestTruncationRecordInDoubtStopsWrites: a truncation record whose write
// fails after its rename (the directory sync) may be the meta file a
// restart reads, and that restart ends the log at the cut. So the store
// must not take entries past the cut meanwhile: whatever StoreLogs accepts
// after the failed truncation is still there after a process restart.
func TestTruncationRecordInDoubtStopsWrites(t *testing.T) {
	f := storage.NewFaultFS(33)
	var syncDirs, renames atomic.Int32
	syncDirs.Store(1) // no fault before the truncation: Open syncs /log too
	f.SetFaultFunc(func(op storage.FaultOp, name string) error {
		switch {
		case op == storage.OpSyncDir && name == "/log" && syncDirs.Add(1) == 1:
			return unix.EIO // the record's rename is not made durable
		case op == storage.OpRename && strings.Contains(name, metaFileName) && renames.Add(1) > 1:
			return unix.EIO // no later meta write replaces the record
		}
		return nil
	})
	o := testOptions(f)
	o.CheckpointBytes = 1 << 40
	s := mustOpen(t, "/log", o)
	storeAll(t, s, sameSizeRange(1, 40, 1))
	syncDirs.Store(0)
	renames.Store(0)
	if err := s.DeleteRange(31, 40); err == nil {
		t.Fatal("DeleteRange succeeded with a failing directory sync")
	}
	stored := s.StoreLogs(sameSizeRange(41, 45, 1)) == nil
	s.Close()
	f.SetFaultFunc(nil)
	s = mustOpen(t, "/log", o)
	defer s.Close()
	last, _ := s.LastIndex()
	if stored && last != 45 {
		t.Fatalf("entries 41..45 were stored after the failed truncation but the restart ends the log at %d", last)
	}
	raftlogtest.CheckRange(t, s, 1, last, func(i uint64) *raft.Log { return sameSize(i, 1) })
}

// quarterPage returns an entry of term whose frame is 1 KiB: four to a
// 4 KiB page, so a batch can end exactly where a page and an older frame
// begin.
func quarterPage(i, term uint64) *raft.Log {
	data := make([]byte, 1024-FrameHeaderSize-FrameTrailerSize)
	for k := range data {
		data[k] = byte(i + term + uint64(k))
	}
	return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data}
}

func quarterPages(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, quarterPage(i, term))
	}
	return out
}

// TestFailedBatchStaleFramesAfterPowerLoss: a batch of term 1 spans two
// segments; its first segment is synced, the second's sync fails, so the
// disk holds part of the batch. Then the disk fails everything for a while:
// the meta record of the cut cannot be written and the sync of its zeros
// fails, which marks the zeroed pages clean. A process restart sees those
// zeros and ends the log before the batch, without a record to rewrite
// them; the leader of term 2 stores shorter entries there, which end on a
// page and frame boundary of the old batch. A power loss then brings the
// old batch's frames back right after them, with following indexes. A
// frame of a lower term than the one before it is not part of the log:
// Open ends the log at it, whether the scan reaches it from an earlier
// anchor or starts there (a checkpoint after the new entries).
func TestFailedBatchStaleFramesAfterPowerLoss(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		t.Run(map[bool]string{false: "scan", true: "checkpoint"}[checkpoint], func(t *testing.T) {
			f := storage.NewFaultFS(34)
			f.SetCleanAfterFailedSync(true)
			const (
				none = iota
				secondSegment
				allWrites
			)
			var mode atomic.Int32
			const segSize = 64 << 10
			seg2 := fmt.Sprintf("%020d", segSize)
			f.SetFaultFunc(func(op storage.FaultOp, name string) error {
				switch mode.Load() {
				case secondSegment:
					if op == storage.OpMsync && strings.Contains(name, seg2) {
						mode.Store(allWrites) // the disk goes bad
						return unix.EIO
					}
				case allWrites:
					if (op == storage.OpMsync && strings.Contains(name, segmentDirName)) ||
						(op == storage.OpWrite && strings.Contains(name, metaFileName)) {
						return unix.EIO
					}
				}
				return nil
			})
			o := testOptions(f)
			o.SegmentSize = segSize
			o.CheckpointBytes = 1 << 40
			s := mustOpen(t, "/log", o)
			storeAll(t, s, quarterPages(1, 20, 1))
			mode.Store(secondSegment)
			// 21..63 fill the first segment, 64..70 go to the second.
			if err := s.StoreLogs(quarterPages(21, 70, 1)); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("StoreLogs with EIO in the second segment: %v", err)
			}
			if mode.Load() != allWrites {
				t.Fatal("the batch did not reach the second segment")
			}
			s.Close()
			mode.Store(none)
			s = mustOpen(t, "/log", o) // a process restart: same page cache
			if last, _ := s.LastIndex(); last != 20 {
				t.Fatalf("last index %d after the restart, want 20", last)
			}
			storeAll(t, s, quarterPages(21, 24, 2))
			if checkpoint {
				s.Close()
				s = mustOpen(t, "/log", o)
			}
			f = f.Crash(storage.CrashOptions{})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			want := func(i uint64) *raft.Log {
				if i <= 20 {
					return quarterPage(i, 1)
				}
				return quarterPage(i, 2)
			}
			if last, _ := s.LastIndex(); last != 24 {
				var l raft.Log
				_ = s.GetLog(last, &l)
				t.Fatalf("last index %d (term %d) after the power loss, want 24: frames of the cut batch are served", last, l.Term)
			}
			raftlogtest.CheckRange(t, s, 1, 24, want)
			// The stale frames are cut durably: entries stored over them
			// survive the next power loss, and nothing follows them.
			storeAll(t, s, quarterPages(25, 26, 2))
			f = f.Crash(storage.CrashOptions{})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			defer s.Close()
			if last, _ := s.LastIndex(); last != 26 {
				t.Fatalf("last index %d after the second power loss, want 26", last)
			}
			raftlogtest.CheckRange(t, s, 1, 26, want)
		})
	}
}

// chunkEntry returns an entry of term with 64 KiB of data: sixteen of them
// fill a chunk (commitChunkBytes), so a batch of them is written out before
// it is done.
func chunkEntry(i, term uint64) *raft.Log {
	data := make([]byte, 64<<10)
	for k := range data {
		data[k] = byte(i*7 + term + uint64(k))
	}
	return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data}
}

func chunkEntries(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, chunkEntry(i, term))
	}
	return out
}

// TestLargeBatchFailsAfterChunkWrite: a 4 MiB batch starting in one
// segment writes a chunk there, rolls into a second segment and writes a
// chunk there too, rolls into a third, and is synced (or committed) per
// segment at its end. A write of it then fails: in the second segment
// while the batch goes on, or in the third at its end, when the first two
// are already synced. The failure is EIO, which stops the log until
// Recover, or ENOSPC, which only refuses the batch. Nothing of the batch
// may be served meanwhile or afterwards, a power loss right after the cut
// must find zeros wherever the batch wrote, and the batch stored again
// lands byte for byte where a log that never failed puts it.
func TestLargeBatchFailsAfterChunkWrite(t *testing.T) {
	type tcase struct {
		errno   error
		sync    bool
		failSeg int64 // the segment whose first write of the batch fails
	}
	var cases []tcase
	for _, errno := range []error{unix.EIO, unix.ENOSPC} {
		for _, sync := range []bool{true, false} {
			for _, seg := range []int64{1, 2} {
				cases = append(cases, tcase{errno, sync, seg})
			}
		}
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%s-sync=%v-seg%d", map[bool]string{true: "enospc", false: "eio"}[tc.errno == unix.ENOSPC], tc.sync, tc.failSeg)
		t.Run(name, func(t *testing.T) {
			const segSize = 2 << 20
			segPath := func(i int64) string { return "/log/" + segmentDirName + "/" + storage.FileName(i*segSize) }
			f := storage.NewFaultFS(41)
			f.SetCleanAfterFailedSync(true)
			var (
				armed, failed atomic.Bool
				chunkWrites   atomic.Int32  // writes of the batch to earlier segments before the failure
				patched       atomic.Uint64 // the last entry of the batch written into a buffer
				patchedAtFail atomic.Uint64
				servedMid     atomic.Value
				s             *LogStore
			)
			const batchStart = 5
			f.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if !armed.Load() || op != storage.OpWrite || !strings.Contains(name, segmentDirName) {
					return nil
				}
				if name == segPath(tc.failSeg) {
					if !failed.Load() {
						patchedAtFail.Store(patched.Load())
					}
					failed.Store(true)
					return tc.errno
				}
				if !failed.Load() {
					chunkWrites.Add(1)
				}
				return nil
			})
			o := Options{FS: f, SegmentSize: segSize, IndexFileSize: 4096, CheckpointBytes: 1 << 40, Sync: tc.sync}
			o.PatchCommand = func(l *raft.Log, _ []byte, _ int64) error {
				patched.Store(l.Index)
				// Runs inside the batch, once its first chunk is written.
				if armed.Load() && l.Index == batchStart+20 {
					var got raft.Log
					last, _ := s.LastIndex()
					if err := s.GetLog(batchStart, &got); err != raft.ErrLogNotFound || last != batchStart-1 {
						servedMid.Store(fmt.Sprintf("last index %d, GetLog(%d): %v", last, batchStart, err))
					}
				}
				return nil
			}
			s = mustOpen(t, "/log", o)
			storeAll(t, s, chunkEntries(1, batchStart-1, 1))
			endBefore := s.NextPosition()
			batch := chunkEntries(batchStart, batchStart+63, 1)
			armed.Store(true)
			err := s.StoreLogs(batch)
			if !failed.Load() || chunkWrites.Load() == 0 {
				t.Fatalf("the batch did not fail in segment %d after writes to earlier ones (failed %v, writes %d): %v",
					tc.failSeg, failed.Load(), chunkWrites.Load(), err)
			}
			if mid := patchedAtFail.Load() < batchStart+63; mid != (tc.failSeg == 1) {
				t.Fatalf("the write in segment %d failed with entry %d the last one buffered", tc.failSeg, patchedAtFail.Load())
			}
			if v := servedMid.Load(); v != nil {
				t.Fatalf("during the batch, after a chunk was written: %s", v)
			}
			armed.Store(false)
			if tc.errno == unix.ENOSPC {
				if !errors.Is(err, storage.ErrDiskFull) || s.Failure() != nil {
					t.Fatalf("StoreLogs on a full disk: %v (failure %v)", err, s.Failure())
				}
			} else {
				if !errors.Is(err, ErrStoreFailed) {
					t.Fatalf("StoreLogs with EIO: %v", err)
				}
				if err := s.Recover(); err != nil {
					t.Fatalf("Recover: %v", err)
				}
			}
			if last, _ := s.LastIndex(); last != batchStart-1 {
				t.Fatalf("last index %d after the failed batch, want %d", last, batchStart-1)
			}
			if s.NextPosition() != endBefore {
				t.Fatalf("next position %d after the failed batch, want %d", s.NextPosition(), endBefore)
			}

			// A power loss now: the disk holds nothing of the batch.
			g := f.Crash(storage.CrashOptions{})
			s.Close()
			sf, err := g.OpenFile(segPath(0), os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			img := make([]byte, segSize)
			if _, err := sf.ReadAt(img, 0); err != nil {
				t.Fatal(err)
			}
			sf.Close()
			if i := bytes.IndexFunc(img[endBefore:], func(r rune) bool { return r != 0 }); i >= 0 {
				t.Fatalf("durable byte at %d (past the end %d of the log) is not zero after the cut", endBefore+int64(i), endBefore)
			}
			for i := int64(1); i <= 2; i++ {
				if _, err := g.Stat(segPath(i)); err == nil {
					t.Fatalf("segment %s of the cut batch is still there", segPath(i))
				}
			}
			o.FS = g
			s = mustOpen(t, "/log", o)
			defer s.Close()
			if last, _ := s.LastIndex(); last != batchStart-1 {
				t.Fatalf("last index %d after the power loss, want %d", last, batchStart-1)
			}
			ro := o
			ro.FS, ro.PatchCommand = storage.NewFaultFS(42), nil
			ref := mustOpen(t, "/ref", ro)
			defer ref.Close()
			storeAll(t, ref, chunkEntries(1, batchStart-1, 1))
			storeAll(t, ref, batch)
			storeAll(t, s, batch)
			sameLayout(t, s, ref)
		})
	}
}
