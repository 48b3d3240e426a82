//go:build crashfs

package raftlog

import (
	"testing"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// TestCrashFSKeepsSyncedEntries runs the log on a CrashFS (the chaos
// suite's crash-unsynced build), crashes it while open and reopens: with
// Sync every stored entry is there; without it, the unsynced tail is lost
// and the log still opens cleanly.
func TestCrashFSKeepsSyncedEntries(t *testing.T) {
	for _, sync := range []bool{true, false} {
		name := map[bool]string{true: "sync", false: "nosync"}[sync]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := storage.NewCrashFS()
			o := testOptions(c)
			o.Sync = sync
			o.CheckpointBytes = 1 << 30 // no checkpoint syncs the tail
			s := mustOpen(t, dir, o)
			const n = 400
			for i := uint64(1); i <= n; i += 20 {
				storeAll(t, s, raftlogtest.Entries(i, i+19, 1))
			}
			c.Crash()
			_ = s.Close() // its syncs fail: the disk is gone

			o.FS = storage.NewCrashFS()
			s = mustOpen(t, dir, o)
			defer s.Close()
			last, err := s.LastIndex()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case sync && last != n:
				t.Fatalf("Sync: last index %d after the crash, want %d", last, n)
			case !sync && last >= n:
				t.Fatalf("no Sync: all %d entries survived: unsynced data reached the disk", n)
			}
			if last > 0 {
				raftlogtest.CheckRange(t, s, 1, last, term1)
			}
			t.Logf("%s: %d of %d entries after the crash", name, last, n)
		})
	}
}
