package store

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// TestBackfillFailedSyncThenRewriteIsDurable: a backfill whose sync of the
// old first file fails with EIO leaves its units in the page cache with
// the pages marked clean (Linux after a failed writeback), the disk still
// holding blanks. The retry, or the redo record applied at the next open,
// writes the same bytes again; it must reach the disk, or a later machine
// crash brings the blanks back inside the queue.
func TestBackfillFailedSyncThenRewriteIsDurable(t *testing.T) {
	for _, then := range []string{"retry", "process restart"} {
		t.Run(then, func(t *testing.T) {
			fs := storage.NewFaultFS(7)
			fs.SetCleanAfterFailedSync(true)
			s := openTestCQStore(t, fs, "/store", 8)
			if err := s.StartQueueAt("T", 0, 12); err != nil { // file [8,16), blanks 8..11
				t.Fatal(err)
			}
			cq := s.Get("T", 0)
			appendUnits(t, cq, 12, 15)
			if err := cq.Flush(); err != nil {
				t.Fatal(err)
			}
			target := storage.FileName(8 * CQUnitSize)
			failed := false
			fs.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if (op == storage.OpMsync || op == storage.OpSync) && strings.HasSuffix(name, target) && !failed {
					failed = true
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
			switch then {
			case "retry":
				if err := cq.Backfill(6, units); err != nil {
					t.Fatalf("retried backfill: %v", err)
				}
			case "process restart":
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openTestCQStore(t, fs, "/store", 8) // applies the redo record
				cq = s.Get("T", 0)
				if m := cq.MinOffset(); m > 6 {
					if err := cq.Backfill(6, units[:m-6]); err != nil {
						t.Fatalf("resumed backfill: %v", err)
					}
				}
			}
			if cq.MinOffset() != 6 || cq.MaxOffset() != 15 {
				t.Fatalf("before the crash the queue is [%d, %d), want [6, 15)", cq.MinOffset(), cq.MaxOffset())
			}
			crashed := fs.Crash(storage.CrashOptions{})
			_ = s.Close()
			s2 := openTestCQStore(t, crashed, "/store", 8)
			defer s2.Close()
			cq2 := s2.Get("T", 0)
			if cq2.MinOffset() != 6 || cq2.MaxOffset() != 15 {
				t.Fatalf("after the crash the queue is [%d, %d), want [6, 15)", cq2.MinOffset(), cq2.MaxOffset())
			}
			for o := int64(6); o < 15; o++ {
				if u, err := cq2.Get(o); err != nil || u != unitN(o) {
					t.Fatalf("unit %d = %+v, %v; want %+v", o, u, err, unitN(o))
				}
			}
		})
	}
}

// TestOpenKeepsLiveUnitsAfterInteriorBlanks: a data directory can hold
// blanks between units (a torn backfill write-back from before the redo
// record). Recovery keeps every live unit after them: nothing
// re-dispatches units below the last snapshot, and a restore's
// StartQueueAt would otherwise restart the queue empty.
func TestOpenKeepsLiveUnitsAfterInteriorBlanks(t *testing.T) {
	const perFile = 8
	fsys := storage.NewFaultFS(1)
	// [0,8): blanks 0..5, units 6,7; [8,16): blanks 8..11, units 12..14.
	blanks := []bool{true, true, true, true, true, true, false, false, true, true, true, true, false, false, false}
	writeQueueFiles(t, fsys, "/store/consumequeue/T/0", perFile, 0, blanks)
	s := openTestCQStore(t, fsys, "/store", perFile)
	defer s.Close()
	cq := s.Get("T", 0)
	if cq.MaxOffset() != 15 || cq.MaxPhysicOffset() != unitN(14).end() {
		t.Fatalf("queue [%d, %d) ending at physical offset %d after the open; want it to end at 15, physical %d",
			cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicOffset(), unitN(14).end())
	}
	if err := s.StartQueueAt("T", 0, 15); err != nil {
		t.Fatal(err)
	}
	if cq = s.Get("T", 0); cq.MinOffset() == 15 {
		t.Fatalf("after a restore at 15 the queue is [%d, %d): every unit before 15 is gone", cq.MinOffset(), cq.MaxOffset())
	}
}

// TestSearchesStepOverInteriorBlanks: with blanks between units (and
// after the last one), a truncation at any unit's physical offset cuts
// exactly the units at or past it, and the minimum's correction and the
// lookup by physical offset land on real units: every bisection judges a
// blank by the unit after it.
func TestSearchesStepOverInteriorBlanks(t *testing.T) {
	const perFile = 4
	// blanks 0..1, units 2,3, blank 4, unit 5, blanks 6,7, units 8..10, blank 11
	blanks := []bool{true, true, false, false, true, false, true, true, false, false, false, true}
	var real []int64
	for i, b := range blanks {
		if !b {
			real = append(real, int64(i))
		}
	}
	open := func(t *testing.T) (*ConsumeQueueStore, *ConsumeQueue) {
		fsys := storage.NewFaultFS(1)
		writeQueueFiles(t, fsys, "/store/consumequeue/T/0", perFile, 0, blanks)
		s := openTestCQStore(t, fsys, "/store", perFile)
		return s, s.Get("T", 0)
	}
	for _, cut := range real {
		s, cq := open(t)
		if err := cq.TruncateDirty(unitN(cut).PhyOffset); err != nil {
			t.Fatal(err)
		}
		for _, r := range real {
			kept := r < cq.MaxOffset()
			if kept != (r < cut) {
				t.Errorf("truncate at unit %d: unit %d kept=%v (queue [%d, %d))", cut, r, kept, cq.MinOffset(), cq.MaxOffset())
			}
		}
		if cq.MinOffset() > real[0] {
			t.Errorf("truncate at unit %d moved the minimum to %d, past the first unit %d", cut, cq.MinOffset(), real[0])
		}
		s.Close()
	}
	for _, r := range real {
		s, cq := open(t)
		if err := cq.CorrectMinOffset(unitN(r).PhyOffset); err != nil {
			t.Fatal(err)
		}
		if u, err := cq.Get(cq.MinOffset()); err != nil || u != unitN(r) {
			t.Errorf("minimum corrected to physical %d: offset %d holds %+v, %v; want unit %d", unitN(r).PhyOffset, cq.MinOffset(), u, err, r)
		}
		s.Close()
	}
}
