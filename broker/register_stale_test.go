package broker

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// A registration the old leader built while it led, delivered to the name
// server after the new leader and the old one (as a follower) registered,
// must not make the old leader brokerId 0 again: clients would send to a
// follower and the new leader would be missing from the route until its
// next periodic registration.
func TestRegisterLateRegistrationOfDeposedLeaderIgnored(t *testing.T) {
	pc := startRealCluster(t, withProdRaftTimings)
	old := pc.leader()
	stale, err := pc.nodes[old].reg.prepare()
	if err != nil {
		t.Fatal(err)
	}
	if stale.id != 0 {
		t.Fatalf("leader prepared brokerId %d", stale.id)
	}
	if err := pc.groups[old].TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	name := pc.cfgs[old].BrokerName
	oldAddr := pc.nodes[old].Addr()
	newAddr := ""
	testutil.WaitFor(t, 15*time.Second, "new leader brokerId 0, old leader a follower id", func() bool {
		bd, ok := pc.ns.Routes().ClusterInfo().BrokerAddrTable[name]
		if !ok {
			return false
		}
		newAddr = bd.BrokerAddrs[0]
		if newAddr == "" || newAddr == oldAddr {
			return false
		}
		for id, a := range bd.BrokerAddrs {
			if a == oldAddr && id != 0 {
				return true
			}
		}
		return false
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := pc.client.InvokeSync(ctx, pc.nsAddr, pc.nodes[old].reg.request(stale))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("late registration: %v %v", err, resp)
	}
	bd := pc.ns.Routes().ClusterInfo().BrokerAddrTable[name]
	if bd.BrokerAddrs[0] != newAddr {
		t.Fatalf("after the deposed leader's late registration brokerId 0 is %q, want the new leader %q (addrs %v)",
			bd.BrokerAddrs[0], newAddr, bd.BrokerAddrs)
	}
	// The refused registration changes nothing: the old leader stays
	// routed as the follower it now is.
	if !slices.Contains(slices.Collect(maps.Values(bd.BrokerAddrs)), oldAddr) {
		t.Fatalf("after its late registration the deposed leader %s is no longer routed as a follower (addrs %v)", oldAddr, bd.BrokerAddrs)
	}
}
