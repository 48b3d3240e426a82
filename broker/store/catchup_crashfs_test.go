//go:build crashfs

package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// errProcessDied is what a dyingFS answers once the simulated process is gone.
var errProcessDied = errors.New("the process died")

// dyingFS runs on a CrashFS and kills the simulated process (CrashFS.Crash,
// then every call fails) when a temporary file is about to be renamed into
// place: the window between a prepended file's creation and its rename.
type dyingFS struct {
	*storage.CrashFS
	dead atomic.Bool
}

func (d *dyingFS) Rename(oldname, newname string) error {
	if d.dead.Load() {
		return errProcessDied
	}
	if strings.Contains(filepath.Base(oldname), ".tmp.") {
		d.CrashFS.Crash()
		d.dead.Store(true)
		return errProcessDied
	}
	return d.CrashFS.Rename(oldname, newname)
}

func (d *dyingFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	if d.dead.Load() {
		return nil, errProcessDied
	}
	return d.CrashFS.OpenFile(name, flag, perm)
}

func (d *dyingFS) Remove(name string) error {
	if d.dead.Load() {
		return errProcessDied
	}
	return d.CrashFS.Remove(name)
}

func (d *dyingFS) SyncDir(path string) error {
	if d.dead.Load() {
		return errProcessDied
	}
	return d.CrashFS.SyncDir(path)
}

func tempNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp.") {
			out = append(out, e.Name())
		}
	}
	return out
}

// A process that dies between the creation of a prepended queue file and
// its rename leaves the temporary file on disk. The reopened queue removes
// it and keeps its units, the catch-up resumes, and deleting the topic
// removes its directory.
func TestCrashFSBackfillDiesBeforeRenameLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	fsys := &dyingFS{CrashFS: storage.NewCrashFS()}
	s := openTestCQStore(t, fsys, dir, 8)
	if err := s.StartQueueAt("T", 0, 12); err != nil { // file [8,16), blanks 8..11
		t.Fatal(err)
	}
	cq := s.Get("T", 0)
	appendUnits(t, cq, 12, 15)
	if err := cq.Flush(); err != nil {
		t.Fatal(err)
	}
	var units []CQUnit
	for n := int64(6); n < 12; n++ {
		units = append(units, unitN(n))
	}
	if err := cq.Backfill(6, units); !errors.Is(err, errProcessDied) {
		t.Fatalf("backfill: %v, want the process to die at the rename", err)
	}
	_ = s.Close()
	qdir := filepath.Join(dir, "consumequeue", "T", "0")
	if left := tempNames(t, qdir); len(left) != 1 {
		t.Fatalf("the dead process left the temporary files %q, want one", left)
	}

	s = openTestCQStore(t, storage.NewCrashFS(), dir, 8)
	defer s.Close()
	if left := tempNames(t, qdir); len(left) != 0 {
		t.Fatalf("after the reopen the queue directory still holds %q", left)
	}
	cq = s.Get("T", 0)
	if cq.MinOffset() != 12 || cq.MaxOffset() != 15 {
		t.Fatalf("after the reopen the queue is [%d, %d), want [12, 15)", cq.MinOffset(), cq.MaxOffset())
	}
	if err := cq.Backfill(6, units); err != nil {
		t.Fatalf("resumed backfill: %v", err)
	}
	for o := int64(6); o < 15; o++ {
		if u, err := cq.Get(o); err != nil || u != unitN(o) {
			t.Fatalf("unit %d = %+v, %v; want %+v", o, u, err, unitN(o))
		}
	}
	if err := s.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "consumequeue", "T")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted topic's directory is still there: %v", err)
	}
}
