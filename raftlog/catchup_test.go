package raftlog

import (
	"testing"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// TestBackfill: a follower that installed a snapshot at 200 (its log reset
// to start at 201) fetches the leader's retained entries before it in
// chunks, is interrupted by a crash halfway, resumes after the valid frames
// it wrote, commits, and then holds the same entries at the same positions
// with the same bytes as the leader, also after a reopen.
func TestBackfill(t *testing.T) {
	const snap, last = 200, 300
	lead := mustOpen(t, "/lead", testOptions(storage.NewFaultFS(1)))
	defer lead.Close()
	storeAll(t, lead, raftlogtest.Entries(1, last, 1))
	if _, err := lead.DeleteSegmentsBefore(60); err != nil { // retention
		t.Fatal(err)
	}
	p, err := lead.SnapshotPosition(snap)
	if err != nil {
		t.Fatal(err)
	}

	f := storage.NewFaultFS(2)
	o := testOptions(f)
	fol := mustOpen(t, "/fol", o)
	if fol.BackfillPending() {
		t.Fatal("fresh log reports a backfill")
	}
	if err := fol.RestoreFrom(p); err != nil {
		t.Fatal(err)
	}
	storeAll(t, fol, raftlogtest.Entries(snap+1, last, 1))
	st, gen, ok := fol.Backfill()
	if !ok || st.NextIndex != snap+1 || st.NextPos != p.EndPos {
		t.Fatalf("after the reset: backfill %+v %v", st, ok)
	}
	fi, fp, err := lead.FirstPosition()
	if err != nil || fi <= 1 {
		t.Fatalf("leader first %d at %d: %v", fi, fp, err)
	}
	// copyRange returns where it stopped: ReadRange hands out whole
	// frames, so the last one may end past to.
	copyRange := func(s *LogStore, gen uint64, from, to int64) int64 {
		pos := from
		for pos < to {
			b, err := lead.ReadRange(pos, int(min(3000, to-pos)))
			if err != nil {
				t.Fatalf("ReadRange(%d): %v", pos, err)
			}
			if err := s.BackfillWrite(gen, pos, b); err != nil {
				t.Fatalf("BackfillWrite(%d): %v", pos, err)
			}
			pos += int64(len(b))
		}
		return pos
	}
	from, err := fol.BackfillBegin(gen, fi, fp)
	if err != nil || from != fp {
		t.Fatalf("BackfillBegin: %d, %v", from, err)
	}
	half := fp + (p.EndPos-fp)/2
	half = copyRange(fol, gen, from, half)
	f = f.Crash(storage.CrashOptions{})
	fol.Close()
	o.FS = f
	fol = mustOpen(t, "/fol", o)
	st, gen, ok = fol.Backfill()
	if !ok || st.StartIndex != fi {
		t.Fatalf("after the crash: backfill %+v %v", st, ok)
	}
	from, err = fol.BackfillBegin(gen, fi, fp)
	if err != nil || from <= fp || from > half {
		t.Fatalf("resume at %d (%v), want in (%d, %d]", from, err, fp, half)
	}
	if err := fol.BackfillCommit(gen); err == nil {
		t.Fatal("commit of a half-written backfill succeeded")
	}
	copyRange(fol, gen, from, p.EndPos)
	if err := fol.BackfillCommit(gen); err != nil {
		t.Fatal(err)
	}
	t.Logf("backfilled indexes %d..%d, positions [%d, %d), %d segments", fi, snap, fp, p.EndPos, len(fol.segQ.Files()))
	sameLayout(t, lead, fol)
	if err := fol.BackfillFinish(gen); err != nil {
		t.Fatal(err)
	}
	fol.Close()
	fol = mustOpen(t, "/fol", o)
	defer fol.Close()
	if fol.BackfillPending() {
		t.Fatal("backfill record survived Finish")
	}
	sameLayout(t, lead, fol)
	raftlogtest.CheckRange(t, fol, fi, last, term1)
}

// TestBackfillStaleAfterReset: a second reset ends the backfill in progress.
func TestBackfillStaleAfterReset(t *testing.T) {
	s := mustOpen(t, "/log", testOptions(storage.NewFaultFS(3)))
	defer s.Close()
	if err := s.ResetAt(101, 50_000); err != nil {
		t.Fatal(err)
	}
	storeAll(t, s, raftlogtest.Entries(101, 110, 1))
	_, gen, _ := s.Backfill()
	if err := s.ResetAt(201, 90_000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BackfillBegin(gen, 1, 0); err != ErrBackfillStale {
		t.Fatalf("BackfillBegin after a newer reset: %v", err)
	}
}

// TestBackfillEmptyLog: a follower that installed a snapshot and stored
// nothing after it (an idle group) backfills too, and then continues with
// the entry after the snapshot at the leader's position.
func TestBackfillEmptyLog(t *testing.T) {
	const snap, last = 120, 150
	lead := mustOpen(t, "/lead", testOptions(storage.NewFaultFS(4)))
	defer lead.Close()
	storeAll(t, lead, raftlogtest.Entries(1, last, 1))
	p, _ := lead.SnapshotPosition(snap)
	fol := mustOpen(t, "/fol", testOptions(storage.NewFaultFS(5)))
	defer fol.Close()
	if err := fol.ResetAt(snap+1, p.EndPos); err != nil {
		t.Fatal(err)
	}
	_, gen, _ := fol.Backfill()
	from, err := fol.BackfillBegin(gen, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for pos := from; pos < p.EndPos; {
		b, err := lead.ReadRange(pos, int(min(5000, p.EndPos-pos)))
		if err != nil {
			t.Fatal(err)
		}
		if err := fol.BackfillWrite(gen, pos, b); err != nil {
			t.Fatal(err)
		}
		pos += int64(len(b))
	}
	if err := fol.BackfillCommit(gen); err != nil {
		t.Fatal(err)
	}
	if err := fol.RestoreFrom(p); err != nil { // the next StoreLogs keeps the log
		t.Fatal(err)
	}
	storeAll(t, fol, raftlogtest.Entries(snap+1, last, 1))
	sameLayout(t, lead, fol)
}

// FuzzDecodeBackfill: the backfill record decoder never panics, and what
// it accepts round-trips.
func FuzzDecodeBackfill(f *testing.F) {
	f.Add(BackfillState{NextIndex: 201, NextPos: 68571}.encode())
	f.Add(BackfillState{NextIndex: 201, NextPos: 68571, StartIndex: 53, StartPos: 16384, Committed: true}.encode())
	f.Add([]byte("RLBF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeBackfill(b)
		if err != nil {
			return
		}
		if again, err := decodeBackfill(st.encode()); err != nil || again != st {
			t.Fatalf("%+v does not round-trip: %+v, %v", st, again, err)
		}
	})
}
