package broker

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/wire"
)

// openChannel is a name-server channel that stays open: a broker that
// vanished without its connection closing.
type openChannel struct{}

func (openChannel) Close() error { return nil }
func (openChannel) Closed() bool { return false }

// TestRegisterIgnoredFollowerRegistersAgainSoon: a follower whose
// registration the name server ignored, because another address still
// holds its brokerId with a higher state version (the address it had
// before it came back on a new one with an empty volume, whose last
// registration carried a longer log than the follower's snapshot), is
// routed within seconds of that record going, not a registration period
// (30 s) later.
func TestRegisterIgnoredFollowerRegistersAgainSoon(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	f := (l + 1) % 3
	name, cluster := pc.cfgs[f].BrokerName, pc.cfgs[f].BrokerClusterName
	addr := pc.nodes[f].Addr()
	var id int64 = -1
	testutil.WaitFor(t, 10*time.Second, "the follower routed", func() bool {
		for i, a := range pc.ns.Routes().ClusterInfo().BrokerAddrTable[name].BrokerAddrs {
			if a == addr && i > 0 {
				id = i
				return true
			}
		}
		return false
	})

	// The follower's old address, still live on the name server, with the
	// longer log.
	const oldAddr = "127.0.0.1:1"
	w := wire.TopicConfigSerializeWrapper{TopicConfigTable: map[string]wire.TopicConfig{},
		DataVersion: wire.DataVersion{StateVersion: math.MaxInt32}}
	if _, err := pc.ns.Routes().RegisterBroker(namesrv.RegisterBrokerArgs{Cluster: cluster, BrokerName: name, BrokerID: id,
		BrokerAddr: oldAddr, Topics: w, Channel: openChannel{}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc.nodes[f].reg.registerNow(ctx)
	if got := pc.ns.Routes().ClusterInfo().BrokerAddrTable[name].BrokerAddrs[id]; got != oldAddr {
		t.Fatalf("brokerId %d is %s after the follower's registration; the old address's newer one should stand", id, got)
	}

	// The old address's record goes (expiry, gossip).
	if !pc.ns.Routes().RemoveBrokerByAddr(cluster, oldAddr) {
		t.Fatal("old address not registered")
	}
	testutil.WaitFor(t, 10*time.Second, "the follower routed again", func() bool {
		return pc.ns.Routes().ClusterInfo().BrokerAddrTable[name].BrokerAddrs[id] == addr
	})
}
