//go:build crashfs

package timerindex

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// A power loss after the snapshot: CrashFS drops every unsynced write (the
// late records appended to bucket 10, the file of bucket 12, the records
// appended to 20 after the advance, bucket 30) while the advance's renames
// and the moved records it synced are on disk, and the applied mark was
// written back (a disk orders nothing without fsync). After the reboot
// (another boot id) the files are cut back to the synced mark's sizes and
// re-applying the log leaves every pending timer in the files once.
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
	if got := pending(t, y, cur); !slices.Equal(got, timerLogPending) {
		t.Errorf("pending after the power loss and re-apply %v, want %v", got, timerLogPending)
	}
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
// without the applied mark written back: after the reboot (the files cut
// back to the synced mark) and a re-apply of the whole log, the bucket
// files are byte-identical to those of a replica that never crashed, so
// every pending timer is there once, at the position it has on the peers.
func TestCrashFSIndexPowerLossAnyPoint(t *testing.T) {
	t.Cleanup(func(old func() string) func() { return func() { bootID = old } }(bootID))
	start := cursor{10, 0}
	refFS := storage.NewCrashFS()
	refDir := t.TempDir()
	ref, err := Open(refFS, refDir, nil)
	must(t, err)
	replay(t, ref, timerLog, 1, start)
	want := withoutAside(bucketFiles(t, refFS, refDir))
	must(t, ref.Close())
	for snap := 0; snap <= len(timerLog); snap++ {
		for crash := snap; crash <= len(timerLog); crash++ {
			for _, markBack := range []bool{false, true} {
				dir := t.TempDir()
				bootID = func() string { return "boot-1" }
				fsys := storage.NewCrashFS()
				x, err := Open(fsys, dir, nil)
				must(t, err)
				snapCur := replay(t, x, timerLog[:snap], 1, start)
				must(t, x.Sync()) // at 0: an empty index synced

				replay(t, x, timerLog[:crash], snap+1, snapCur)
				if markBack {
					must(t, x.mark.Sync())
				}
				fsys.Crash()
				x.Close()

				bootID = func() string { return "boot-2" }
				yfs := storage.NewCrashFS()
				y, err := Open(yfs, dir, nil)
				must(t, err)
				got := pending(t, y, replay(t, y, timerLog, snap+1, snapCur))
				files := withoutAside(bucketFiles(t, yfs, dir))
				y.Close()
				if !slices.Equal(got, timerLogPending) {
					t.Errorf("snapshot %d, crash %d, mark written back %v: pending %v, want %v", snap, crash, markBack, got, timerLogPending)
				}
				if !maps.EqualFunc(files, want, bytes.Equal) {
					t.Errorf("snapshot %d, crash %d, mark written back %v: files %v, want %v", snap, crash, markBack, keys(files), keys(want))
				}
			}
		}
	}
}

// withoutAside drops the bucket files set aside (removed by the next Sync,
// never read).
func withoutAside(files map[string][]byte) map[string][]byte {
	maps.DeleteFunc(files, func(name string, _ []byte) bool { return strings.HasSuffix(name, asideSuffix) })
	return files
}
