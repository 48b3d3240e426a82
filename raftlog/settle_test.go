package raftlog

import (
	"testing"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// TestSettleRestoreAcrossCrash: a fresh follower settles an installed
// snapshot at once; a crash mid-way through the settle, or after it with
// half the backfill written, is followed by the startup restore of the
// same snapshot, whose settle finishes the reset or leaves it (and the
// backfill progress) alone. The log then continues at the leader's
// position and backfills to the leader's bytes.
func TestSettleRestoreAcrossCrash(t *testing.T) {
	const snap, last = 120, 150
	lead := mustOpen(t, "/lead", testOptions(storage.NewFaultFS(11)))
	defer lead.Close()
	storeAll(t, lead, raftlogtest.Entries(1, last, 1))
	p, _ := lead.SnapshotPosition(snap)
	fi, fp, err := lead.FirstPosition()
	if err != nil {
		t.Fatal(err)
	}
	f := storage.NewFaultFS(12)
	o := testOptions(f)
	fol := mustOpen(t, "/fol", o)
	settle := func() {
		t.Helper()
		if err := fol.RestoreFrom(p); err != nil {
			t.Fatal(err)
		}
		if err := fol.SettleRestore(); err != nil {
			t.Fatal(err)
		}
	}
	crash := func() {
		t.Helper()
		f = f.Crash(storage.CrashOptions{Tear: true})
		fol.Close()
		o.FS = f
		fol = mustOpen(t, "/fol", o)
	}
	settle()
	crash()
	settle() // startup restore
	st, gen, ok := fol.Backfill()
	if !ok || st.NextIndex != snap+1 || st.NextPos != p.EndPos {
		t.Fatalf("backfill after a crash past the settle: %+v %v", st, ok)
	}
	from, err := fol.BackfillBegin(gen, fi, fp)
	if err != nil {
		t.Fatal(err)
	}
	half := fp + (p.EndPos-fp)/2
	for from < half {
		b, err := lead.ReadRange(from, int(min(3000, half-from)))
		if err != nil {
			t.Fatal(err)
		}
		if err := fol.BackfillWrite(gen, from, b); err != nil {
			t.Fatal(err)
		}
		from += int64(len(b))
	}
	crash()
	settle() // startup restore: the log continues the snapshot, kept
	st, gen, ok = fol.Backfill()
	if !ok || st.StartIndex != fi {
		t.Fatalf("the startup settle dropped the backfill in progress: %+v %v", st, ok)
	}
	if from, err = fol.BackfillBegin(gen, fi, fp); err != nil || from <= fp {
		t.Fatalf("resume at %d (%v), want past %d", from, err, fp)
	}
	for from < p.EndPos {
		b, err := lead.ReadRange(from, int(min(3000, p.EndPos-from)))
		if err != nil {
			t.Fatal(err)
		}
		if err := fol.BackfillWrite(gen, from, b); err != nil {
			t.Fatal(err)
		}
		from += int64(len(b))
	}
	if err := fol.BackfillCommit(gen); err != nil {
		t.Fatal(err)
	}
	storeAll(t, fol, raftlogtest.Entries(snap+1, last, 1))
	sameLayout(t, lead, fol)
	fol.Close()
}
