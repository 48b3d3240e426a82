//go:build crashfs

package store

import (
	"errors"
	"fmt"
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
// then every call fails) when the dieAt-th temporary file is about to be
// renamed into place: the window between its creation and its rename.
type dyingFS struct {
	*storage.CrashFS
	dieAt int32
	temps atomic.Int32
	dead  atomic.Bool
}

func (d *dyingFS) Rename(oldname, newname string) error {
	if d.dead.Load() {
		return errProcessDied
	}
	if strings.Contains(filepath.Base(oldname), ".tmp.") && d.temps.Add(1) == d.dieAt {
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

// A process that dies between the creation of a temporary file of a
// backfill (the prepended queue file; the redo record of the old first
// file, of the prepended one) and its rename leaves the file on disk. The
// reopened queue removes it and keeps its units, the catch-up resumes,
// and deleting the topic removes its directory.
func TestCrashFSBackfillDiesBeforeRenameLeavesNoTemp(t *testing.T) {
	for dieAt := int32(1); dieAt <= 3; dieAt++ {
		t.Run(fmt.Sprintf("temporary file %d", dieAt), func(t *testing.T) { backfillDiesBeforeRename(t, dieAt) })
	}
}

func backfillDiesBeforeRename(t *testing.T, dieAt int32) {
	dir := t.TempDir()
	fsys := &dyingFS{CrashFS: storage.NewCrashFS(), dieAt: dieAt}
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
	if m := cq.MinOffset(); m < 6 || m > 12 || cq.MaxOffset() != 15 {
		t.Fatalf("after the reopen the queue is [%d, %d), want [6..12, 15)", cq.MinOffset(), cq.MaxOffset())
	}
	if err := cq.Backfill(6, units[:cq.MinOffset()-6]); err != nil {
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
