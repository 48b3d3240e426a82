package broker

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
)

// addProcMember starts a fourth member of pc's group with raftJoin=true
// (waiting to be added) at the Raft address it returns: in memory, or on
// a free TCP port for a disk cluster.
func addProcMember(t *testing.T, pc *procCluster, id string) string {
	t.Helper()
	raftAddr := "127.0.0.1:20913"
	if pc.net == nil {
		raftAddr = "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	}
	cfg := pc.cfgs[0]
	cfg.ListenPort = testutil.FreePort(t)
	cfg.Store.StorePathRootDir = filepath.Join(filepath.Dir(pc.cfgs[0].Store.StorePathRootDir), id)
	cfg.Raft.DLegerSelfID = id
	cfg.Raft.DLegerPeers += ";" + id + "-" + raftAddr
	cfg.RaftJoin = true
	if err := cfg.Derive(); err != nil {
		t.Fatal(err)
	}
	var parts Parts
	if pc.net != nil {
		var err error
		if parts, err = NewInmemParts(cfg.GroupConfig, pc.net); err != nil {
			t.Fatal(err)
		}
	}
	pc.cfgs, pc.parts, pc.started = append(pc.cfgs, cfg), append(pc.parts, parts), append(pc.started, false)
	pc.nodes, pc.groups, pc.run = append(pc.nodes, nil), append(pc.groups, nil), append(pc.run, nil)
	pc.startNode(len(pc.cfgs) - 1)
	return raftAddr
}

// replaceMember with an --old id that is not a member (a typo) must fail
// before it adds anyone: otherwise it adds the new voter, "removes" the
// unknown id with a note and reports success, leaving the member that was
// meant to go (often a dead host) in a group of four voters.
func TestReplaceMemberUnknownOldRefusedBeforeAdding(t *testing.T) {
	pc := startRealCluster(t, nil)
	addr := addProcMember(t, pc, "n3")
	a, err := client.NewAdmin(client.NameServers(pc.nsAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	added, removed, err := a.ReplaceRaftMember(ctx, pc.cfgs[0].BrokerName, "n22", "n3", addr,
		client.RaftMemberOptions{CatchUpTimeout: 30 * time.Second})
	got := membersOf(t, pc.groups[pc.leader()])
	if err == nil || !strings.Contains(err.Error(), "n22") {
		t.Fatalf("replace of unknown member n22: added %+v, removed %+v, err %v; members %s", added, removed, err, got)
	}
	if strings.Contains(got, "n3") {
		t.Fatalf("replace of unknown member n22 failed (%v) but added n3: members %s", err, got)
	}
	t.Logf("refused: %v", err)

	// The right id replaces; a rerun after it completed passes too.
	for run := 0; run < 2; run++ {
		if _, _, err := a.ReplaceRaftMember(ctx, pc.cfgs[0].BrokerName, "n2", "n3", addr,
			client.RaftMemberOptions{CatchUpTimeout: 30 * time.Second}); err != nil {
			t.Fatalf("replace n2 by n3 (run %d): %v", run, err)
		}
	}
	if got := membersOf(t, pc.groups[pc.leader()]); got != "n0:Voter,n1:Voter,n3:Voter" {
		t.Fatalf("members after replacing n2 by n3: %s", got)
	}
}
