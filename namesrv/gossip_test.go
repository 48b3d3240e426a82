package namesrv

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// A broker whose gossip member dies is removed from routes at once, long
// before the (here deliberately huge) heartbeat expiry, while its remoting
// connection to the name server is still open.
func TestGossipRemovesDeadBrokerFromRoutes(t *testing.T) {
	ns := testServer(t, func(c *Config) {
		c.GossipEnable = true
		c.Gossip.BindAddr = "127.0.0.1"
		c.BrokerChannelExpiredTime = time.Hour
	})
	if ns.Gossip() == nil {
		t.Fatal("gossipEnable=true but no gossip member")
	}
	nsAddr := ns.Addr().String()

	b := testBroker{cluster: "DefaultCluster", name: "broker-a", addr: "127.0.0.1:10911", id: 0,
		topics: wire.TopicConfigSerializeWrapper{
			TopicConfigTable: map[string]wire.TopicConfig{"orders": {TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
			DataVersion:      wire.DataVersion{Timestamp: 1, Counter: 1},
		}}
	c := testClient(t)
	b.register(t, c, nsAddr)

	gcfg := ha.DefaultGossipConfig()
	gcfg.Name = "broker-a-n0"
	gcfg.BindAddr = "127.0.0.1"
	gcfg.BindPort = 0
	gcfg.Seeds = ns.Gossip().Addr()
	bg, err := ha.NewGossip(gcfg, ha.NodeMeta{Kind: ha.KindBroker, Cluster: b.cluster, BrokerName: b.name, RemotingAddr: b.addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "name server sees the broker's gossip member", func() bool {
		m, ok := ns.Gossip().Member("broker-a-n0")
		return ok && m.State == ha.MemberAlive
	})
	if resp := routeOf(t, c, nsAddr, "orders", 317, false); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("route before crash: code %d %s", resp.Code, resp.Remark)
	}

	crashed := time.Now()
	if err := bg.Shutdown(); err != nil { // no leave: what a crash looks like
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of the dead broker removed", func() bool {
		return routeOf(t, c, nsAddr, "orders", 317, false).Code == remoting.ResponseTopicNotExist
	})
	t.Logf("crashed broker removed from routes %v after the crash", time.Since(crashed).Round(time.Millisecond))
}

func TestGossipConfigDerivesPortAndName(t *testing.T) {
	cfg := DefaultConfig()
	g := cfg.gossipConfig()
	host, _ := os.Hostname()
	if want := "namesrv-" + net.JoinHostPort(host, "9876"); g.BindPort != 9878 || g.Name != want {
		t.Fatalf("derived gossip config: port %d name %q; want 9878 and %s", g.BindPort, g.Name, want)
	}
	cfg.Gossip.BindPort = 7000
	if got := cfg.gossipConfig().BindPort; got != 7000 {
		t.Fatalf("explicit gossipBindPort overridden: %d", got)
	}
}
