package main

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/wire"
)

// TestRaftStatusShowsCatchup: raftStatus says when a learner is catching
// up and how much is left, that a voter catching up does not stand for
// election, and what the leader's promotion of a learner waits for.
func TestRaftStatusShowsCatchup(t *testing.T) {
	g := &client.RaftGroup{BrokerName: "broker-a", Members: []client.RaftGroupMember{
		{ID: "n0", State: "Leader", Suffrage: "Voter", LastContactMillis: -1},
		{ID: "n1", State: "Follower", Suffrage: "Voter", LastContactMillis: -1,
			Catchup: &wire.CatchupStatus{Pending: true, Phase: "queues"}},
		{ID: "n3", State: "Follower", Suffrage: "Nonvoter", LastContactMillis: -1,
			Catchup:   &wire.CatchupStatus{Pending: true, Phase: "log", BytesDone: 500e6, BytesTotal: 2000e6, PaceBytesPerSecond: 12 << 20},
			Promotion: &wire.PromotionStatus{ID: "n3", Waiting: "catchup"}},
		{ID: "n4", State: "Follower", Suffrage: "Nonvoter", LastContactMillis: -1,
			Promotion: &wire.PromotionStatus{ID: "n4", Waiting: "log", Lag: 400}},
	}}
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', 0)
	tableRaftStatus(w, []*client.RaftGroup{g})
	_ = w.Flush()
	out := buf.String()
	for _, want := range []string{
		"catching up: queues; does not stand for election",
		"learner, catching up: 1500.0 MB left at 12.0 MiB/s; not promoted until done",
		"learner, promotion waits for its log: 400 entries behind",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
}
