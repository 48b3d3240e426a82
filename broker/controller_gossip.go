package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/raftlog"
)

// Gossip wiring: every broker node joins the memberlist pool the
// name servers are in, so a name server hears of a node's death within a
// second and drops its address from the routes instead of waiting for the
// 120 s registration expiry. The node's NodeMeta follows its Raft role.

// GossipConfig returns the memberlist settings this node uses: the name
// defaults to <brokerName>-<raftId>, the bind address to listenAddr, the
// advertised address to brokerIP1, the port to listenPort+2, and the seeds
// to every name server's address with port+2 (the name server's gossip
// port; see namesrv) plus any gossipSeeds given. The group's peers are
// found through the name servers, so no extra key is needed when the name
// servers run with gossipEnable=true.
func (c *BrokerConfig) GossipConfig() ha.GossipConfig {
	g := c.Gossip
	if g.Name == "" {
		g.Name = c.BrokerName + "-" + c.Raft.DLegerSelfID
	}
	if g.BindPort == 0 {
		g.BindPort = c.ListenPort + 2
	}
	if g.BindAddr == "" || g.BindAddr == "0.0.0.0" {
		if c.ListenAddr != "" {
			g.BindAddr = c.ListenAddr
		}
	}
	if g.AdvertiseAddr == "" && c.BrokerIP1 != "" {
		if ip := net.ParseIP(g.BindAddr); ip != nil && ip.IsUnspecified() {
			g.AdvertiseAddr = c.BrokerIP1
		}
	}
	seeds := g.SeedAddrs()
	for _, ns := range c.NameServers() {
		host, port, err := net.SplitHostPort(ns)
		if err != nil {
			continue
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			continue
		}
		seeds = append(seeds, net.JoinHostPort(host, strconv.Itoa(p+2)))
	}
	g.Seeds = strings.Join(seeds, ",")
	return g
}

// gossipUser is a Replica that consults the node's gossip pool (the
// Group's preferred-leader check: group_preferred.go).
type gossipUser interface {
	setGossip(gossipLookup)
}

var _ gossipUser = (*Group)(nil)

// gossipMeta is the node's NodeMeta for a role.
func (c *Controller) gossipMeta(leader bool, term uint64) ha.NodeMeta {
	m := ha.NodeMeta{
		Kind: ha.KindBroker, Cluster: c.cfg.BrokerClusterName, BrokerName: c.cfg.BrokerName,
		RaftID: c.cfg.Raft.DLegerSelfID, RemotingAddr: c.addr, Term: term,
		Role: ha.RoleFollower, BrokerID: -1,
	}
	if id, ok := memberBrokerIDOf(c.rep, &c.cfg, c.cfg.Raft.DLegerSelfID); ok {
		m.BrokerID = id
	}
	if leader {
		m.Role, m.BrokerID = ha.RoleLeader, 0
	}
	if peers, err := raftlog.ParsePeers(c.cfg.Raft.DLegerPeers); err == nil {
		for _, p := range peers {
			if p.ID == c.cfg.Raft.DLegerSelfID {
				m.RaftAddr = p.Addr
			}
		}
	}
	return m
}

// startGossip joins the pool (gossipEnable). A node that finds no seed
// keeps running alone and retries; gossip is an accelerator, never a
// precondition for serving.
func (c *Controller) startGossip() error {
	if !c.cfg.GossipEnable {
		return nil
	}
	cfg := c.cfg.GossipConfig()
	g, err := ha.NewGossip(cfg, c.gossipMeta(c.rep.IsLeader(), 0), c.log.Named("gossip"))
	if err != nil {
		return fmt.Errorf("broker: gossip: %w", err)
	}
	if err := g.Start(context.Background()); err != nil {
		return fmt.Errorf("broker: gossip on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	c.gossip = g
	c.gossipKick = make(chan struct{}, 1)
	c.goFunc(c.publishGossipMeta)
	if gs, ok := c.rep.(gossipUser); ok {
		cluster, group := c.cfg.BrokerClusterName, c.cfg.BrokerName
		gs.setGossip(func(id string) (ha.Member, bool) { return g.BrokerMember(cluster, group, id) })
	}
	c.log.Info("gossip joined", zap.String("name", cfg.Name), zap.String("addr", g.Addr()), zap.String("seeds", cfg.Seeds))
	return nil
}

// updateGossipMeta publishes the node's meta as it is now and waits for
// the broadcast (up to the gossip UpdateTimeout): on a role change (the
// role goroutine) and, through kickGossipMeta, when the member's slot in
// the Raft configuration moves, e.g. a member that joined with no state
// and learned the configuration after its last role change. Every caller
// computes under gossipMu from the live state, so the last publish is the
// newest state.
func (c *Controller) updateGossipMeta() {
	if c.gossip == nil {
		return
	}
	c.gossipMu.Lock()
	defer c.gossipMu.Unlock()
	m := c.gossipMeta(c.rep.IsLeader(), c.term.Load())
	if m == c.gossip.Meta() {
		return
	}
	if err := c.gossip.UpdateMeta(m); err != nil {
		c.log.Warn("gossip: meta update not confirmed", zap.String("role", string(m.Role)), zap.Uint64("term", m.Term),
			zap.Int64("brokerId", m.BrokerID), zap.Error(err))
	}
}

// kickGossipMeta asks for the meta to be published without waiting for
// it: the registration loop calls it every round, and a round held behind
// a broadcast (a new leader's role change is one) would keep the name
// servers from routing the new leader for as long as the broadcast takes
// to spread.
func (c *Controller) kickGossipMeta() {
	if c.gossip == nil {
		return
	}
	select {
	case c.gossipKick <- struct{}{}:
	default:
	}
}

// publishGossipMeta is the tracked goroutine behind kickGossipMeta.
func (c *Controller) publishGossipMeta() {
	for {
		select {
		case <-c.quit:
			return
		case <-c.gossipKick:
			c.updateGossipMeta()
		}
	}
}

// Gossip returns the node's gossip member (nil when gossipEnable is off or
// before Start).
func (c *Controller) Gossip() *ha.Gossip { return c.gossip }

// stopGossip leaves the pool gracefully so peers see Leave at once.
func (c *Controller) stopGossip() error {
	if c.gossip == nil {
		return nil
	}
	if gs, ok := c.rep.(gossipUser); ok {
		gs.setGossip(nil)
	}
	return c.gossip.Close()
}
