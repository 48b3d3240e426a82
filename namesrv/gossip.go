package namesrv

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/ha"
)

// defaultGossip is ha's LAN-tuned config with the port left to be derived
// from listenPort (see gossipConfig).
func defaultGossip() ha.GossipConfig {
	g := ha.DefaultGossipConfig()
	g.BindPort = 0
	return g
}

// gossipConfig fills what the name server derives from its own settings:
// the bind port (listenPort+2, or a free port when listenPort is 0 as in
// tests), the bind address (the listen address) and the node name.
func (c Config) gossipConfig() ha.GossipConfig {
	g := c.Gossip
	if g.BindPort == 0 && c.ListenPort != 0 {
		g.BindPort = c.ListenPort + 2
	}
	if g.BindAddr == "" || g.BindAddr == "0.0.0.0" {
		g.BindAddr = c.ListenAddr
	}
	if g.Name == "" {
		// Member names must be unique in the pool: a wildcard listen address
		// says nothing about the host, so use the host name there.
		host := c.ListenAddr
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if h, err := os.Hostname(); err == nil {
				host = h
			}
		}
		g.Name = "namesrv-" + net.JoinHostPort(host, strconv.Itoa(c.ListenPort))
	}
	return g
}

// startGossip joins the pool and removes brokers that gossip reports dead
// or gone from the route tables at once.
func (n *NameServer) startGossip() error {
	cfg := n.cfg.gossipConfig()
	if n.cfg.Gossip.Name == "" && n.cfg.ListenPort == 0 {
		// Port 0 in tests: name the node by the port actually bound.
		cfg.Name = "namesrv-" + n.srv.Addr().String()
	}
	meta := ha.NodeMeta{Kind: ha.KindNameServer, RemotingAddr: n.srv.Addr().String()}
	g, err := ha.NewGossip(cfg, meta, n.log.Named("gossip"))
	if err != nil {
		return fmt.Errorf("namesrv: gossip: %w", err)
	}
	if err := g.Start(context.Background()); err != nil {
		return fmt.Errorf("namesrv: gossip: %w", err)
	}
	n.gossip.Store(g)
	if n.cfg.ClusterAuthAccessKey != "" && strings.TrimSpace(cfg.SecretKey) == "" {
		// Unencrypted gossip admits anyone who reaches its port, and a
		// member's metadata names whatever broker address it likes: its
		// leave would drop that broker from the routes, the one thing
		// clusterAuth* keeps to signed UNREGISTER_BROKER requests. The
		// routes then wait for the heartbeat expiry, as without gossip.
		n.log.Warn("gossip is not encrypted (gossipSecretKey unset) while registrations are authenticated (clusterAuthAccessKey): " +
			"gossip will not remove brokers from the routes; set gossipSecretKey on every broker and name server")
		n.unsubscribeGossip = func() {}
	} else {
		n.unsubscribeGossip = ha.RemoveGoneBrokers(g, n, n.log.Named("gossip"))
	}
	n.log.Info("gossip joined", zap.String("addr", g.Addr()), zap.String("name", cfg.Name))
	return nil
}

// Gossip returns the name server's gossip member, nil when gossipEnable is
// off or before Start.
func (n *NameServer) Gossip() *ha.Gossip { return n.gossip.Load() }

func (n *NameServer) stopGossip() {
	g := n.gossip.Load()
	if g == nil {
		return
	}
	n.unsubscribeGossip()
	if err := g.Close(); err != nil {
		n.log.Warn("gossip: leave failed", zap.Error(err))
	}
}
