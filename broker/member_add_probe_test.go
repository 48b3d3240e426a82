package broker

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startOtherGroup starts a one-member group broker-b, member id, at
// raftAddr on c's in-memory network: another group's running member that
// an addMember with a mistyped --addr can reach.
func startOtherGroup(t *testing.T, c *testCluster, id, raftAddr string) *testCluster {
	t.Helper()
	cfg := c.nodes[0].cfg
	cfg.Raft.DLegerGroup = "broker-b"
	cfg.Raft.DLegerPeers = id + "-" + raftAddr
	cfg.Raft.DLegerSelfID = id
	cfg.Raft.PreferredLeaderID = ""
	cfg.Store.StorePathRootDir = filepath.Join(filepath.Dir(cfg.Store.StorePathRootDir), "broker-b-"+id)
	parts, err := NewInmemParts(cfg, c.net)
	if err != nil {
		t.Fatal(err)
	}
	b := &testCluster{t: t, net: c.net}
	b.nodes = append(b.nodes, &testNode{id: id, cfg: cfg, remoting: "127.0.0.1:30999", parts: parts, base: parts.FS})
	b.start(0)
	t.Cleanup(func() { b.stop(0) })
	return b
}

// addMember adds a learner at a Raft address the leader reaches. When a
// running member of a group answers there (another group's member under
// the same id, as ids n0..n2 repeat across groups, or a member of this
// group under another id), the leader would replicate its log to it: the
// other group's member follows this leader and has its own log truncated,
// or one process counts twice toward this group's quorum. The add is
// refused before the configuration changes, naming what answered.
func TestAddMemberRefusesARunningMemberAtTheAddress(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	l := c.leader()
	ctx := context.Background()

	// Another group's member n3, holding an acknowledged message.
	const bAddr = "127.0.0.1:30913"
	b := startOtherGroup(t, c, "n3", bAddr)
	b.createTopic("T", 2)
	acks := []ack{b.sendSeq(0, 64)}
	if _, err := l.g().AddMember(ctx, "n3", bAddr, AddMemberOptions{Learner: true}); !errors.Is(err, ErrMembershipConflict) ||
		!strings.Contains(err.Error(), "term") {
		t.Fatalf("add n3 at another group's member: %v, want ErrMembershipConflict naming its Raft term; members %s",
			err, membersOf(t, l.g()))
	} else {
		t.Logf("refused: %v", err)
	}
	if got := membersOf(t, l.g()); strings.Contains(got, "n3") {
		t.Fatalf("refused add changed the configuration: %s", got)
	}
	if !b.nodes[0].g().IsLeader() {
		t.Fatal("broker-b's member lost its leadership")
	}
	checkAcked(t, b.nodes[0], acks)

	// A new member waiting to be added, named by another id.
	n4 := addTestNode(t, c, "n4", 4)
	addr, _ := n4.cfg.Raft.SelfAddr()
	if _, err := l.g().AddMember(ctx, "n5", addr, AddMemberOptions{Learner: true}); !errors.Is(err, ErrMembershipConflict) ||
		!strings.Contains(err.Error(), "n4") {
		t.Fatalf("add n5 at n4's address: %v, want ErrMembershipConflict naming n4; members %s", err, membersOf(t, l.g()))
	}
	// Under its own id it is added and promoted.
	if _, err := l.g().AddMember(ctx, "n4", addr, AddMemberOptions{Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// A member of this group holding Raft state (removed and not wiped,
	// as a learner whose add a leader change lost holds it too) takes this
	// leader as a voter of its group: it is added again.
	gone := c.nodes[c.followerOf(l)]
	if _, err := l.g().RemoveMember(ctx, gone.id, false); err != nil {
		t.Fatal(err)
	}
	goneAddr, _ := gone.cfg.Raft.SelfAddr()
	if _, err := l.g().AddMember(ctx, gone.id, goneAddr, AddMemberOptions{Timeout: 30 * time.Second}); err != nil {
		t.Fatalf("add of %s, a member of this group removed and not wiped: %v", gone.id, err)
	}
	// Nobody at the address yet (the new host is still starting): added
	// as a learner, as before, so that it is replicated to once it is up.
	if _, err := l.g().AddMember(ctx, "n6", "127.0.0.1:20916", AddMemberOptions{Learner: true}); err != nil {
		t.Fatalf("add of a member not started yet: %v", err)
	}
}
