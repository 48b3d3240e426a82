package broker

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/storage"
)

// TestMarkerWriteFailureLeavesNoEmptyMarker: a REMOVED or DAMAGED marker
// whose write fails (EIO on its fsync) and is then lost to a crash must
// not survive as a name with no content, and a marker file that is there
// but empty still counts: either reading "" would let a removed or damaged
// member start and vote.
func TestMarkerWriteFailureLeavesNoEmptyMarker(t *testing.T) {
	for _, op := range []storage.FaultOp{storage.OpWrite, storage.OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			fsys := storage.NewFaultFS(1)
			path := filepath.Join("/data", "raft", "DAMAGED")
			fsys.InjectError(op, unix.EIO)
			if err := writeMarkerFile(fsys, path, "damaged at 42"); err == nil {
				t.Fatalf("marker write with EIO on %v: no error", op)
			}
			after := fsys.Crash(storage.CrashOptions{})
			if _, err := after.Stat(path); err == nil {
				if why := readMarkerFile(after, path); why == "" {
					t.Fatalf("after the failed write and a crash the marker exists and reads as no marker")
				}
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		fsys := storage.NewFaultFS(1)
		path := filepath.Join("/data", "raft", "REMOVED")
		if err := fsys.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fsys.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if why := readMarkerFile(fsys, path); why == "" {
			t.Fatal("an empty marker file reads as no marker")
		}
	})
}

// TestMarkerThatCannotBeCheckedCounts: when a marker's presence cannot be
// told (stat fails with EIO or EACCES, not "no such file"), the member
// must act as if it were there: a removed or damaged member that starts
// because its disk hid the marker would vote.
func TestMarkerThatCannotBeCheckedCounts(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EIO, unix.EACCES} {
		t.Run(errno.Error(), func(t *testing.T) {
			fsys := storage.NewFaultFS(1)
			path := filepath.Join("/data", "raft", "REMOVED")
			fsys.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if op == storage.OpRead && name == path {
					return errno
				}
				return nil
			})
			if why := readMarkerFile(fsys, path); why == "" {
				t.Fatalf("stat failing with %v reads as no marker", errno)
			}
		})
	}
	if why := readMarkerFile(storage.NewFaultFS(1), "/data/raft/REMOVED"); why != "" {
		t.Fatalf("an absent marker reads as %q", why)
	}
}
