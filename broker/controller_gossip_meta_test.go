package broker

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/testutil"
)

// roleProbeReplica is a fakeReplica whose first IsLeader call runs onAsk
// first: the test changes the role at the moment a meta refresh reads it.
type roleProbeReplica struct {
	*fakeReplica
	onAsk func()
	asked bool
}

func (r *roleProbeReplica) IsLeader() bool {
	if !r.asked {
		r.asked = true
		was := r.fakeReplica.IsLeader()
		r.onAsk()
		return was
	}
	return r.fakeReplica.IsLeader()
}

// TestGossipMetaRefreshNotAfterNewerRole: a slot refresh (register
// goroutine) that read the role just before a role change must not
// publish that older role after the role change published the newer one:
// the leader would be advertised as a follower until the next change.
func TestGossipMetaRefreshNotAfterNewerRole(t *testing.T) {
	fr := newFakeReplica(t, "127.0.0.1:10911")
	fr.leader.Store(false)
	rep := &roleProbeReplica{fakeReplica: fr}
	gcfg := ha.DefaultGossipConfig()
	gcfg.Name, gcfg.BindAddr, gcfg.BindPort = "meta-order", "127.0.0.1", testutil.FreePort(t)
	c := &Controller{rep: rep, log: zap.NewNop()}
	g, err := ha.NewGossip(gcfg, c.gossipMeta(false, 1), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	c.gossip = g
	c.term.Store(1)

	roleDone := make(chan struct{})
	rep.onAsk = func() {
		// Whether the refresh holds gossipMetaMu while it reads the role
		// decides the order: then the role change publishes after it.
		free := c.gossipMetaMu.TryLock()
		if free {
			c.gossipMetaMu.Unlock()
		}
		fr.leader.Store(true)
		go func() {
			defer close(roleDone)
			c.term.Store(2)
			c.updateGossipMeta(true, 2) // onRoleChange on the role goroutine
		}()
		if free {
			<-roleDone
		}
	}
	c.refreshGossipMeta()
	<-roleDone
	if m := g.Meta(); m.Role != ha.RoleLeader || m.Term != 2 {
		t.Fatalf("published meta after the role change: role %s term %d, want leader term 2", m.Role, m.Term)
	}
}
