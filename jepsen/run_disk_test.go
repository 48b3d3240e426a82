package jepsen

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/storage"
)

// TestDiskPressureNote: the warning appears exactly when the run
// directory's file system is within diskPressureMargin of the brokers'
// forced-deletion ratio.
func TestDiskPressureNote(t *testing.T) {
	dir := t.TempDir()
	used, total, err := storage.OSFS().DiskUsage(dir)
	if err != nil || total == 0 {
		t.Skip("no statfs here")
	}
	pct := float64(used) * 100 / float64(total)
	got := diskPressureNote(dir)
	if want := pct >= float64(store.DefaultRetentionConfig().CleanForciblyRatio-diskPressureMargin); (got != "") != want || (want && !strings.Contains(got, "WARNING")) {
		t.Fatalf("at %.1f %%: note %q", pct, got)
	}
	if diskPressureNote(dir+"/missing") != "" {
		t.Fatal("a note for a directory that does not exist")
	}
}
