package main

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/wire"
)

// TestRaftStatusShowsRemovedMember: a member that still answers although
// the leader's configuration lacks it keeps its own state in #State, and
// its note says it was removed — not that it is a learner catching up or
// the preferred leader, which its stale configuration may still make it.
func TestRaftStatusShowsRemovedMember(t *testing.T) {
	g := &client.RaftGroup{BrokerName: "broker-a", LeaderID: "n0", PreferredLeaderID: "n2", Members: []client.RaftGroupMember{
		{ID: "n0", State: "Leader", Term: 5, RemotingAddr: "127.0.0.1:10911", Suffrage: "Voter", Lag: 0},
		{ID: "n1", State: "Follower", Term: 5, RemotingAddr: "127.0.0.1:10921", Suffrage: "Voter", Lag: 0},
		{ID: "n2", State: "Candidate", Term: 4, RemotingAddr: "127.0.0.1:10931", Suffrage: client.SuffrageRemoved, Lag: 12,
			LastContactMillis: -1, Catchup: &wire.CatchupStatus{Pending: true, Phase: "log"}},
	}}
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', 0)
	tableRaftStatus(w, []*client.RaftGroup{g})
	_ = w.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table:\n%s", buf.String())
	}
	row := lines[3]
	for _, want := range []string{"n2", "Candidate", "REMOVED", "not in the leader's configuration"} {
		if !strings.Contains(row, want) {
			t.Fatalf("removed member's row lacks %q:\n%s", want, buf.String())
		}
	}
	for _, not := range []string{"learner", "catching up", "preferred leader"} {
		if strings.Contains(row, not) {
			t.Fatalf("removed member's row says %q:\n%s", not, buf.String())
		}
	}
}
