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
				if op == storage.OpMsync && strings.HasSuffix(name, target) {
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
