package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/wire"
)

// TestRaftStatusShowsADownMemberOnce: a member that is down while its
// registration lingers (a hung host: its connection to the name server
// stays open until the registration expires) is one row of raftStatus:
// its Raft id, its registered address and broker id, and why it did not
// answer. It was two, its id from the others' configuration (Unknown, no
// address) and its address (Unreachable, no id).
func TestRaftStatusShowsADownMemberOnce(t *testing.T) {
	c := devcluster.MustStart(t, devcluster.Options{SegmentBytes: 8 << 20, ConsumeQueueEntries: 10_000, InMemory: true})
	ns := c.NamesrvAddr()
	routes := func() map[int64]string {
		return c.Namesrv().Routes().ClusterInfo().BrokerAddrTable["broker-a"].BrokerAddrs
	}
	testutil.WaitFor(t, 15*time.Second, "every member registered", func() bool { return len(routes()) == 3 })
	down := (c.Leader(0) + 1) % 3
	mb := c.Member(0, down)
	bid := int64(-1)
	for id, addr := range routes() {
		if addr == mb.Addr() {
			bid = id
		}
	}
	if bid <= 0 {
		t.Fatalf("follower %s registered as %d: %v", mb.ID(), bid, routes())
	}
	c.Kill(0, down)
	// Its closed connection unregistered it; a hung host stays registered.
	testutil.WaitFor(t, 10*time.Second, "the killed member unregistered", func() bool {
		_, ok := routes()[bid]
		return !ok
	})
	if _, err := c.Namesrv().Routes().RegisterBroker(namesrv.RegisterBrokerArgs{Cluster: "DefaultCluster", BrokerAddr: mb.Addr(),
		BrokerName: "broker-a", BrokerID: bid, HeartbeatTimeout: time.Minute,
		Topics: wire.TopicConfigSerializeWrapper{DataVersion: wire.DataVersion{Counter: 1, Timestamp: 1}}}); err != nil {
		t.Fatal(err)
	}

	out := mustAdmin(t, "raftStatus", "-n", ns, "-b", "broker-a", "--timeout", "2s", "--json")
	var gs []client.RaftGroup
	if err := json.Unmarshal([]byte(out), &gs); err != nil || len(gs) != 1 {
		t.Fatalf("raftStatus --json: %v\n%s", err, out)
	}
	ms := gs[0].Members
	if len(ms) != 3 {
		t.Fatalf("%d rows for 3 members, one down:\n%s", len(ms), out)
	}
	for _, m := range ms {
		if m.ID == mb.ID() {
			if m.RemotingAddr != mb.Addr() || m.BrokerID != bid || m.State != "Unreachable" || m.Error == "" {
				t.Fatalf("the down member's row %+v, want its address %s, broker id %d, Unreachable with the error", m, mb.Addr(), bid)
			}
			table := mustAdmin(t, "raftStatus", "-n", ns, "-b", "broker-a", "--timeout", "2s")
			if n := strings.Count(table, "broker-a"); n != 3 {
				t.Fatalf("the table has %d rows for 3 members:\n%s", n, table)
			}
			return
		}
	}
	t.Fatalf("no row for the down member %s:\n%s", mb.ID(), out)
}
