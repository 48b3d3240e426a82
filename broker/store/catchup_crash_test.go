package store

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// A backfill that spans a file boundary writes and flushes the prepended
// file(s) first and the old first file (whose head still holds the blank
// fillers of the snapshot install) last. A crash (or a failed flush)
// between the two leaves real units in the prepended file followed by the
// old head blanks; one before the prepended file's flush leaves it all
// zeros in front of the live files. Recovery must keep the live units
// either way: nothing re-dispatches the ones below the last snapshot.
func TestBackfillInterruptedKeepsLiveUnits(t *testing.T) {
	for _, failFile := range []string{"old first file", "prepended file"} {
		t.Run(failFile, func(t *testing.T) {
			fs := storage.NewFaultFS(3)
			s := openTestCQStore(t, fs, "/store", 8)
			if err := s.StartQueueAt("T", 0, 12); err != nil { // file [8,16), blanks 8..11
				t.Fatal(err)
			}
			cq := s.Get("T", 0)
			appendUnits(t, cq, 12, 15)
			if err := cq.Flush(); err != nil {
				t.Fatal(err)
			}
			// The old first file starts at unit 8: byte 160.
			target := storage.FileName(8 * CQUnitSize)
			if failFile == "prepended file" {
				target = storage.FileName(0)
			}
			fs.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if (op == storage.OpMsync || op == storage.OpSync) && strings.HasSuffix(name, target) {
					return syscall.EIO
				}
				return nil
			})
			var units []CQUnit
			for n := int64(6); n < 12; n++ {
				units = append(units, unitN(n))
			}
			if err := cq.Backfill(6, units); !errors.Is(err, syscall.EIO) {
				t.Fatalf("backfill: %v, want the injected EIO", err)
			}
			crashed := fs.Crash(storage.CrashOptions{})
			s2 := openTestCQStore(t, crashed, "/store", 8)
			defer s2.Close()
			cq2 := s2.Get("T", 0)
			if cq2 == nil {
				t.Fatal("after the crash the queue is gone")
			}
			if cq2.MaxOffset() != 15 {
				t.Fatalf("after the crash the queue is [%d, %d), want its units up to 15 kept", cq2.MinOffset(), cq2.MaxOffset())
			}
		})
	}
}

// A backfill interrupted at any file system operation (a failed write,
// sync, rename or directory sync, then a machine crash) leaves a queue
// whose recovery keeps every live unit and whose minimum is the first unit
// it holds; the catch-up then resumes there (its units end at the
// minimum) and the queue ends up whole. Without the crash, retrying the
// failed backfill does the same.
func TestBackfillCrashAtEveryStepResumes(t *testing.T) {
	const perFile = 8
	for _, tc := range []struct {
		name             string
		start, end, from int64 // queue started at start holds [start, end); backfill [from, start)
	}{
		{"within the first file", 12, 15, 9},
		{"one file prepended", 12, 15, 6},
		// Four files: the recovery scan of the last three starts in a
		// prepended file.
		{"two files prepended", 20, 31, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, crash := range []bool{true, false} {
				ops := 0
				for k := 1; ; k++ {
					if done := backfillFailingAt(t, perFile, tc.start, tc.end, tc.from, k, crash, storage.CrashOptions{}, uint64(k)); done {
						ops = k - 1
						break
					}
				}
				if ops == 0 {
					t.Fatal("the backfill did no file system operation")
				}
			}
		})
	}
}

// A crash whose write-back of a file's unsynced pages was cut short (a
// prefix of its bytes, or any subset of its pages, reached the disk) at
// any point of a backfill tears the units being written into that file:
// blanks and units interleave, and a unit can be half blank. Recovery
// still keeps every live unit, the minimum is a unit from which on the
// queue is whole, and the catch-up resumes there.
func TestBackfillTornCrashAtEveryStepResumes(t *testing.T) {
	const perFile = 1000 // five pages: a file's write tears across pages
	for _, tc := range []struct {
		name             string
		start, end, from int64
	}{
		{"within the first file", 1500, 1510, 1100},
		{"one file prepended", 1500, 1510, 200},
		{"two files prepended", 2500, 2510, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range []storage.CrashOptions{{Tear: true}, {TearPages: true}} {
				for seed := uint64(1); seed <= 4; seed++ {
					for k := 1; !backfillFailingAt(t, perFile, tc.start, tc.end, tc.from, k, true, opts, seed); k++ {
					}
				}
			}
		})
	}
}

// backfillFailingAt runs a backfill of [from, start) into a queue holding
// [start, end) whose k-th file system operation fails, then crashes (torn
// as opts says, with the FaultFS seeded by seed) or retries, reopens and
// resumes, checking the queue at each step. It reports whether the
// backfill had fewer than k operations.
func backfillFailingAt(t *testing.T, perFile int, start, end, from int64, k int, crash bool, opts storage.CrashOptions, seed uint64) bool {
	t.Helper()
	fs := storage.NewFaultFS(seed)
	s := openTestCQStore(t, fs, "/store", perFile)
	if err := s.StartQueueAt("T", 0, start); err != nil {
		t.Fatal(err)
	}
	cq := s.Get("T", 0)
	appendUnits(t, cq, start, end)
	if err := cq.Flush(); err != nil {
		t.Fatal(err)
	}
	n := 0
	fs.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if n++; n == k {
			t.Logf("op %d (crash %v %+v, seed %d): failing %v %s", k, crash, opts, seed, op, name)
			return syscall.EIO
		}
		return nil
	})
	units := func(lo, hi int64) []CQUnit {
		var us []CQUnit
		for o := lo; o < hi; o++ {
			us = append(us, unitN(o))
		}
		return us
	}
	err := cq.Backfill(from, units(from, start))
	if err == nil {
		return true
	}
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("op %d: backfill: %v, want the injected EIO", k, err)
	}
	// check asserts that the queue ends at end, its minimum is at least
	// want, and every unit from the minimum on is the right one.
	check := func(cq *ConsumeQueue, when string, wantMin int64) {
		t.Helper()
		if cq.MaxOffset() != end || cq.MinOffset() < wantMin || cq.MinOffset() > start {
			t.Fatalf("op %d, %s: queue [%d, %d), want [%d..%d, %d)", k, when, cq.MinOffset(), cq.MaxOffset(), wantMin, start, end)
		}
		for o := cq.MinOffset(); o < end; o++ {
			if u, err := cq.Get(o); err != nil || u != unitN(o) {
				t.Fatalf("op %d, %s: unit %d of [%d, %d) = %+v, %v; want %+v", k, when, o, cq.MinOffset(), end, u, err, unitN(o))
			}
		}
		if cq.MaxPhysicOffset() != unitN(end-1).end() {
			t.Fatalf("op %d, %s: max physical offset %d, want %d", k, when, cq.MaxPhysicOffset(), unitN(end-1).end())
		}
	}
	if crash {
		fs = fs.Crash(opts)
		s = openTestCQStore(t, fs, "/store", perFile)
		cq = s.Get("T", 0)
		if cq == nil {
			t.Fatalf("op %d: after the crash the queue is gone", k)
		}
		check(cq, "after the crash", from)
	} else {
		fs.SetFaultFunc(nil)
	}
	// The catch-up asks for the units up to the queue's minimum again.
	if m := cq.MinOffset(); m > from {
		if err := cq.Backfill(from, units(from, m)); err != nil {
			t.Fatalf("op %d: resumed backfill [%d, %d): %v", k, from, m, err)
		}
	}
	check(cq, "after the resumed backfill", from)
	if cq.MinOffset() != from {
		t.Fatalf("op %d: after the resumed backfill the queue starts at %d, want %d", k, cq.MinOffset(), from)
	}
	crashed := fs.Crash(storage.CrashOptions{})
	_ = s.Close()
	s = openTestCQStore(t, crashed, "/store", perFile)
	defer s.Close()
	cq = s.Get("T", 0)
	check(cq, "after a crash once the backfill is done", from)
	if cq.MinOffset() != from {
		t.Fatalf("op %d: after the finished backfill and a crash the queue starts at %d, want %d", k, cq.MinOffset(), from)
	}
	return false
}

// A prepend whose rename and then its cleanup fail leaves its temporary
// file in the queue directory. Deleting the topic still removes the
// directory; a restart instead removes the file and keeps the queue.
func TestBackfillTempLeftoverGoesAtReopenAndWithTopic(t *testing.T) {
	for _, then := range []string{"reopen", "delete topic"} {
		t.Run(then, func(t *testing.T) {
			fs := storage.NewFaultFS(1)
			s := openTestCQStore(t, fs, "/store", 8)
			if err := s.StartQueueAt("T", 0, 12); err != nil {
				t.Fatal(err)
			}
			cq := s.Get("T", 0)
			appendUnits(t, cq, 12, 15)
			fs.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if op == storage.OpRename || op == storage.OpRemove {
					return syscall.EIO
				}
				return nil
			})
			var units []CQUnit
			for n := int64(6); n < 12; n++ {
				units = append(units, unitN(n))
			}
			if err := cq.Backfill(6, units); !errors.Is(err, syscall.EIO) {
				t.Fatalf("backfill: %v, want the injected EIO", err)
			}
			fs.SetFaultFunc(nil)
			qdir := "/store/consumequeue/T/0"
			if ents, _ := fs.ReadDir(qdir); len(ents) != 2 {
				t.Fatalf("after the failed prepend the queue directory holds %v, want its file and a temporary one", ents)
			}
			if then == "delete topic" {
				if err := s.DeleteTopic("T"); err != nil {
					t.Fatal(err)
				}
				if _, err := fs.Stat("/store/consumequeue/T"); err == nil {
					ents, _ := fs.ReadDir(qdir)
					t.Fatalf("the deleted topic's directory is still there, holding %v", ents)
				}
				return
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTestCQStore(t, fs, "/store", 8)
			defer s.Close()
			if ents, _ := fs.ReadDir(qdir); len(ents) != 1 || ents[0].Name() != storage.FileName(8*CQUnitSize) {
				t.Fatalf("after the reopen the queue directory holds %v, want only its file", ents)
			}
			cq = s.Get("T", 0)
			if cq.MinOffset() != 12 || cq.MaxOffset() != 15 {
				t.Fatalf("after the reopen the queue is [%d, %d), want [12, 15)", cq.MinOffset(), cq.MaxOffset())
			}
		})
	}
}

// Opening a queue applies a backfill's redo record only where each byte
// holds the record's or a blank's (what a torn write leaves), and removes
// the record either way.
func TestBackfillRedoAppliesOnlyOverBlanksOrItsOwnUnits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		from    int64 // the record holds units [from, from+3)
		damage  bool
		wantMin int64
	}{
		{"over blanks", 9, false, 9},
		{"over other units", 12, false, 12},
		{"damaged", 9, true, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := storage.NewFaultFS(1)
			s := openTestCQStore(t, fs, "/store", 8)
			if err := s.StartQueueAt("T", 0, 12); err != nil {
				t.Fatal(err)
			}
			appendUnits(t, s.Get("T", 0), 12, 15)
			if _, err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var units []CQUnit
			for n := tc.from; n < tc.from+3; n++ {
				u := unitN(n)
				u.TagsCode += 100 // differs from what the queue holds at n
				units = append(units, u)
			}
			rec := encodeBackfillRedo(tc.from*CQUnitSize, AppendCQUnits(nil, units))
			if tc.damage {
				rec[len(rec)/2] ^= 1
			}
			redo := "/store/consumequeue/T/0/" + backfillRedoName
			if err := storage.WriteFileAtomic(fs, redo, rec); err != nil {
				t.Fatal(err)
			}
			s = openTestCQStore(t, fs, "/store", 8)
			defer s.Close()
			cq := s.Get("T", 0)
			if cq.MinOffset() != tc.wantMin || cq.MaxOffset() != 15 {
				t.Fatalf("queue [%d, %d), want [%d, 15)", cq.MinOffset(), cq.MaxOffset(), tc.wantMin)
			}
			for o := cq.MinOffset(); o < 15; o++ {
				want := unitN(o)
				if o < 12 {
					want = units[o-tc.from]
				}
				if u, err := cq.Get(o); err != nil || u != want {
					t.Fatalf("unit %d = %+v, %v; want %+v", o, u, err, want)
				}
			}
			if _, err := fs.Stat(redo); err == nil {
				t.Fatal("the redo record is still there after the open")
			}
		})
	}
}

// A backfill whose sync failed leaves its redo record; deleting the topic
// removes it with the queue's files, and so the directory.
func TestDeleteTopicRemovesBackfillRedo(t *testing.T) {
	fs := storage.NewFaultFS(1)
	s := openTestCQStore(t, fs, "/store", 8)
	defer s.Close()
	if err := s.StartQueueAt("T", 0, 12); err != nil {
		t.Fatal(err)
	}
	cq := s.Get("T", 0)
	appendUnits(t, cq, 12, 15)
	if err := cq.Flush(); err != nil {
		t.Fatal(err)
	}
	queueFile := storage.FileName(8 * CQUnitSize)
	fs.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if (op == storage.OpMsync || op == storage.OpSync) && strings.HasSuffix(name, queueFile) {
			return syscall.EIO
		}
		return nil
	})
	if err := cq.Backfill(9, []CQUnit{unitN(9), unitN(10), unitN(11)}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("backfill: %v, want the injected EIO", err)
	}
	fs.SetFaultFunc(nil)
	if _, err := fs.Stat("/store/consumequeue/T/0/" + backfillRedoName); err != nil {
		t.Fatalf("no redo record after the failed backfill: %v", err)
	}
	if err := s.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("/store/consumequeue/T"); err == nil {
		ents, _ := fs.ReadDir("/store/consumequeue/T/0")
		t.Fatalf("the deleted topic's directory is still there, holding %v", ents)
	}
}
