//go:build slowfs

package storage

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSlowFSDelaysFlushes checks that the control file turns the delay on
// and off for a file already open.
func TestSlowFSDelaysFlushes(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "latency")
	s := NewSlowFS(osFS{}, ctl)
	f, err := s.OpenFile(filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	timeSync := func() time.Duration {
		start := time.Now()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := timeSync(); d >= 150*time.Millisecond {
		t.Fatalf("sync without a delay took %v", d)
	}
	if err := os.WriteFile(ctl, []byte("200ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.poll() // the poller would see it within slowFSPoll
	if d := timeSync(); d < 200*time.Millisecond {
		t.Fatalf("sync with a 200ms delay took %v", d)
	}
	if err := os.WriteFile(ctl, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.poll()
	if d := timeSync(); d >= 150*time.Millisecond {
		t.Fatalf("sync after the delay was cleared took %v", d)
	}
}
