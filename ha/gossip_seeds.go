package ha

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
)

// seedSet is the rejoin loop's state, owned by Start and then by the
// loop: the seeds, what it knows of each, and when it noticed the last
// member lost.
type seedSet struct {
	addrs  []string
	state  []seedState // one per addrs entry
	losses uint64      // Gossip.losses when last noticed
	lossAt time.Time   // when that was; zero before any loss
}

// seedState is what the rejoin loop remembers of one seed between rounds.
type seedState struct {
	// settled: the seed knew this node when Gossip.losses was at: it was
	// a live member, or answered a join (see joinSeeds for which answers
	// count).
	settled bool
	at      uint64
	// down: a warning said the seed does not answer; cleared once it does.
	down bool
}

// rejoinLoop keeps the seeds aware of this node. memberlist syncs state
// only with members it holds alive, so a seed that restarted (a new
// process on the same address knows nobody) hears of this node only by
// chance: brokers that still see each other would not join a restarted
// name server, whose gossip then cannot drop a dead broker from its
// routes. Every JoinRetryInterval it joins each seed not settled: one that
// never answered, and, after any member was lost (reported dead or left;
// a seed that restarted was first one of those), each seed none of whose
// addresses is a live member's. A seed that is no member's address (a
// Kubernetes Service in front of a name server, a NAT) costs the rounds of
// one LeaveTimeout per loss (one or two joins with the defaults), not one
// join per round. A seed that stays down costs a refused connection per
// round (at most TCPTimeout: the seeds are tried at once) and one warning.
//
// A seed that crashes and is back before any member probes it in between
// is not noticed; the periodic push/pull repairs that (PushPullInterval,
// with a random partner).
func (g *Gossip) rejoinLoop(set *seedSet) {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.JoinRetryInterval)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		g.joinSeeds(set)
	}
}

// joinSeeds is one round of rejoinLoop.
func (g *Gossip) joinSeeds(set *seedSet) {
	start := time.Now()
	if l := g.losses.Load(); l != set.losses {
		set.losses, set.lossAt = l, start
	}
	var todo []int
	for i, st := range set.state {
		if !st.settled || st.at != set.losses {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return
	}
	// By address: true if a member there is alive, false if every member
	// there is dead or left.
	held := make(map[string]bool)
	for _, m := range g.Members() {
		held[m.Addr] = held[m.Addr] || m.State == MemberAlive
	}
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.TCPTimeout)
	defer cancel()
	type outcome struct {
		alive, gone bool // as seedHeld
		err         error
	}
	out := make([]outcome, len(set.addrs))
	var wg sync.WaitGroup
	for _, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &out[i]
			o.alive, o.gone = g.seedHeld(ctx, set.addrs[i], held)
			if !o.alive {
				_, o.err = g.Join(set.addrs[i : i+1])
			}
		}()
	}
	wg.Wait()
	for _, i := range todo {
		seed, st, o := set.addrs[i], &set.state[i], out[i]
		switch {
		case errors.Is(o.err, ErrClosed):
			return
		case o.err != nil:
			st.settled = false
			if !st.down {
				g.log.Warn("gossip: seed does not answer; retrying", zap.String("seed", seed),
					zap.Duration("retryInterval", g.cfg.JoinRetryInterval), zap.Error(o.err))
				st.down = true
			}
			continue
		case !o.alive:
			g.log.Debug("gossip: joined seed", zap.String("seed", seed), zap.Bool("heldGone", o.gone))
		}
		if st.down {
			g.log.Info("gossip: seed answers again", zap.String("seed", seed))
			st.down = false
		}
		// Which answers settle a seed: a member that has just left still
		// answers while its leave goes out (up to LeaveTimeout), and a new
		// process answers before it has refuted the old one's death. So a
		// seed whose address is held dead or left is settled only by
		// seeing it alive, and one that is no member's address, whose
		// answer could come from either, only by an answer from after
		// that window.
		st.settled = o.alive || (!o.gone && (set.lossAt.IsZero() || !start.Before(set.lossAt.Add(g.cfg.LeaveTimeout))))
		st.at = set.losses
	}
}

// seedHeld looks the address seed names up in held (by address: whether
// a member there is alive) and reports whether a member there is alive,
// and whether, if not, one there is dead or left. A host name is resolved
// each time (a restarted node may come back on another address); one of
// its addresses being a live member's is enough, as for a dual-stack host:
// a seed entry names one node, as each namesrvAddr entry does.
func (g *Gossip) seedHeld(ctx context.Context, seed string, held map[string]bool) (alive, gone bool) {
	host, port, err := net.SplitHostPort(seed)
	if err != nil {
		return false, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false, false // the join reports it
	}
	port = strconv.FormatUint(p, 10)
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return false, false // the join reports it
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if up, ok := held[net.JoinHostPort(ip.String(), port)]; ok {
			if up {
				return true, false
			}
			gone = true
		}
	}
	return false, gone
}

// peerSeeds drops this node's own address from the configured seeds:
// joining oneself "succeeds" and would hide that nobody else answered.
func (g *Gossip) peerSeeds() []string {
	self := g.self.Load()
	var out []string
	for _, s := range g.cfg.SeedAddrs() {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			continue // Validate rejected these already
		}
		if p, _ := strconv.Atoi(port); p == self.Port {
			ip := net.ParseIP(host)
			if ip != nil && (ip.Equal(self.IP) || (ip.IsLoopback() && self.IP.IsLoopback()) ||
				(net.ParseIP(g.cfg.BindAddr).IsUnspecified() && (ip.IsLoopback() || ip.IsUnspecified()))) {
				continue
			}
		}
		out = append(out, s)
	}
	return out
}
