package broker

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestWipeWritePermSurvivesLeaderChange: a group whose write permission an
// operator wiped (mqadmin wipeWritePerm, before taking it out) stays
// read-only in the routes after its leadership moves. The new leader
// registers from another address with its own data version and its
// topics' perms; producers must not be routed to the group again until
// addWritePerm.
func TestWipeWritePermSurvivesLeaderChange(t *testing.T) {
	pc := startRealCluster(t, withProdRaftTimings)
	l := pc.createTopicOnLeader("WIPED", 2)
	pc.waitLeaderRegistered()
	name := pc.cfgs[l].BrokerName
	r := pc.call(pc.nsAddr, remoting.RequestWipeWritePermOfBroker, map[string]string{"brokerName": name}, nil)
	if r.Code != remoting.ResponseSuccess || r.ExtFields["wipeTopicCount"] == "0" {
		t.Fatalf("wipeWritePerm: %d %q %v", r.Code, r.Remark, r.ExtFields)
	}
	perm := func() int {
		rd := pc.ns.Routes().PickupTopicRouteData("WIPED")
		if rd == nil || len(rd.QueueDatas) != 1 {
			t.Fatalf("route of WIPED: %+v", rd)
		}
		return rd.QueueDatas[0].Perm
	}
	if p := perm(); p&wire.PermWrite != 0 {
		t.Fatalf("perm after the wipe: %d", p)
	}

	oldAddr := pc.nodes[l].Addr()
	if err := pc.groups[l].TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "the new leader registered as brokerId 0", func() bool {
		bd, ok := pc.ns.Routes().ClusterInfo().BrokerAddrTable[name]
		return ok && bd.BrokerAddrs[0] != "" && bd.BrokerAddrs[0] != oldAddr
	})
	if p := perm(); p&wire.PermWrite != 0 {
		t.Fatalf("after the leader change the wiped group is routed writable again (perm %d)", p)
	}

	r = pc.call(pc.nsAddr, remoting.RequestAddWritePermOfBroker, map[string]string{"brokerName": name}, nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("addWritePerm: %d %q", r.Code, r.Remark)
	}
	if p := perm(); p&wire.PermWrite == 0 {
		t.Fatalf("perm after addWritePerm: %d", p)
	}
}
