//go:build crashfs

package timerindex

import (
	"slices"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// A power loss after the snapshot: CrashFS drops every unsynced write (the
// late records appended to bucket 10, the file of bucket 12, the records
// appended to 20 after the advance, bucket 30) while the advance's removals
// are already on disk, and the applied mark was written back (a disk
// orders nothing without fsync). After the reboot (another boot id)
// indexing restarts at the synced mark, and re-applying the log leaves
// every pending timer in the files: some twice, none lost.
func TestCrashFSIndexPowerLossKeepsEveryTimer(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func(old func() string) func() { return func() { bootID = old } }(bootID))
	bootID = func() string { return "boot-1" }

	fsys := storage.NewCrashFS()
	x, err := Open(fsys, dir, nil)
	must(t, err)
	replay(t, x, timerLog[:timerLogSnapshot], 1, cursor{})
	must(t, x.Sync()) // the snapshot's Persist
	end := replay(t, x, timerLog, timerLogSnapshot+1, cursor{10, 0})
	if got := pending(t, x, end); !slices.Equal(got, timerLogPending) {
		t.Fatalf("pending before the crash %v, want %v", got, timerLogPending)
	}
	// The disk may write pages back in any order: here the applied mark
	// reached it, the records after the snapshot did not.
	must(t, x.mark.Sync())
	fsys.Crash()
	x.Close()

	bootID = func() string { return "boot-2" }
	y, err := Open(storage.NewCrashFS(), dir, nil)
	must(t, err)
	defer y.Close()
	if y.Applied() != timerLogSnapshot {
		t.Fatalf("applied after the reboot %d, want the synced %d", y.Applied(), timerLogSnapshot)
	}
	cur := replay(t, y, timerLog, timerLogSnapshot+1, cursor{10, 0})
	got := pending(t, y, cur)
	for _, o := range timerLogPending {
		if !slices.Contains(got, o) {
			t.Errorf("timer %d lost after the power loss: pending %v", o, got)
		}
	}
	for _, o := range got {
		if !slices.Contains(timerLogPending, o) {
			t.Errorf("delivered timer %d pending again: %v", o, got)
		}
	}
	t.Logf("pending after the power loss and re-apply: %v", got)
}

// A boot id that cannot be read is not trusted to be the mark's: indexing
// restarts at the synced mark.
func TestCrashFSIndexUnknownBootUsesSyncedMark(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func(old func() string) func() { return func() { bootID = old } }(bootID))
	bootID = func() string { return "boot-1" }
	fsys := storage.NewCrashFS()
	x, err := Open(fsys, dir, nil)
	must(t, err)
	replay(t, x, timerLog[:timerLogSnapshot], 1, cursor{})
	must(t, x.Sync())
	replay(t, x, timerLog, timerLogSnapshot+1, cursor{10, 0})
	must(t, x.mark.Sync())
	must(t, x.Close())

	bootID = func() string { return "" }
	y, err := Open(storage.NewCrashFS(), dir, nil)
	must(t, err)
	defer y.Close()
	if y.Applied() != timerLogSnapshot {
		t.Fatalf("applied with an unknown boot %d, want the synced %d", y.Applied(), timerLogSnapshot)
	}
}

// The same log crashed at every point after every snapshot point, with or
// without the applied mark written back: after the reboot and a re-apply
// of the whole log every pending timer is in the files and no delivered
// one is.
func TestCrashFSIndexPowerLossAnyPoint(t *testing.T) {
	t.Cleanup(func(old func() string) func() { return func() { bootID = old } }(bootID))
	start := cursor{10, 0}
	for snap := 0; snap <= len(timerLog); snap++ {
		for crash := snap; crash <= len(timerLog); crash++ {
			for _, markBack := range []bool{false, true} {
				dir := t.TempDir()
				bootID = func() string { return "boot-1" }
				fsys := storage.NewCrashFS()
				x, err := Open(fsys, dir, nil)
				must(t, err)
				snapCur := replay(t, x, timerLog[:snap], 1, start)
				if snap > 0 {
					must(t, x.Sync())
				}
				replay(t, x, timerLog[:crash], snap+1, snapCur)
				if markBack {
					must(t, x.mark.Sync())
				}
				fsys.Crash()
				x.Close()

				bootID = func() string { return "boot-2" }
				y, err := Open(storage.NewCrashFS(), dir, nil)
				must(t, err)
				got := pending(t, y, replay(t, y, timerLog, snap+1, snapCur))
				y.Close()
				for _, o := range timerLogPending {
					if !slices.Contains(got, o) {
						t.Errorf("snapshot %d, crash %d, mark written back %v: timer %d lost: %v", snap, crash, markBack, o, got)
					}
				}
				for _, o := range got {
					if !slices.Contains(timerLogPending, o) {
						t.Errorf("snapshot %d, crash %d, mark written back %v: delivered %d pending: %v", snap, crash, markBack, o, got)
					}
				}
			}
		}
	}
}
