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
