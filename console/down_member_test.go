package console_test

import (
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/console"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/wire"
)

// A member that is down while its registration lingers (a hung host: its
// connection to the name server stays open until the registration
// expires) showed twice on the cluster map: once as its Raft id from the
// others' configuration (Unknown, no address) and once as its registered
// address (Unreachable, no id). It is now one row: its id, its address,
// its broker id and why it did not answer.
func TestDownMemberShownOnce(t *testing.T) {
	e := startEnv(t, adminAK, adminSK)
	var cv console.ClusterView
	testutil.WaitFor(t, 15*time.Second, "every member answering RAFT_STATUS", func() bool {
		e.get(t, "/api/cluster", "", &cv)
		if len(cv.Clusters) != 1 || len(cv.Clusters[0].Groups) != 1 || len(cv.Clusters[0].Groups[0].Members) != 3 {
			return false
		}
		return !slices.ContainsFunc(cv.Clusters[0].Groups[0].Members, func(m console.MemberView) bool { return m.Error != "" || m.BrokerID < 0 })
	})
	down := (e.c.Leader(0) + 1) % 3
	mb := e.c.Member(0, down)
	i := slices.IndexFunc(cv.Clusters[0].Groups[0].Members, func(m console.MemberView) bool { return m.ID == mb.ID() })
	if i < 0 {
		t.Fatalf("member %s not on the map: %+v", mb.ID(), cv.Clusters[0].Groups[0].Members)
	}
	bid := cv.Clusters[0].Groups[0].Members[i].BrokerID
	e.c.Kill(0, down)
	// Its closed connection unregistered it; a hung host stays registered.
	testutil.WaitFor(t, 10*time.Second, "the killed member unregistered", func() bool {
		_, ok := e.c.Namesrv().Routes().ClusterInfo().BrokerAddrTable["broker-a"].BrokerAddrs[bid]
		return !ok
	})
	if _, err := e.c.Namesrv().Routes().RegisterBroker(namesrv.RegisterBrokerArgs{Cluster: "DefaultCluster", BrokerAddr: mb.Addr(),
		BrokerName: "broker-a", BrokerID: bid, HeartbeatTimeout: time.Minute,
		Topics: wire.TopicConfigSerializeWrapper{DataVersion: wire.DataVersion{Counter: 1, Timestamp: 1}}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "the down member's row", func() bool {
		e.get(t, "/api/cluster", "", &cv)
		for _, m := range cv.Clusters[0].Groups[0].Members {
			if m.ID == mb.ID() && m.State != "Leader" && m.State != "Follower" {
				return true
			}
		}
		return false
	})
	ms := cv.Clusters[0].Groups[0].Members
	if len(ms) != 3 {
		t.Fatalf("%d rows for 3 members, one down: %+v", len(ms), ms)
	}
	i = slices.IndexFunc(ms, func(m console.MemberView) bool { return m.ID == mb.ID() })
	if m := ms[i]; m.RemotingAddr != mb.Addr() || m.BrokerID != bid || m.State != "Unreachable" || m.Error == "" || m.Suffrage != "Voter" {
		t.Errorf("down member's row %+v, want its address %s, broker id %d, Unreachable with the error, Voter", m, mb.Addr(), bid)
	}
}
