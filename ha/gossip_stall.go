package ha

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// resyncLoop makes sure that, when its peers may hold an out-of-date view
// of this node, they hear its current state at once, and that a broker
// registers again (MaybeDeclaredDead). It does so when the node
//
//   - refuted a claim about itself (noteRefuted): its incarnation rose,
//     and the peers hear of it only by gossip; or
//   - stood still — the process was paused (SIGSTOP) or starved — long
//     enough for its peers to have declared it dead (earliestDeath).
//
// Each time it syncs state with its seeds (a push/pull, what Join does)
// and then signals MaybeDeclaredDead. The node cannot count on refuting a
// death claim to learn of it: memberlist drops a claim about an older
// incarnation than the node's own without a word, and after a refutation
// the claims often are older. A restarted node always refutes its earlier
// process's record as it joins; paused before its gossip went out, it
// leaves its peers suspecting the old incarnation, and they declare it
// dead — a name server drops it from its routes — while the node, resumed,
// ignores every such claim. Its queued gossip, or the push/pull here,
// makes the peers hold it alive again, but a name server re-adds a broker
// only when it registers. The push/pull after a refutation also clears a
// suspicion of the old incarnation before it can time out, when the node
// runs on.
//
// The clock is the monotonic one, which runs on while the process is
// stopped. The ticks on either side of a stall are at least the stall
// apart, so a gap past
// earliestDeath catches every stall its peers could have declared dead,
// and ordinary scheduling delays on a loaded machine (well under that)
// seldom pass it. Each false alarm costs a push/pull per seed and a
// registration round; as each needs a gap past earliestDeath, there are
// at most a few a second however starved the node is.
func (g *Gossip) resyncLoop() {
	defer g.wg.Done()
	tick := g.cfg.ProbeInterval / 2
	t := time.NewTicker(tick)
	defer t.Stop()
	last := g.now()
	for {
		var why string
		select {
		case <-g.ctx.Done():
			return
		case <-g.refuted:
			why = "refuted a claim about itself"
		case <-t.C:
			now := g.now()
			gap := now.Sub(last)
			last = now
			if gap <= g.cfg.earliestDeath() {
				continue
			}
			why = "stood still for " + gap.Round(time.Millisecond).String()
			g.log.Info("gossip: this node stood still; syncing with its seeds and registering again",
				zap.Duration("stall", gap.Round(time.Millisecond)))
		}
		g.syncSeeds()
		g.noteMaybeDead(why)
		// The sync may take up to TCPTimeout; that is not a stall.
		last = g.now()
	}
}

// syncSeeds pushes and pulls state with each seed at once (with the other
// live members when there are no seeds: the first node of a pool has
// none) and waits for them, each for at most TCPTimeout. The peers learn
// this node's current incarnation and meta — alive at a higher
// incarnation beats their "dead" or "suspect" — and this node learns any
// claim about itself at its own incarnation, which it refutes.
func (g *Gossip) syncSeeds() {
	addrs := g.peerSeeds()
	if len(addrs) == 0 {
		for _, m := range g.LiveMembers() {
			if !m.Local {
				addrs = append(addrs, m.Addr)
			}
		}
	}
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.Join([]string{a})
			g.log.Debug("gossip: synced with a seed", zap.String("addr", a), zap.Error(err))
		}()
	}
	wg.Wait()
}
