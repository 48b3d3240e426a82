package ha

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// stallLoop notices that this node stood still — the process was paused
// (SIGSTOP, a VM migration) or starved — for longer than a probe of it can
// wait for an answer (ProbeInterval), long enough for its peers to have
// suspected it and declared it dead. It then syncs state with its seeds
// (a push/pull, what Join does) and signals MaybeDeclaredDead, so that a
// broker registers again with the name servers, which may have dropped it
// from their routes.
//
// A resumed node cannot count on hearing the claim and refuting it:
// memberlist drops a claim about an older incarnation than the node's own
// without a word, and the claims often are older. A node raises its
// incarnation when it refutes (a restarted node always refutes its earlier
// process's record as it joins) or updates its meta, and tells the others
// by gossip; frozen before that gossip went out, it leaves its peers with
// the old incarnation, which they suspect and declare dead — a name server
// then drops it from the routes — while the node, resumed, ignores every
// such claim. Its queued broadcast, or the push/pull here, makes the peers
// hold it alive again, but nothing makes it register again, and a name
// server re-adds a broker only when it registers. Hence the signal after
// every stall, whatever the node heard meanwhile.
//
// The clock is the monotonic one, which runs on while the process is
// stopped. A stall shorter than the threshold cannot have had a probe
// fail: its answer is late by less than the probe waits for it. A loaded
// machine's scheduling delays may pass the threshold now and then; each
// costs a push/pull per seed and a registration round.
func (g *Gossip) stallLoop() {
	defer g.wg.Done()
	tick := g.cfg.ProbeInterval / 2
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		gap := now.Sub(last)
		last = now
		if gap <= tick+g.cfg.ProbeInterval {
			continue
		}
		g.log.Info("gossip: this node stood still; syncing with its seeds and signalling that peers may hold it dead",
			zap.Duration("stall", gap.Round(time.Millisecond)))
		g.syncAfterStall()
		g.noteMaybeDead("stood still for " + gap.Round(time.Millisecond).String())
		// The sync may take up to TCPTimeout; that is not a stall.
		last = time.Now()
	}
}

// syncAfterStall pushes and pulls state with each seed at once (with the
// other live members when there are no seeds: the first node of a pool
// has none) and waits for them, each for at most TCPTimeout. The peers
// learn this node's current incarnation and meta — alive beats their
// older "dead" — and this node learns any claim about itself at its own
// incarnation, which it refutes.
func (g *Gossip) syncAfterStall() {
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
			g.log.Debug("gossip: synced after a stall", zap.String("addr", a), zap.Error(err))
		}()
	}
	wg.Wait()
}
