package raftlog

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// A full disk must not stop the log for good: a batch refused for lack of
// space is cut back and retried, an I/O error stops the log until Recover.

// faultWhen installs a FaultFS hook failing op with errno for files whose
// name contains part, while on is set.
func faultWhen(f *storage.FaultFS, op storage.FaultOp, part string, errno error, on *atomic.Bool) {
	f.SetFaultFunc(func(o storage.FaultOp, name string) error {
		if on.Load() && o == op && strings.Contains(name, part) {
			return errno
		}
		return nil
	})
}

// samePositions fails unless every index in [from, to] sits at the same
// position in a and b.
func samePositions(t *testing.T, a, b *LogStore, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		pa, _, err := a.Locate(i)
		if err != nil {
			t.Fatalf("a.Locate(%d): %v", i, err)
		}
		pb, _, err := b.Locate(i)
		if err != nil {
			t.Fatalf("b.Locate(%d): %v", i, err)
		}
		if pa != pb {
			t.Fatalf("index %d at %d, reference at %d", i, pa, pb)
		}
	}
}

// TestDiskFullBatchIsRefusedNotFatal: ENOSPC from fallocate (new segment or
// index file) or from the segment pwrite fails StoreLogs with ErrDiskFull
// but does not stop the store; once space returns the same batch is stored
// at the positions a log that never failed uses, and it survives a crash.
func TestDiskFullBatchIsRefusedNotFatal(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   storage.FaultOp
		part string
	}{
		{"fallocate", storage.OpFallocate, ""},
		{"write", storage.OpWrite, segmentDirName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := storage.NewFaultFS(21)
			var full atomic.Bool
			faultWhen(f, tc.op, tc.part, unix.ENOSPC, &full)
			o := testOptions(f)
			s := mustOpen(t, "/log", o)
			ref := mustOpen(t, "/ref", testOptions(storage.NewFaultFS(22)))
			defer ref.Close()
			next := uint64(1)
			refused := 0
			// Batches of 7 cross segment (16 KiB) and index-file (64 slots)
			// boundaries; every third batch meets a full disk first.
			for round := 0; round < 30; round++ {
				batch := raftlogtest.Entries(next, next+6, 1)
				if round%3 == 1 {
					full.Store(true)
					err := s.StoreLogs(batch)
					full.Store(false)
					if err != nil {
						if !errors.Is(err, storage.ErrDiskFull) || errors.Is(err, ErrStoreFailed) {
							t.Fatalf("round %d: StoreLogs on a full disk: %v", round, err)
						}
						refused++
						if s.Failure() != nil {
							t.Fatalf("round %d: store stopped by ENOSPC: %v", round, s.Failure())
						}
						if last, _ := s.LastIndex(); last != next-1 {
							t.Fatalf("round %d: LastIndex %d after a refused batch, want %d", round, last, next-1)
						}
						storeAll(t, s, batch) // space is back
					}
				} else {
					storeAll(t, s, batch)
				}
				storeAll(t, ref, batch)
				next += 7
			}
			if refused == 0 {
				t.Fatal("no batch met the full disk")
			}
			raftlogtest.CheckRange(t, s, 1, next-1, term1)
			samePositions(t, s, ref, 1, next-1)
			f = f.Crash(storage.CrashOptions{TearPages: true})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			defer s.Close()
			raftlogtest.CheckRange(t, s, 1, next-1, term1)
			samePositions(t, s, ref, 1, next-1)
		})
	}
}

// TestRetentionMetaWriteENOSPC: a retention pass whose meta write fails
// deletes nothing, keeps FirstIndex and does not stop the store; the next
// pass after space returns deletes.
func TestRetentionMetaWriteENOSPC(t *testing.T) {
	f := storage.NewFaultFS(23)
	var full atomic.Bool
	faultWhen(f, storage.OpWrite, metaFileName, unix.ENOSPC, &full)
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	defer s.Close()
	storeAll(t, s, raftlogtest.Entries(1, 600, 1))
	segs := len(s.segQ.Files())
	full.Store(true)
	if _, err := s.DeleteSegmentsBefore(450); err == nil || errors.Is(err, ErrStoreFailed) {
		t.Fatalf("DeleteSegmentsBefore with a full disk: %v", err)
	}
	if s.Failure() != nil {
		t.Fatalf("store stopped: %v", s.Failure())
	}
	if n := len(s.segQ.Files()); n != segs {
		t.Fatalf("%d segments after a failed pass, want %d", n, segs)
	}
	raftlogtest.CheckRange(t, s, 1, 600, term1)
	storeAll(t, s, raftlogtest.Entries(601, 650, 1)) // appends go on meanwhile
	full.Store(false)
	first, err := s.DeleteSegmentsBefore(450)
	if err != nil || first <= 1 || len(s.segQ.Files()) >= segs+1 {
		t.Fatalf("retention after space returned: first %d, %v, %d segments", first, err, len(s.segQ.Files()))
	}
	raftlogtest.CheckRange(t, s, first, 650, term1)
}

// TestTruncationAfterFailedCheckpointMeta: a checkpoint whose meta write
// fails (a full disk) leaves the log running; a later conflict truncation
// below the checkpoint's anchor moves the anchor back durably, and a crash
// after it must still find every entry before the cut, from the first one.
func TestTruncationAfterFailedCheckpointMeta(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "fresh", true: "after-reset"}[reset], func(t *testing.T) {
			f := storage.NewFaultFS(26)
			var full atomic.Bool
			faultWhen(f, storage.OpWrite, metaFileName, unix.ENOSPC, &full)
			o := testOptions(f)
			o.CheckpointBytes = 1 << 40
			s := mustOpen(t, "/log", o)
			first := uint64(1)
			if reset {
				storeAll(t, s, raftlogtest.Entries(1, 20, 1))
				first = 101
				if err := s.ResetAt(first, 3*16<<10+100); err != nil {
					t.Fatal(err)
				}
			}
			storeAll(t, s, raftlogtest.Entries(first, first+39, 1))
			full.Store(true)
			if err := s.Checkpoint(); err == nil {
				t.Fatal("Checkpoint succeeded with a full disk")
			}
			full.Store(false)
			if s.Failure() != nil {
				t.Fatalf("store stopped: %v", s.Failure())
			}
			if err := s.DeleteRange(first+30, first+39); err != nil {
				t.Fatal(err)
			}
			storeAll(t, s, raftlogtest.Entries(first+30, first+49, 2))
			want := func(i uint64) *raft.Log {
				if i >= first+30 {
					return raftlogtest.Entry(i, 2)
				}
				return term1(i)
			}
			raftlogtest.CheckRange(t, s, first, first+49, want)
			f = f.Crash(storage.CrashOptions{})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			defer s.Close()
			raftlogtest.CheckRange(t, s, first, first+49, want)
		})
	}
}

// TestIOErrorStopsUntilRecover: EIO on the segment write or sync still
// stops the store (the page-cache state is unknown); Recover cuts the failed
// batch back, after which writes continue and a crash keeps every stored
// entry and nothing of the failed batch beyond what is re-stored.
func TestIOErrorStopsUntilRecover(t *testing.T) {
	for _, op := range []storage.FaultOp{storage.OpMsync, storage.OpWrite} {
		t.Run(op.String(), func(t *testing.T) {
			f := storage.NewFaultFS(24)
			var bad atomic.Bool
			faultWhen(f, op, segmentDirName, unix.EIO, &bad)
			o := testOptions(f)
			s := mustOpen(t, "/log", o)
			ref := mustOpen(t, "/ref", testOptions(storage.NewFaultFS(25)))
			defer ref.Close()
			storeAll(t, s, raftlogtest.Entries(1, 30, 1))
			storeAll(t, ref, raftlogtest.Entries(1, 30, 1))
			bad.Store(true)
			if err := s.StoreLogs(raftlogtest.Entries(31, 40, 1)); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("StoreLogs with EIO: %v", err)
			}
			if err := s.StoreLogs(raftlogtest.Entries(31, 31, 1)); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("StoreLogs while stopped: %v", err)
			}
			if err := s.Recover(); op == storage.OpMsync && err == nil {
				t.Fatal("Recover succeeded while syncs still fail")
			}
			bad.Store(false)
			if err := s.Recover(); err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if err := s.Recover(); err != nil { // not stopped: no-op
				t.Fatalf("second Recover: %v", err)
			}
			raftlogtest.CheckRange(t, s, 1, 30, term1)
			storeAll(t, s, raftlogtest.Entries(31, 60, 2))
			storeAll(t, ref, raftlogtest.Entries(31, 60, 2))
			samePositions(t, s, ref, 1, 60)
			f = f.Crash(storage.CrashOptions{TearPages: true})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			defer s.Close()
			raftlogtest.CheckRange(t, s, 1, 60, func(i uint64) *raft.Log {
				if i <= 30 {
					return term1(i)
				}
				return raftlogtest.Entry(i, 2)
			})
		})
	}
}

// TestIOErrorCreatingSegmentRecovers: an I/O error while a batch creates
// its new segment or index file (the fdatasync or directory sync after
// fallocate) stops the store; after Recover the same batch is stored at the
// positions a log that never failed uses.
func TestIOErrorCreatingSegmentRecovers(t *testing.T) {
	for _, tc := range []struct {
		op   storage.FaultOp
		part string
	}{
		{storage.OpSync, segmentDirName},
		{storage.OpSyncDir, segmentDirName},
		{storage.OpSync, indexDirName},
	} {
		t.Run(tc.op.String()+"-"+tc.part, func(t *testing.T) {
			f := storage.NewFaultFS(27)
			var bad atomic.Bool
			faultWhen(f, tc.op, tc.part, unix.EIO, &bad)
			s := mustOpen(t, "/log", testOptions(f))
			defer s.Close()
			ref := mustOpen(t, "/ref", testOptions(storage.NewFaultFS(28)))
			defer ref.Close()
			next := uint64(1)
			for failed := false; !failed; next += 10 {
				batch := raftlogtest.Entries(next, next+9, 1)
				bad.Store(true)
				err := s.StoreLogs(batch)
				bad.Store(false)
				if err != nil {
					if !errors.Is(err, ErrStoreFailed) {
						t.Fatalf("StoreLogs(%d..) with EIO: %v", next, err)
					}
					failed = true
					if err := s.Recover(); err != nil {
						t.Fatalf("Recover: %v", err)
					}
					storeAll(t, s, batch)
				}
				storeAll(t, ref, batch)
				if next > 1000 {
					t.Fatal("no batch created a file")
				}
			}
			storeAll(t, s, raftlogtest.Entries(next, next+9, 1))
			storeAll(t, ref, raftlogtest.Entries(next, next+9, 1))
			raftlogtest.CheckRange(t, s, 1, next+9, term1)
			samePositions(t, s, ref, 1, next+9)
		})
	}
}

// TestResetAfterFailedRetentionReopens: a retention pass that fails while
// removing its segments (an EIO syncing the directory) must not leave
// segment files behind that outlive a later snapshot reset: the log after
// the reset would then open with a gap between them and its new segments.
func TestResetAfterFailedRetentionReopens(t *testing.T) {
	f := storage.NewFaultFS(29)
	var once atomic.Bool
	f.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if op == storage.OpSyncDir && strings.Contains(name, segmentDirName) && once.CompareAndSwap(true, false) {
			return unix.EIO
		}
		return nil
	})
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	storeAll(t, s, raftlogtest.Entries(1, 600, 1))
	segs := len(s.segQ.Files())
	once.Store(true)
	if _, err := s.DeleteSegmentsBefore(450); err == nil {
		t.Fatal("retention succeeded with a failing directory sync")
	}
	if len(s.segQ.Files()) > segs-2 {
		t.Fatalf("%d of %d segments left: retention removed fewer than two", len(s.segQ.Files()), segs)
	}
	const nextPos = 40*16<<10 + 100
	if err := s.ResetAt(1001, nextPos); err != nil {
		t.Fatal(err)
	}
	storeAll(t, s, raftlogtest.Entries(1001, 1050, 2))
	want := func(i uint64) *raft.Log { return raftlogtest.Entry(i, 2) }
	for _, crash := range []bool{false, true} {
		if crash {
			f = f.Crash(storage.CrashOptions{})
			s.Close()
			o.FS = f
		} else if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var err error
		if s, err = Open("/log", o); err != nil {
			t.Fatalf("reopen (crash %v): %v", crash, err)
		}
		raftlogtest.CheckRange(t, s, 1001, 1050, want)
	}
}

// sameSize returns an entry whose frame is as long as every other
// sameSize entry's, so a re-stored index lands where the old one was.
func sameSize(i, term uint64) *raft.Log {
	data := make([]byte, 200)
	for k := range data {
		data[k] = byte(i + term + uint64(k))
	}
	return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data}
}

// TestFailedTruncationSyncThenRestart: a conflict truncation whose msync
// of the zeros fails stops the store; a process restart (not a machine
// restart) reopens it from a page cache that shows the zeros although the
// disk still holds the old entries. New entries stored after the reopen
// must not be followed by the old ones after a power loss.
func TestFailedTruncationSyncThenRestart(t *testing.T) {
	for _, tc := range []struct {
		name            string
		last, cut, keep uint64 // store 1..last, cut from cut, re-store cut..keep
		checkpoint      bool   // anchor past the cut (moved back by the truncation)
	}{
		{"tail", 12, 6, 7, false},
		{"below-anchor", 12, 6, 7, true},
		{"across-segments", 150, 40, 45, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := storage.NewFaultFS(27)
			var bad atomic.Bool
			faultWhen(f, storage.OpMsync, segmentDirName, unix.EIO, &bad)
			o := testOptions(f)
			o.CheckpointBytes = 1 << 40
			s := mustOpen(t, "/log", o)
			entries := func(from, to, term uint64) []*raft.Log {
				var out []*raft.Log
				for i := from; i <= to; i++ {
					out = append(out, sameSize(i, term))
				}
				return out
			}
			storeAll(t, s, entries(1, tc.last, 1))
			if tc.checkpoint {
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			if segs := len(s.segQ.Files()); tc.name == "across-segments" && segs < 2 {
				t.Fatalf("%d segment(s): the cut must cross a segment boundary", segs)
			}
			bad.Store(true) // the zeros' sync fails
			if err := s.DeleteRange(tc.cut, tc.last); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("DeleteRange with EIO: %v", err)
			}
			bad.Store(false)
			s.Close()
			s = mustOpen(t, "/log", o)
			if last, _ := s.LastIndex(); last != tc.cut-1 {
				t.Fatalf("last index %d after the reopen, want %d", last, tc.cut-1)
			}
			storeAll(t, s, entries(tc.cut, tc.keep, 2))
			f = f.Crash(storage.CrashOptions{})
			s.Close()
			o.FS = f
			s = mustOpen(t, "/log", o)
			defer s.Close()
			if last, _ := s.LastIndex(); last != tc.keep {
				t.Fatalf("last index %d after the crash, want %d (old term-1 entries came back after the term-2 ones)", last, tc.keep)
			}
			raftlogtest.CheckRange(t, s, 1, tc.keep, func(i uint64) *raft.Log {
				if i < tc.cut {
					return sameSize(i, 1)
				}
				return sameSize(i, 2)
			})
		})
	}
}

// TestPowerLossDuringTruncationSync: the power fails while a long
// truncation's zeros are being synced, so the disk keeps an arbitrary
// subset of the zeroed pages (some old frames whole, some torn, some
// zeroed). The member must start: the old frames past the torn one are the
// truncation's unfinished zeros, not acknowledged entries after damage. It
// keeps a prefix of the old entries (at least those before the cut), and a
// new truncation and new entries then survive a crash.
func TestPowerLossDuringTruncationSync(t *testing.T) {
	for seed := uint64(0); seed < 12; seed++ {
		f := storage.NewFaultFS(seed)
		var armed, dead atomic.Bool
		f.SetFaultFunc(func(op storage.FaultOp, name string) error {
			if armed.Load() && op == storage.OpMsync && strings.Contains(name, segmentDirName) {
				dead.Store(true) // the power fails inside this msync
			}
			if dead.Load() {
				return storage.ErrCrashed
			}
			return nil
		})
		o := testOptions(f)
		o.SegmentSize = 1 << 20
		o.CheckpointBytes = 1 << 40
		s := mustOpen(t, "/log", o)
		for i := uint64(1); i <= 300; i += 50 {
			var logs []*raft.Log
			for j := i; j < i+50; j++ {
				logs = append(logs, sameSize(j, 1))
			}
			storeAll(t, s, logs)
		}
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		if err := s.DeleteRange(10, 300); !errors.Is(err, ErrStoreFailed) {
			t.Fatalf("seed %d: DeleteRange during the power loss: %v", seed, err)
		}
		f = f.Crash(storage.CrashOptions{TearPages: true})
		s.Close()
		o.FS = f
		s, err := Open("/log", o)
		if err != nil {
			t.Fatalf("seed %d: the member does not start after a power loss during a truncation: %v", seed, err)
		}
		last, _ := s.LastIndex()
		if last < 9 || last > 300 {
			t.Fatalf("seed %d: last index %d, want 9..300", seed, last)
		}
		raftlogtest.CheckRange(t, s, 1, last, func(i uint64) *raft.Log { return sameSize(i, 1) })
		if last >= 10 {
			if err := s.DeleteRange(10, last); err != nil {
				t.Fatalf("seed %d: DeleteRange(10, %d): %v", seed, last, err)
			}
		}
		var logs []*raft.Log
		for i := uint64(10); i <= 20; i++ {
			logs = append(logs, sameSize(i, 2))
		}
		storeAll(t, s, logs)
		f = f.Crash(storage.CrashOptions{TearPages: true})
		s.Close()
		o.FS = f
		s = mustOpen(t, "/log", o)
		raftlogtest.CheckRange(t, s, 1, 20, func(i uint64) *raft.Log {
			if i < 10 {
				return sameSize(i, 1)
			}
			return sameSize(i, 2)
		})
		if last, _ := s.LastIndex(); last != 20 {
			t.Fatalf("seed %d: last index %d after the second crash, want 20", seed, last)
		}
		s.Close()
	}
}

// TestTruncationRecordCleared: a suffix truncation clears its record as
// soon as its zeros are durable, so entries stored afterwards over the
// range are never taken for its leftovers. If the clearing write fails the
// store stops, and an open that cannot clear the record refuses to start;
// the next open clears it and the log goes on.
func TestTruncationRecordCleared(t *testing.T) {
	f := storage.NewFaultFS(28)
	var full atomic.Bool
	faultWhen(f, storage.OpRename, metaFileName, unix.ENOSPC, &full)
	o := testOptions(f)
	o.CheckpointBytes = 1 << 40
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 40, 1))
	if err := s.DeleteRange(31, 40); err != nil {
		t.Fatal(err)
	}
	if m, _, err := readMeta(f, "/log"); err != nil || m.ZeroTo != 0 || m.AnchorIndex != 31 {
		t.Fatalf("meta after a truncation: %+v, %v; want the record cleared, anchored at 31", m, err)
	}
	storeAll(t, s, raftlogtest.Entries(31, 40, 2))

	// The record is written, the zeros synced, the clearing fails.
	var renames atomic.Int32
	f.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if op == storage.OpRename && strings.Contains(name, metaFileName) && (renames.Add(1) == 2 || full.Load()) {
			return unix.ENOSPC
		}
		return nil
	})
	if err := s.DeleteRange(21, 40); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("DeleteRange whose clearing write fails: %v, want ErrStoreFailed", err)
	}
	if n := renames.Load(); n != 2 {
		t.Fatalf("%d meta renames during the truncation, want 2 (record, clearing)", n)
	}
	if err := s.StoreLogs(raftlogtest.Entries(21, 21, 3)); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("StoreLogs with the record still set: %v, want ErrStoreFailed", err)
	}
	s.Close()
	if m, _, err := readMeta(f, "/log"); err != nil || m.ZeroTo == 0 {
		t.Fatalf("meta after a failed clearing: %+v, %v; want the record set", m, err)
	}
	full.Store(true)
	if s, err := Open("/log", o); err == nil {
		s.Close()
		t.Fatal("Open succeeded although it could not clear the truncation record")
	}
	full.Store(false)
	s = mustOpen(t, "/log", o)
	if m, _, err := readMeta(f, "/log"); err != nil || m.ZeroTo != 0 {
		t.Fatalf("meta after the reopen: %+v, %v; want the record cleared", m, err)
	}
	if last, _ := s.LastIndex(); last != 20 {
		t.Fatalf("last index %d after the reopen, want 20", last)
	}
	storeAll(t, s, raftlogtest.Entries(21, 50, 3))
	f = f.Crash(storage.CrashOptions{TearPages: true})
	s.Close()
	o.FS = f
	s = mustOpen(t, "/log", o)
	defer s.Close()
	raftlogtest.CheckRange(t, s, 1, 50, func(i uint64) *raft.Log {
		if i > 20 {
			return raftlogtest.Entry(i, 3)
		}
		return term1(i)
	})
}
