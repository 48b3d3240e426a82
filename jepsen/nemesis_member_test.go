package jepsen

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWipeDirEmptiesButKeepsDir checks that replace-member's wipe leaves
// the data directory itself (it may be a tmpfs mount point) and nothing in
// it, and counts the bytes it removed.
func TestWipeDirEmptiesButKeepsDir(t *testing.T) {
	dir := t.TempDir()
	for p, n := range map[string]int{"commitlog/00000000000000000000": 3000, "raft/stable": 100, "config/topics.json": 10} {
		path := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := wipeDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3110 {
		t.Fatalf("wiped %d bytes, want 3110", n)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("data directory gone: %v", err)
	}
	if len(ents) != 0 {
		t.Fatalf("left %d entries", len(ents))
	}
}

// TestEnsureConfLineAppendsOnce checks the raftJoin line is added once,
// after a last line without a newline too.
func TestEnsureConfLineAppendsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.conf")
	if err := os.WriteFile(path, []byte("brokerName=broker-j\nlistenPort=10911"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ensureConfLine(path, "raftJoin=true"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	if want := "brokerName=broker-j\nlistenPort=10911\nraftJoin=true\n"; string(b) != want {
		t.Fatalf("conf %q, want %q", b, want)
	}
}

// TestReplaceMemberNeedsNetns: in proxy mode the nemesis injects nothing
// and says why (the schedule notes it as not injected).
func TestReplaceMemberNeedsNetns(t *testing.T) {
	n, err := NewNemesis("replace-member")
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Inject(context.Background(), &Env{Cluster: &Cluster{}, Rand: rand.New(rand.NewSource(1))})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "netns") {
		t.Fatalf("proxy-mode inject: %v", err)
	}
}
