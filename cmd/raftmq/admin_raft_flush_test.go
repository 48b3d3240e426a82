package main

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/raftmq/raftmq/client"
)

// TestRaftStatusShowsFlushMode: raftStatus prints each member's
// acksBeforeFsync in the #Acks column, loudly when a member acknowledges
// before fsync; a member that did not answer shows "-".
func TestRaftStatusShowsFlushMode(t *testing.T) {
	g := &client.RaftGroup{BrokerName: "broker-a", Members: []client.RaftGroupMember{
		{ID: "n0", State: "Leader", Term: 3, RemotingAddr: "127.0.0.1:10911", Suffrage: "Voter", AcksBeforeFsync: true, LastContactMillis: -1, Lag: 0},
		{ID: "n1", State: "Follower", Term: 3, RemotingAddr: "127.0.0.1:10921", Suffrage: "Voter", LastContactMillis: -1, Lag: 0},
		{ID: "n2", State: "Unknown", Suffrage: "Voter", LastContactMillis: -1, Lag: -1, Error: "no answer"},
	}}
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', 0)
	tableRaftStatus(w, []*client.RaftGroup{g})
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
