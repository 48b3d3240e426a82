package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/raftlog"
)

// TestGroupDamageBeforeReadyStops: damage noted after Raft started but
// before the group marked itself ready (Raft's goroutines read entries
// from NewRaft's return on) is not left to a start that already succeeded:
// marking ready stops the member.
func TestGroupDamageBeforeReadyStops(t *testing.T) {
	c := newTestCluster(t, clusterOpts{tune: func(g *GroupConfig) { g.ScrubBytesPerSecond = 0 }})
	l := c.leader()
	g := c.nodes[c.followerOf(l)].g()
	g.ready.Store(false)
	g.noteDamage(&raftlog.DamageError{Path: "seg", FileOffset: 1, Cause: errors.New("test")}, "test")
	if st := g.raft.State(); st == raft.Shutdown {
		t.Fatalf("stopped before ready: %v", st)
	}
	g.markReady()
	// If the member leads by then (an election on a loaded box), the stop
	// first hands leadership over, which Raft bounds by its own timeouts.
	testutil.WaitFor(t, 30*time.Second, "the damaged member's Raft stops", func() bool { return g.raftStopped() })
}
