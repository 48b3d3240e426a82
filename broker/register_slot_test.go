package broker

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestRegisterStaleMemberKeepsFollowerRouted: a member removed while it was
// down starts on its old configuration and registers under the brokerId
// that configuration gives it before it learns of its removal. A follower
// that moved into that brokerId with the removal stays routed: the name
// server keeps the registration from the newer configuration instead of
// replacing it, which would leave the follower unrouted until its next
// periodic registration.
func TestRegisterStaleMemberKeepsFollowerRouted(t *testing.T) {
	pc := startDiskCluster(t, func(c *BrokerConfig) { c.RegisterNameServerPeriod = time.Hour })
	pc.waitGroupRouted()
	// n0 leads, so removing n1 moves n2 from brokerId 3 to n1's 2.
	if l := pc.leader(); l != 0 {
		if err := pc.groups[l].TransferLeadership("n0"); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "n0 leads", func() bool { return pc.leading() == 0 })
	}
	stale, victim := 1, 2
	name := pc.cfgs[0].BrokerName
	victimAddr := pc.nodes[victim].Addr()
	pc.stopNode(stale)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := pc.groups[0].RemoveMember(ctx, "n1", false); err != nil {
		t.Fatal(err)
	}
	routedAs := func(addr string) int64 {
		for id, a := range pc.ns.Routes().ClusterInfo().BrokerAddrTable[name].BrokerAddrs {
			if a == addr {
				return id
			}
		}
		return -1
	}
	testutil.WaitFor(t, 10*time.Second, "n2 routed as brokerId 2", func() bool { return routedAs(victimAddr) == 2 })
	pc.startNode(stale)
	testutil.WaitFor(t, 10*time.Second, "the stale member learns of its removal", func() bool {
		return pc.groups[stale].Removed() != nil
	})
	// Its registration (if any was taken) and its leaving are done once
	// its own address is out of the route.
	testutil.WaitFor(t, 10*time.Second, "the stale member out of the route", func() bool {
		return routedAs(pc.nodes[stale].Addr()) < 0
	})
	if id := routedAs(victimAddr); id != 2 {
		t.Fatalf("follower n2 routed as brokerId %d after the removed n1 started and left; want 2 (route %v)",
			id, pc.ns.Routes().ClusterInfo().BrokerAddrTable[name].BrokerAddrs)
	}
}
