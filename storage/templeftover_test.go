package storage

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// writeNamed creates name in dir holding a few bytes, durably named.
func writeNamed(t *testing.T, fsys FS, dir, name string) {
	t.Helper()
	f, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("left"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

func dirNames(t *testing.T, fsys FS, dir string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// notTempLeftovers are names a queue directory may hold that are not
// temporary files of PrependToFilled (WriteFileAtomic of a segment name):
// opening the queue must leave them alone.
var notTempLeftovers = []string{
	"00000000000000000000.tmp",
	"00000000000000000000.tmp.",
	"00000000000000000000.tmp.ABC",            // WriteFileAtomic writes lower case
	"00000000000000000000.tmp.0a",             // nor leading zeros
	"00000000000000000000.tmp.3w5e11264sgsg0", // nor more than a uint64
	"00000000000000000000.tmp.a.b",
	"0000000000000000000.tmp.abc", // 19 digits: no segment name
	"meta.tmp.abc",
	"00000000000000000000.bak",
}

// A crash between the creation of a file PrependToFilled writes and its
// rename leaves the temporary file; opening the queue removes exactly such
// files, and the queue's own files stay as they were.
func TestOpenMappedFileQueueRemovesPrependLeftovers(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		qdir := filepath.Join(dir, "q")
		q, err := OpenMappedFileQueue(fsys, qdir, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.LastOrCreate(8192); err != nil {
			t.Fatal(err)
		}
		if err := q.PrependToFilled(4096, []byte{7, 7, 7, 7}); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		leftovers := []string{
			FileName(0) + ".tmp.3k9z1",
			FileName(0) + ".tmp.0",
			FileName(4096) + ".tmp.3w5e11264sgsf", // the largest uint64
		}
		for _, n := range append(slices.Clone(leftovers), notTempLeftovers...) {
			writeNamed(t, fsys, qdir, n)
		}
		q, err = OpenMappedFileQueue(fsys, qdir, 4096)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		want := append([]string{FileName(4096), FileName(8192)}, notTempLeftovers...)
		slices.Sort(want)
		if got := dirNames(t, fsys, qdir); !slices.Equal(got, want) {
			t.Fatalf("after the open the directory holds\n%q\nwant\n%q", got, want)
		}
		if q.MinOffset() != 4096 || len(q.Files()) != 2 {
			t.Fatalf("queue starts at %d with %d files, want 4096 with 2", q.MinOffset(), len(q.Files()))
		}
	})
}

// Destroy removes a temporary file a failed PrependToFilled could not
// remove, so the directory can go (a deleted topic).
func TestMappedFileQueueDestroyRemovesPrependLeftovers(t *testing.T) {
	fsys := NewFaultFS(1)
	q, err := OpenMappedFileQueue(fsys, "/q", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.LastOrCreate(8192); err != nil {
		t.Fatal(err)
	}
	fsys.SetFaultFunc(func(op FaultOp, name string) error {
		if op == OpRename || op == OpRemove {
			return unix.EIO
		}
		return nil
	})
	if err := q.PrependToFilled(4096, []byte{7, 7, 7, 7}); err == nil {
		t.Fatal("prepend succeeded although its rename failed")
	}
	fsys.SetFaultFunc(nil)
	if got := dirNames(t, fsys, "/q"); len(got) != 2 {
		t.Fatalf("after the failed prepend the directory holds %q, want the segment and a temporary file", got)
	}
	if err := q.Destroy(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, fsys, "/q"); len(got) != 0 {
		t.Fatalf("after Destroy the directory holds %q", got)
	}
	if err := fsys.Remove("/q"); err != nil {
		t.Fatalf("remove the destroyed queue's directory: %v", err)
	}
}
