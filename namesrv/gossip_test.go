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

// TestGossipWithoutKeyCannotUnregister: with clusterAuth* set, only the
// cluster account may take a broker out of the routes (UNREGISTER_BROKER
// is signed). Unencrypted gossip lets anyone who reaches its port join,
// claim a broker's address in its metadata and leave, so without
// gossipSecretKey the pool's departures must not remove routes. A member
// that holds the key still does.
func TestGossipWithoutKeyCannotUnregister(t *testing.T) {
	const key = "cmFmdG1xLWdvc3NpcC1rIQ==" // base64 of 16 bytes
	for _, keyed := range []bool{false, true} {
		ns := testServer(t, func(c *Config) {
			c.ClusterAuthAccessKey, c.ClusterAuthSecretKey = "clusterKey1", "clusterSecret1"
			c.GossipEnable = true
			c.Gossip.BindAddr = "127.0.0.1"
			if keyed {
				c.Gossip.SecretKey = key
			}
			c.BrokerChannelExpiredTime = time.Hour
		})
		nsAddr := ns.Addr().String()
		signed := testClient(t)
		signed.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: "clusterKey1", SecretKey: "clusterSecret1"}))
		b := testBroker{cluster: "DefaultCluster", name: "broker-a", addr: "127.0.0.1:10911", id: 0,
			topics: wire.TopicConfigSerializeWrapper{
				TopicConfigTable: map[string]wire.TopicConfig{"orders": {TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
				DataVersion:      wire.DataVersion{Timestamp: 1, Counter: 1},
			}}
		b.register(t, signed, nsAddr)
		// Events reach subscribers one at a time, in order: once the
		// marker's join arrived, the impostor's leave was handled.
		markerJoined := make(chan struct{}, 1)
		unsubscribe := ns.Gossip().Subscribe(func(ev ha.Event) {
			if ev.Kind == ha.EventJoin && ev.Member.Name == "marker" {
				markerJoined <- struct{}{}
			}
		})
		t.Cleanup(unsubscribe)
		member := func(name string, meta ha.NodeMeta) *ha.Gossip {
			gcfg := ha.DefaultGossipConfig()
			gcfg.Name, gcfg.BindAddr, gcfg.BindPort, gcfg.Seeds = name, "127.0.0.1", 0, ns.Gossip().Addr()
			if keyed {
				gcfg.SecretKey = key
			}
			g, err := ha.NewGossip(gcfg, meta, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			return g
		}

		impostor := member("impostor", ha.NodeMeta{Kind: ha.KindBroker, Cluster: b.cluster, BrokerName: b.name, RemotingAddr: b.addr})
		testutil.WaitFor(t, 5*time.Second, "name server sees the gossip member", func() bool {
			m, ok := ns.Gossip().Member("impostor")
			return ok && m.State == ha.MemberAlive
		})
		if err := impostor.Close(); err != nil { // a graceful leave
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "name server sees the member leave", func() bool {
			m, ok := ns.Gossip().Member("impostor")
			return !ok || m.State != ha.MemberAlive
		})
		marker := member("marker", ha.NodeMeta{Kind: ha.KindNameServer, RemotingAddr: "127.0.0.1:1"})
		t.Cleanup(func() { _ = marker.Shutdown() })
		select {
		case <-markerJoined:
		case <-time.After(10 * time.Second):
			t.Fatal("the marker's join never reached the name server's subscribers")
		}
		code := routeOf(t, signed, nsAddr, "orders", 317, false).Code
		switch {
		case keyed && code != remoting.ResponseTopicNotExist:
			t.Fatalf("keyed gossip: the member's leave did not remove its broker's route (code %d)", code)
		case !keyed && code != remoting.ResponseSuccess:
			t.Fatalf("an unencrypted gossip member's leave removed the cluster-authenticated broker's route (code %d)", code)
		}
	}
}
