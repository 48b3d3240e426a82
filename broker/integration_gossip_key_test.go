package broker

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
)

// TestGossipSecretKeyKeepsRoguesOut: a name server and a 3-node group
// sharing gossipSecretKey form one pool; a process claiming to be one of
// the group's nodes, without the key or with another, cannot join it, so
// it can never announce that node's departure and the routes keep it.
// Without gossipSecretKey the same rogue joins, and its leave on Close
// drops the leader's address from the route.
func TestGossipSecretKeyKeepsRoguesOut(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 32)))
	nsGossipPort := testutil.FreePort(t)
	ns, nsAddr := startProcNameServerWith(t, func(c *namesrv.Config) {
		c.GossipEnable = true
		c.Gossip.BindAddr, c.Gossip.BindPort, c.Gossip.SecretKey = "127.0.0.1", nsGossipPort, secret
	})
	pc := startRealClusterOn(t, ns, nsAddr, func(c *BrokerConfig) {
		c.GossipEnable = true
		c.Gossip.BindPort = testutil.FreePort(t)
		c.Gossip.Seeds = "127.0.0.1:" + itoa(nsGossipPort)
		c.Gossip.SecretKey = secret
	})
	brokers := func() int {
		n := 0
		for _, m := range ns.Gossip().LiveMembers() {
			if m.Meta.Kind == ha.KindBroker {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 10*time.Second, "name server sees the 3 keyed broker nodes", func() bool { return brokers() == 3 })

	l := pc.leader()
	for name, key := range map[string]string{"no key": "", "another key": base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 32)))} {
		cfg := ha.DefaultGossipConfig()
		cfg.Name = "rogue"
		cfg.BindAddr, cfg.BindPort, cfg.SecretKey = "127.0.0.1", testutil.FreePort(t), key
		meta := ha.NodeMeta{Kind: ha.KindBroker, Cluster: pc.cfgs[l].BrokerClusterName, BrokerName: pc.cfgs[l].BrokerName,
			RaftID: "n9", Role: ha.RoleLeader, RemotingAddr: pc.nodes[l].Addr(), BrokerID: 0}
		g, err := ha.NewGossip(cfg, meta, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n, err := g.Join([]string{"127.0.0.1:" + itoa(nsGossipPort)}); err == nil || n != 0 {
			t.Errorf("%s: rogue joined %d members (%v)", name, n, err)
		}
		_ = g.Close()
		if _, ok := ns.Gossip().Member("rogue"); ok {
			t.Errorf("%s: the name server lists the rogue", name)
		}
	}
	if brokers() != 3 {
		t.Fatalf("name server sees %d broker nodes after the rogues, want 3", brokers())
	}
	ci := ns.Routes().ClusterInfo()
	if bd, ok := ci.BrokerAddrTable[pc.cfgs[l].BrokerName]; !ok || bd.BrokerAddrs[0] != pc.nodes[l].Addr() {
		t.Fatalf("route of %s lost its leader: %+v", pc.cfgs[l].BrokerName, bd)
	}
}
