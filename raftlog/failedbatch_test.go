package raftlog

import (
	"errors"
	"fmt"
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
