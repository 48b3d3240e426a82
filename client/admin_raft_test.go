package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestPlanLeaderBalanceSpreadsHosts checks the host-spreading plan: two groups
// led from one host move one leader to a host that holds a member.
func TestPlanLeaderBalanceSpreadsHosts(t *testing.T) {
	mk := func(name, leader string, members map[string]string) *RaftGroup {
		g := &RaftGroup{BrokerName: name, LeaderID: leader, LeaderAddr: members[leader], Statuses: map[string]*wire.RaftStatus{}}
		for id, addr := range members {
			state := "Follower"
			if id == leader {
				state = "Leader"
			}
			g.Statuses[id] = &wire.RaftStatus{SelfID: id, RemotingAddr: addr, State: state}
		}
		return g
	}
	a := mk("broker-a", "a1", map[string]string{"a1": "10.0.0.1:10911", "a2": "10.0.0.2:10911", "a3": "10.0.0.3:10911"})
	b := mk("broker-b", "b1", map[string]string{"b1": "10.0.0.1:10921", "b2": "10.0.0.2:10921", "b3": "10.0.0.3:10921"})
	moves := PlanLeaderBalance([]*RaftGroup{a, b})
	if len(moves) != 1 || moves[0].BrokerName != "broker-a" || moves[0].To != "a2" {
		t.Fatalf("plan %+v, want broker-a moved to a2 (host 10.0.0.2)", moves)
	}
	// Already spread: nothing to do.
	b = mk("broker-b", "b2", map[string]string{"b1": "10.0.0.1:10921", "b2": "10.0.0.2:10921", "b3": "10.0.0.3:10921"})
	if moves := PlanLeaderBalance([]*RaftGroup{a, b}); len(moves) != 0 {
		t.Fatalf("balanced groups got plan %+v", moves)
	}
	// A group without a leader is reported, not moved.
	if moves := PlanLeaderBalance([]*RaftGroup{{BrokerName: "broker-c"}}); len(moves) != 1 || moves[0].Result != "skipped" {
		t.Fatalf("leaderless group plan %+v", moves)
	}
}

// TestRaftGroupMergeCarriesFlushModeAndLag: the merged rows carry each
// member's acksBeforeFsync and lag behind the leader; a configured member
// that did not answer is Unknown with an error, and a registered address
// that failed and names no member is its own Unreachable row.
func TestRaftGroupMergeCarriesFlushModeAndLag(t *testing.T) {
	g := &RaftGroup{BrokerName: "broker-a", Statuses: map[string]*wire.RaftStatus{
		"n0": {SelfID: "n0", State: "Leader", Term: 3, RemotingAddr: "127.0.0.1:10911", AcksBeforeFsync: true, LastLogIndex: 10,
			Members: []wire.RaftMember{{ID: "n0", Suffrage: "Voter"}, {ID: "n1", Suffrage: "Voter"}, {ID: "n2", Suffrage: "Voter"}}},
		"n1": {SelfID: "n1", State: "Follower", Term: 3, RemotingAddr: "127.0.0.1:10921", LastLogIndex: 7},
	}}
	g.merge([]RaftGroupMember{{RemotingAddr: "127.0.0.1:10941", BrokerID: 4, State: "Unreachable", Error: "refused", Lag: -1}},
		map[string]int64{"127.0.0.1:10911": 0, "127.0.0.1:10921": 2, "127.0.0.1:10941": 4})
	if g.LeaderID != "n0" || g.LeaderAddr != "127.0.0.1:10911" || g.Term != 3 {
		t.Fatalf("group %+v", g)
	}
	type want struct {
		acks     bool
		lag, bid int64
		state    string
	}
	wants := []want{{true, 0, 0, "Leader"}, {false, 3, 2, "Follower"}, {false, -1, -1, "Unknown"}, {false, -1, 4, "Unreachable"}}
	if len(g.Members) != len(wants) {
		t.Fatalf("members %+v", g.Members)
	}
	for i, w := range wants {
		m := g.Members[i]
		if m.AcksBeforeFsync != w.acks || m.Lag != w.lag || m.BrokerID != w.bid || m.State != w.state {
			t.Fatalf("member %d %+v, want %+v", i, m, w)
		}
	}
}

// TestRaftGroupMergeShowsADownMemberOnce: a member that does not answer
// while its registration lingers is one row: its Raft id from the
// configuration with the address, broker id and error of its registration.
// A follower's registration names its slot in the configuration (position
// + 1), a leader's (brokerId 0) the leader the others follow. A slot that
// names a member that answered (stale after a membership change) stays a
// row of its own.
func TestRaftGroupMergeShowsADownMemberOnce(t *testing.T) {
	conf := []wire.RaftMember{{ID: "n0", Suffrage: "Voter"}, {ID: "n1", Suffrage: "Voter"}, {ID: "n2", Suffrage: "Voter"}}
	down := func(addr string, bid int64) RaftGroupMember {
		return RaftGroupMember{RemotingAddr: addr, BrokerID: bid, State: "Unreachable", Error: "dial " + addr + ": refused",
			LastContactMillis: -1, Lag: -1}
	}
	rows := func(g *RaftGroup) []string {
		var out []string
		for _, m := range g.Members {
			out = append(out, fmt.Sprintf("%s %s %d %s", orNone(m.ID), orNone(m.RemotingAddr), m.BrokerID, m.State))
			if m.State == "Unreachable" && !strings.Contains(m.Error, m.RemotingAddr) {
				t.Errorf("row %+v does not carry its registration's error", m)
			}
		}
		return out
	}
	for _, c := range []struct {
		name     string
		statuses map[string]*wire.RaftStatus
		failed   []RaftGroupMember
		want     []string
	}{
		{"a follower down", map[string]*wire.RaftStatus{
			"n0": {SelfID: "n0", State: "Leader", LeaderID: "n0", Term: 3, RemotingAddr: "h:10911", Members: conf},
			"n1": {SelfID: "n1", State: "Follower", LeaderID: "n0", Term: 3, RemotingAddr: "h:10921", Members: conf},
		}, []RaftGroupMember{down("h:10931", 3)}, []string{"n0 h:10911 0 Leader", "n1 h:10921 2 Follower", "n2 h:10931 3 Unreachable"}},
		{"the leader down, no new one yet", map[string]*wire.RaftStatus{
			"n1": {SelfID: "n1", State: "Follower", LeaderID: "n0", Term: 3, RemotingAddr: "h:10921", Members: conf},
		}, []RaftGroupMember{down("h:10911", 0), down("h:10931", 3)},
			[]string{"n0 h:10911 0 Unreachable", "n1 h:10921 2 Follower", "n2 h:10931 3 Unreachable"}},
		{"a stale slot of a member that answered", map[string]*wire.RaftStatus{
			"n0": {SelfID: "n0", State: "Leader", LeaderID: "n0", Term: 3, RemotingAddr: "h:10911", Members: conf},
			"n1": {SelfID: "n1", State: "Follower", LeaderID: "n0", Term: 3, RemotingAddr: "h:10921", Members: conf},
		}, []RaftGroupMember{down("h:10941", 2)}, []string{"n0 h:10911 0 Leader", "n1 h:10921 2 Follower", "n2 - -1 Unknown", "- h:10941 2 Unreachable"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &RaftGroup{BrokerName: "broker-a", Statuses: c.statuses}
			registered := map[string]int64{"h:10911": 0, "h:10921": 2, "h:10931": 3}
			for _, f := range c.failed {
				registered[f.RemotingAddr] = f.BrokerID
			}
			g.merge(c.failed, registered)
			if got := rows(g); !slices.Equal(got, c.want) {
				t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// TestPlanLeaderBalancePreferredFirst: a preferred leader wins; otherwise leadership leaves a
// host that leads two more groups than another.
func TestPlanLeaderBalancePreferredFirst(t *testing.T) {
	g := func(name, leader, preferred string, members map[string]string) *RaftGroup {
		gv := &RaftGroup{BrokerName: name, LeaderID: leader, PreferredLeaderID: preferred, Statuses: map[string]*wire.RaftStatus{}}
		for id, addr := range members {
			st := "Follower"
			if id == leader {
				st, gv.LeaderAddr = "Leader", addr
			}
			gv.Statuses[id] = &wire.RaftStatus{SelfID: id, State: st, RemotingAddr: addr}
		}
		return gv
	}
	hosts := map[string]string{"n0": "10.0.0.1:10911", "n1": "10.0.0.2:10911", "n2": "10.0.0.3:10911"}
	moves := PlanLeaderBalance([]*RaftGroup{
		g("a", "n0", "n1", hosts),
		g("b", "n0", "", hosts),
		g("c", "n0", "", hosts),
		g("d", "", "", hosts),
	})
	want := []string{"a:n0->n1 preferredLeaderId", "b:n0->n2", "d:->skipped"}
	var got []string
	for _, m := range moves {
		s := m.BrokerName + ":" + m.From + "->" + m.To
		if m.Reason == "preferredLeaderId" {
			s += " preferredLeaderId"
		}
		if m.Result == "skipped" {
			s = m.BrokerName + ":->skipped"
		}
		got = append(got, s)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("plan %v, want %v (%+v)", got, want, moves)
	}
}

// TestPlanLeaderBalanceSkipsNonvoters: a nonvoter (a member being added)
// cannot take leadership, however idle its host; the plan moves a group
// whose idle-host member is a voter instead.
func TestPlanLeaderBalanceSkipsNonvoters(t *testing.T) {
	mk := func(name, leader string, addrs, suffrage map[string]string) *RaftGroup {
		g := &RaftGroup{BrokerName: name, LeaderID: leader, LeaderAddr: addrs[leader], Statuses: map[string]*wire.RaftStatus{}}
		for _, id := range []string{leader, name + "-2"} {
			state := "Follower"
			if id == leader {
				state = "Leader"
			}
			g.Statuses[id] = &wire.RaftStatus{SelfID: id, RemotingAddr: addrs[id], State: state}
			g.Members = append(g.Members, RaftGroupMember{ID: id, RemotingAddr: addrs[id], Suffrage: suffrage[id], State: state})
		}
		return g
	}
	a := mk("a", "a-1", map[string]string{"a-1": "10.0.0.1:10911", "a-2": "10.0.0.2:10911"},
		map[string]string{"a-1": "Voter", "a-2": "Nonvoter"})
	b := mk("b", "b-1", map[string]string{"b-1": "10.0.0.1:10921", "b-2": "10.0.0.2:10921"},
		map[string]string{"b-1": "Voter", "b-2": "Voter"})
	moves := PlanLeaderBalance([]*RaftGroup{a, b})
	if len(moves) != 1 || moves[0].BrokerName != "b" || moves[0].To != "b-2" {
		t.Fatalf("plan %+v, want only b moved to b-2 (a-2 is a nonvoter)", moves)
	}
	// A nonvoter preferred leader is reported, not moved to.
	a.PreferredLeaderID = "a-2"
	moves = PlanLeaderBalance([]*RaftGroup{a})
	if len(moves) != 1 || moves[0].Result != "skipped" {
		t.Fatalf("plan %+v, want the move to the nonvoter preferred leader skipped", moves)
	}
	// A preferred leader that is no member (replaced since) says so; one
	// that is a member but did not answer says that.
	for pref, want := range map[string]string{"a-9": "not a member", "a-3": "did not answer"} {
		a.PreferredLeaderID = pref
		if pref == "a-3" {
			a.Members = append(a.Members, RaftGroupMember{ID: "a-3", Suffrage: "Voter"})
		}
		moves = PlanLeaderBalance([]*RaftGroup{a})
		if len(moves) != 1 || moves[0].Result != "skipped" || !strings.Contains(moves[0].Reason, want) {
			t.Fatalf("preferred %s: plan %+v, want skipped with %q", pref, moves, want)
		}
	}
}

// TestRaftStatusFailedState: only an ACL refusal makes a member Refused;
// another error answer (a member shutting down) or no answer is
// Unreachable.
func TestRaftStatusFailedState(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&BrokerError{Addr: "a", Code: remoting.ResponseNoPermission, Remark: "no admin"}, "Refused"},
		{fmt.Errorf("raft status: %w", &BrokerError{Addr: "a", Code: remoting.ResponseNoPermission}), "Refused"},
		{&BrokerError{Addr: "a", Code: remoting.ResponseSystemError, Remark: "raft status: shutting down"}, "Unreachable"},
		{errors.New("dial tcp: connection refused"), "Unreachable"},
	} {
		if got := failedState(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestPlanLeaderBalanceSkipsMembersOutsideLeaderConfig: a removed member
// that still answers with its stale configuration (naming itself a voter)
// is no target, however idle its host: the leader's configuration decides.
func TestPlanLeaderBalanceSkipsMembersOutsideLeaderConfig(t *testing.T) {
	mk := func(name, host string) *RaftGroup {
		g := &RaftGroup{BrokerName: name, LeaderID: name + "1", LeaderAddr: "10.0.0.1:" + host, Statuses: map[string]*wire.RaftStatus{
			name + "1": {SelfID: name + "1", State: "Leader", RemotingAddr: "10.0.0.1:" + host, Members: voters(name+"1", name+"2")},
			name + "2": {SelfID: name + "2", State: "Follower", RemotingAddr: "10.0.0.1:1" + host, Members: voters(name+"1", name+"2")},
			// Removed while down: its own configuration still names it.
			name + "3": {SelfID: name + "3", State: "Follower", RemotingAddr: "10.0.0.3:" + host, Members: voters(name+"1", name+"2", name+"3")},
		}}
		g.merge(nil, map[string]int64{})
		return g
	}
	a, b := mk("a", "10911"), mk("b", "10921")
	if moves := PlanLeaderBalance([]*RaftGroup{a, b}); len(moves) != 0 {
		t.Fatalf("plan %+v moves leadership to a removed member", moves)
	}
	a.PreferredLeaderID = "a3"
	if moves := PlanLeaderBalance([]*RaftGroup{a}); len(moves) != 1 || moves[0].Result != "skipped" {
		t.Fatalf("plan %+v, want the removed preferred leader skipped", moves)
	}
}

// TestRaftGroupMergeMarksMembersOutsideLeaderConfig: a member removed
// while it was down answers with the stale configuration it kept, which
// names it a voter (and a member removed before it). Once a leader
// answered, its configuration decides: the stale member is a Removed row
// with its own state, left out of MemberIDs and the not-a-member error;
// the id only the stale configuration names is no row at all. Without a
// leader there is no configuration to trust more, and rows are the union.
func TestRaftGroupMergeMarksMembersOutsideLeaderConfig(t *testing.T) {
	live := append(voters("n0", "n1"), wire.RaftMember{ID: "n3", Suffrage: "Nonvoter"})
	statuses := func(withLeader bool) map[string]*wire.RaftStatus {
		sts := map[string]*wire.RaftStatus{
			"n1": {SelfID: "n1", State: "Follower", Term: 5, RemotingAddr: "127.0.0.1:10921", LastLogIndex: 40, Members: live},
			// Removed while down; n4 was removed before it went down.
			// Cut off, it campaigns at ever higher terms; it was the
			// preferred leader before its removal.
			"n2": {SelfID: "n2", State: "Candidate", Term: 9, RemotingAddr: "127.0.0.1:10931", LastLogIndex: 30,
				Members: voters("n0", "n1", "n2", "n4"), PreferredLeaderID: "n2"},
		}
		if withLeader {
			sts["n0"] = &wire.RaftStatus{SelfID: "n0", State: "Leader", Term: 5, RemotingAddr: "127.0.0.1:10911", LastLogIndex: 42, Members: live,
				PreferredLeaderID: "n1"}
		}
		return sts
	}
	registered := map[string]int64{"127.0.0.1:10911": 0, "127.0.0.1:10921": 1, "127.0.0.1:10931": 2}
	g := &RaftGroup{BrokerName: "broker-a", Statuses: statuses(true)}
	g.merge(nil, registered)
	var rows []string
	for _, m := range g.Members {
		rows = append(rows, fmt.Sprintf("%s %s %s %d", m.ID, m.Suffrage, m.State, m.BrokerID))
	}
	want := []string{"n0 Voter Leader 0", "n1 Voter Follower 1", "n2 Removed Candidate 2", "n3 Nonvoter Unknown -1"}
	if strings.Join(rows, ", ") != strings.Join(want, ", ") {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	if g.Term != 5 || g.PreferredLeaderID != "n1" {
		t.Fatalf("group term %d, preferred leader %q; want the leader's: 5, n1", g.Term, g.PreferredLeaderID)
	}
	if ids := strings.Join(g.MemberIDs(), ","); ids != "n0,n1,n3" {
		t.Fatalf("MemberIDs %s, want n0,n1,n3", ids)
	}
	_, err := (*Admin)(nil).TransferLeadership(context.Background(), g, "n2", time.Second)
	if !errors.Is(err, ErrNotMember) || strings.Contains(err.Error(), "n2 ") || strings.Contains(err.Error(), "n2]") {
		t.Fatalf("transfer to the removed member: %v, want ErrNotMember listing only n0 n1 n3", err)
	}

	// A leader without a preferred leader: the removed member's stale one
	// is not shown either.
	sts := statuses(true)
	sts["n0"].PreferredLeaderID = ""
	g = &RaftGroup{BrokerName: "broker-a", Statuses: sts}
	g.merge(nil, registered)
	if g.PreferredLeaderID != "" {
		t.Fatalf("preferred leader %q, want none (the leader names none)", g.PreferredLeaderID)
	}

	g = &RaftGroup{BrokerName: "broker-a", Statuses: statuses(false)}
	g.merge(nil, registered)
	if ids := strings.Join(g.MemberIDs(), ","); ids != "n0,n1,n2,n3,n4" || slices.ContainsFunc(g.Members, func(m RaftGroupMember) bool {
		return m.Suffrage == SuffrageRemoved
	}) {
		t.Fatalf("leaderless rows %+v, want the union of the configurations, none marked", g.Members)
	}
}

// voters is a Raft configuration of voting members with the given ids.
func voters(ids ...string) []wire.RaftMember {
	var ms []wire.RaftMember
	for _, id := range ids {
		ms = append(ms, wire.RaftMember{ID: id, Suffrage: "Voter"})
	}
	return ms
}
