package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/raftlog"
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
				if why, err := readMarkerFile(after, path); why == "" && err == nil {
					t.Fatalf("after the failed write and a crash the marker exists and reads as no marker")
				}
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		fsys := storage.NewFaultFS(1)
		path := filepath.Join("/data", "raft", "REMOVED")
		if err := storage.MkdirAllDurable(fsys, filepath.Dir(path)); err != nil {
			t.Fatal(err)
		}
		f, err := fsys.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if why, err := readMarkerFile(fsys, path); why == "" || err != nil {
			t.Fatalf("an empty marker file reads as %q, %v", why, err)
		}
	})
}

// TestMarkerThatCannotBeCheckedStopsTheStart: when a marker's presence
// cannot be told (stat fails with EIO or EACCES, not "no such file"), the
// member must not start as if it were absent (a removed or damaged member
// would vote), nor be told it was removed or damaged and to wipe its data:
// every check fails naming the marker and the disk error.
func TestMarkerThatCannotBeCheckedStopsTheStart(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EIO, unix.EACCES} {
		fsys := storage.NewFaultFS(1)
		g := &Group{diskFS: &noSpaceFS{FS: fsys}}
		g.cfg.Store.StorePathRootDir = "/data"
		g.cfg.Raft.DLegerSelfID = "n0"
		for _, c := range []struct {
			path  string
			check func() error
		}{
			{g.removedMarkerPath(), g.checkLiveConfiguration},
			{g.damagedMarkerPath(), g.checkDamagedMarker},
			{g.indexRebuildMarkerPath(), func() error { _, _, err := g.readIndexRebuildMarker(); return err }},
		} {
			fsys.SetFaultFunc(func(op storage.FaultOp, name string) error {
				if op == storage.OpRead && name == c.path {
					return errno
				}
				return nil
			})
			err := c.check()
			if err == nil || !errors.Is(err, errno) || !strings.Contains(err.Error(), "cannot tell whether "+c.path+" exists") ||
				errors.Is(err, ErrRemovedMember) || errors.Is(err, raftlog.ErrDamagedLog) || strings.Contains(err.Error(), "wipe") {
				t.Errorf("%s with stat failing (%v): %v", c.path, errno, err)
			}
		}
	}
	if why, err := readMarkerFile(storage.NewFaultFS(1), "/data/raft/REMOVED"); why != "" || err != nil {
		t.Fatalf("an absent marker reads as %q, %v", why, err)
	}
}

// TestStartRemovesLeftoverTempFiles: a crash between a small file's
// atomic write (create a temporary file, rename it over the target) and
// its rename leaves the temporary file. A member's start removes those of
// the files only it writes (markers, Raft log meta and backfill record,
// timer index synced mark), and nothing else in their directories.
func TestStartRemovesLeftoverTempFiles(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true})
	c.createTopic("T", 1)
	f := c.followerOf(c.leader())
	root := c.nodes[f].cfg.Store.StorePathRootDir
	c.stop(f)
	left := []string{
		filepath.Join(root, "raft", "REMOVED.tmp.1x2y"),
		filepath.Join(root, "raft", "DAMAGED.tmp.zz"),
		filepath.Join(root, "raft", "INDEX_REBUILD.tmp.3"),
		filepath.Join(root, "raft", "log", "raftlog.meta.tmp.k9"),
		filepath.Join(root, "raft", "log", "raftlog.backfill.tmp.abc"),
		filepath.Join(root, "timer", "SYNCED.tmp.q1"),
	}
	kept := []string{
		filepath.Join(root, "raft", "REMOVED.tmp.X"), // not a WriteFileAtomic name
		filepath.Join(root, "raft", "notes.tmp.1"),   // not a file the member writes
	}
	for _, p := range append(append([]string{}, left...), kept...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.start(f)
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the start: %v, want it removed", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s after the start: %v, want it kept", p, err)
		}
	}
	if c.nodes[f].g().LogDamaged() != nil {
		t.Fatalf("member damaged after the start: %v", c.nodes[f].g().LogDamaged())
	}
}

// TestRuntimeConfigLoadRemovesLeftoverTempFiles: the same for the runtime
// config file UPDATE_BROKER_CONFIG saves, at the Controller's start.
func TestRuntimeConfigLoadRemovesLeftoverTempFiles(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	c := tc.nodes[0]
	path := c.runtimeConfigPath()
	if path == "" {
		t.Fatal("no runtime config path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp.7f"
	if err := os.WriteFile(tmp, []byte("maxMessageSize=1"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.loadRuntimeConfig()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("%s after loading: %v, want it removed", tmp, err)
	}
}
