package devcluster

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestTwoGroupsKillRestart: two groups come up with distinct members and
// their own routed masters; a killed leader is replaced by another member
// of its group, and once restarted it is registered again.
func TestTwoGroupsKillRestart(t *testing.T) {
	c := MustStart(t, Options{Groups: 2})
	if c.Groups() != 2 {
		t.Fatalf("%d groups", c.Groups())
	}
	seen := map[string]bool{}
	for g := range 2 {
		for _, m := range c.Members(g) {
			if seen[m.ID()] || seen[m.Addr()] {
				t.Fatalf("member %s (%s) appears twice", m.ID(), m.Addr())
			}
			seen[m.ID()], seen[m.Addr()] = true, true
			if m.Config.BrokerName != GroupName(g) {
				t.Fatalf("member %s of group %d is in %s", m.ID(), g, m.Config.BrokerName)
			}
		}
	}
	var l int
	testutil.WaitFor(t, 10*time.Second, "a leader in group 1", func() bool { l = c.Leader(1); return l >= 0 })
	old := c.Member(1, l).Addr()
	c.Kill(1, l)
	if c.Member(1, l).Running() {
		t.Fatal("killed member still running")
	}
	testutil.WaitFor(t, 15*time.Second, "group 1 routes another master", func() bool {
		a := c.RoutedLeader(1)
		return a != "" && a != old && c.Leader(1) >= 0
	})
	if err := c.Restart(1, l); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Leader(0) < 0 {
		t.Fatal("group 0 lost its leader")
	}
}

// TestInMemoryKillRestart: an in-memory cluster writes nothing under Dir
// but the name server's files, elects a new leader when its leader is
// killed, and the killed member restarts on the log it had.
func TestInMemoryKillRestart(t *testing.T) {
	dir := t.TempDir()
	c := MustStart(t, Options{Dir: dir, InMemory: true})
	var l int
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { l = c.Leader(0); return l >= 0 })
	last := c.Member(0, l).Group.Raft().LastIndex()
	if last == 0 {
		t.Fatal("the leader's log is empty")
	}
	old := c.Member(0, l).Addr()
	c.Kill(0, l)
	testutil.WaitFor(t, 15*time.Second, "another master routed", func() bool {
		a := c.RoutedLeader(0)
		return a != "" && a != old && c.Leader(0) >= 0
	})
	if err := c.Restart(0, l); err != nil {
		t.Fatal(err)
	}
	if got := c.Member(0, l).Group.Raft().LastIndex(); got < last {
		t.Fatalf("restarted member's last index %d, had %d before the kill", got, last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel, _ := filepath.Rel(dir, path); !strings.HasPrefix(rel, "namesrv"+string(filepath.Separator)) {
			t.Errorf("in-memory member wrote %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRaftPartitionOutlivesRestart: a member cut off the Raft network
// and restarted stays cut off: with the group's third member stopped, the
// leader cannot keep a majority and steps down, and the restarted member
// never hears from a leader. Healed, the two elect a leader again.
func TestRaftPartitionOutlivesRestart(t *testing.T) {
	c := MustStart(t, Options{InMemory: true})
	var l int
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { l = c.Leader(0); return l >= 0 })
	f, o := (l+1)%3, (l+2)%3
	if err := c.SetRaftPartitioned(0, f, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(0, f); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(0, f); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(0, o); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the leader steps down without a majority", func() bool { return c.Leader(0) < 0 })
	if lc := c.Member(0, f).Group.Raft().LastContact(); !lc.IsZero() {
		t.Fatalf("the member restarted behind the partition heard from a leader at %v", lc)
	}
	if err := c.SetRaftPartitioned(0, f, false); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "a leader once healed", func() bool { return c.Leader(0) >= 0 })
}

// TestWaitReadyNamesWhatIsMissing: a cluster that does not get ready says
// which group lacks what, and what its running members believe, so that a
// start that times out under load names its cause.
func TestWaitReadyNamesWhatIsMissing(t *testing.T) {
	c := MustStart(t, Options{InMemory: true})
	l := c.Leader(0)
	if l < 0 {
		t.Fatal("no leader after MustStart")
	}
	survivor := (l + 2) % 3
	c.Kill(0, l)
	c.Kill(0, (l+1)%3)
	testutil.WaitFor(t, 10*time.Second, "the name server drops the killed master", func() bool { return c.RoutedLeader(0) == "" })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := c.WaitReady(ctx)
	if err == nil {
		t.Fatal("ready without a quorum")
	}
	for _, want := range []string{"broker-a routes", "for 1 running members", c.Member(0, survivor).ID() + "@" + c.Member(0, survivor).Addr()} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("WaitReady: %v; want it to name %q", err, want)
		}
	}
}

// BenchmarkStartReady: one fresh group of three, from Start until the
// name server routes its master (what `raftmq dev` waits for before it
// prints its ready line), then closed; on disk and in memory.
func BenchmarkStartReady(b *testing.B) {
	b.Run("disk", func(b *testing.B) { benchStartReady(b, false) })
	b.Run("inmem", func(b *testing.B) { benchStartReady(b, true) })
}

func benchStartReady(b *testing.B, inMem bool) {
	for b.Loop() {
		c, err := Start(Options{Dir: b.TempDir(), InMemory: inMem})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = c.WaitReady(ctx)
		cancel()
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
