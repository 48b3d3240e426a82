package main

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/raftmq/raftmq/broker"
)

// TestRaftStatusShowsFlushMode: raftStatus carries each member's
// acksBeforeFsync from RAFT_STATUS into its JSON rows and prints it in the
// #Acks column, loudly when a member acknowledges before fsync; a member
// that did not answer shows "-".
func TestRaftStatusShowsFlushMode(t *testing.T) {
	g := &groupStatus{BrokerName: "broker-a", statuses: map[string]*broker.RaftStatus{
		"n0": {SelfID: "n0", State: "Leader", Term: 3, RemotingAddr: "127.0.0.1:10911", AcksBeforeFsync: true,
			Members: []broker.RaftMember{{ID: "n0", Suffrage: "Voter"}, {ID: "n1", Suffrage: "Voter"}, {ID: "n2", Suffrage: "Voter"}}},
		"n1": {SelfID: "n1", State: "Follower", Term: 3, RemotingAddr: "127.0.0.1:10921"},
	}}
	g.merge(nil)
	want := map[string]bool{"n0": true, "n1": false, "n2": false}
	for _, m := range g.Members {
		if m.AcksBeforeFsync != want[m.ID] {
			t.Fatalf("member %s acksBeforeFsync %v", m.ID, m.AcksBeforeFsync)
		}
	}
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', 0)
	tableRaftStatus(w, []*groupStatus{g})
	_ = w.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "#Acks") {
		t.Fatalf("table:\n%s", buf.String())
	}
	for i, want := range []string{"BEFORE FSYNC", "after fsync", " - "} {
		if !strings.Contains(lines[i+1], want) {
			t.Fatalf("row %d lacks %q:\n%s", i+1, want, buf.String())
		}
	}
}
