package broker

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/ha"
)

// Readiness of the preferred leader. Raft's leadership transfer holds every
// new write while it catches the target up, for up to an election timeout,
// so the preferred-leader loop (ha.PreferredLeader) transfers only to a
// member that looks able to take over at once: not dead or gone by the
// gossip failure detector, answering this leader's heartbeats, within
// one AppendEntries batch of the leader's log (the progress tracker,
// member_progress.go, holds what the leader heard from each peer), and
// not catching up on retained data (catchup_vote.go: it would not stand).

// gossipLookup finds a member of this group in the gossip pool by Raft id
// (Gossip.BrokerMember bound to the node's cluster and group).
type gossipLookup func(raftID string) (ha.Member, bool)

// setGossip makes the preferred-leader check consult the node's gossip
// pool; nil stops it (the pool is closing). The Controller owns the pool,
// which starts after the Group.
func (g *Group) setGossip(look gossipLookup) {
	if look == nil {
		g.gossip.Store(nil)
		return
	}
	g.gossip.Store(&look)
}

// preferredReady is ha.PreferredLeaderConfig.Ready: why leadership should
// not move to member id now, or nil.
func (g *Group) preferredReady(id string) error {
	// A follower hears from the leader several times per heartbeat
	// timeout; one without an answer for that long is down or cut off.
	if err := g.peerAnswering(id, g.cfg.Raft.HeartbeatTimeout); err != nil {
		return err
	}
	p := g.progress.get(raft.ServerID(id))
	if last := g.raft.LastIndex(); last > p.match+uint64(g.cfg.Raft.MaxAppendEntries) {
		return fmt.Errorf("%s is %d entries behind", id, last-p.match)
	}
	// Last, as it asks the member: one whose catch-up is pending would
	// not campaign, and every tick would cost an election timeout.
	if err := g.peerCatchingUp(id); errors.Is(err, ErrTargetCatchingUp) {
		return err
	}
	return nil
}
