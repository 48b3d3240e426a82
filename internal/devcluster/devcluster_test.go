package devcluster

import (
	"context"
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
