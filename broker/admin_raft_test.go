package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestRaftAdminWithoutRaft: a Replica that is not a RaftAdmin (the fake
// single-node replica) answers both codes with REQUEST_CODE_NOT_SUPPORTED.
func TestRaftAdminWithoutRaft(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	for _, code := range []int16{remoting.RequestRaftStatus, remoting.RequestLeadershipTransfer} {
		if r := tc.call(addr, code, nil, nil); r.Code != remoting.ResponseRequestCodeNotSupported {
			t.Fatalf("code %d on a fake replica answered %d %q", code, r.Code, r.Remark)
		}
	}
}

// raftStatusOf asks node i for RAFT_STATUS.
func (pc *procCluster) raftStatusOf(i int) RaftStatus {
	pc.t.Helper()
	r := pc.call(pc.nodes[i].Addr(), remoting.RequestRaftStatus, nil, nil)
	if r.Code != remoting.ResponseSuccess {
		pc.t.Fatalf("RAFT_STATUS on node %d: %d %q", i, r.Code, r.Remark)
	}
	var st RaftStatus
	if err := json.Unmarshal(r.Body, &st); err != nil {
		pc.t.Fatalf("RAFT_STATUS body of node %d: %v", i, err)
	}
	return st
}

// TestRaftAdminStatusAndTransfer runs both processors on a real 3-node
// group: every member reports the same leader and configuration; a
// follower refuses a transfer naming the leader; the leader refuses bad
// targets and moves leadership to a named follower, answering with the
// new leader's id and remoting address.
func TestRaftAdminStatusAndTransfer(t *testing.T) {
	pc := startRealCluster(t, withProdRaftTimings)
	l := pc.leader()
	testutil.WaitFor(t, 10*time.Second, "every member applied the leader's announce", func() bool {
		for i := range pc.nodes {
			st := pc.raftStatusOf(i)
			if st.LeaderAddr != pc.nodes[l].Addr() || st.AppliedIndex < st.CommitIndex {
				return false
			}
		}
		return true
	})
	leaderID := pc.groups[l].SelfID()
	for i := range pc.nodes {
		st := pc.raftStatusOf(i)
		wantState := "Follower"
		if i == l {
			wantState = "Leader"
		}
		if st.SelfID != pc.cfgs[i].Raft.DLegerSelfID || st.State != wantState || st.Serving != (i == l) ||
			st.LeaderID != leaderID || st.Term == 0 || st.LastLogIndex == 0 || len(st.Members) != 3 || st.Stats["state"] != wantState {
			t.Fatalf("node %d status %+v", i, st)
		}
		if i == l && st.LastContactMillis != 0 || i != l && (st.LastContactMillis < 0 || st.LastContactMillis > 5000) {
			t.Fatalf("node %d last contact %d ms", i, st.LastContactMillis)
		}
	}

	f := (l + 1) % 3
	target := pc.groups[f].SelfID()
	r := pc.call(pc.nodes[(l+2)%3].Addr(), remoting.RequestLeadershipTransfer, map[string]string{"targetId": target}, nil)
	if r.Code != remoting.ResponseServiceNotAvailable || r.ExtFields[wire.ExtLeaderAddr] != pc.nodes[l].Addr() {
		t.Fatalf("transfer asked of a follower: %d %q %v", r.Code, r.Remark, r.ExtFields)
	}
	for _, bad := range []string{leaderID, "nobody"} {
		if r := pc.call(pc.nodes[l].Addr(), remoting.RequestLeadershipTransfer, map[string]string{"targetId": bad}, nil); r.Code != remoting.ResponseInvalidParameter {
			t.Fatalf("transfer to %q: %d %q", bad, r.Code, r.Remark)
		}
	}

	r = pc.call(pc.nodes[l].Addr(), remoting.RequestLeadershipTransfer, map[string]string{"targetId": target}, nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("transfer to %s: %d %q", target, r.Code, r.Remark)
	}
	var res LeadershipTransferResult
	if err := json.Unmarshal(r.Body, &res); err != nil {
		t.Fatal(err)
	}
	if res.FromID != leaderID || res.NewLeaderID != target || res.NewLeaderAddr != pc.nodes[f].Addr() || res.Term == 0 {
		t.Fatalf("transfer answer %+v, want %s at %s", res, target, pc.nodes[f].Addr())
	}
	testutil.WaitFor(t, 5*time.Second, "the target serves as leader", func() bool { return pc.groups[f].IsLeader() })
	if st := pc.raftStatusOf(f); st.State != "Leader" || !st.Serving {
		t.Fatalf("new leader's status %+v", st)
	}
	t.Logf("transfer %s -> %s answered in %d ms", res.FromID, res.NewLeaderID, res.TookMillis)
}
