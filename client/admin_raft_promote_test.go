package client

import (
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// TestRaftGroupMergeCarriesCatchup: a member's row carries its own
// catch-up, and a learner's row the leader's wait to promote it, also
// when the learner did not answer.
func TestRaftGroupMergeCarriesCatchup(t *testing.T) {
	g := &RaftGroup{BrokerName: "broker-a", Statuses: map[string]*wire.RaftStatus{
		"n0": {SelfID: "n0", State: "Leader", Term: 3, RemotingAddr: "127.0.0.1:10911",
			Members:    []wire.RaftMember{{ID: "n0", Suffrage: "Voter"}, {ID: "n3", Suffrage: "Nonvoter"}, {ID: "n4", Suffrage: "Nonvoter"}},
			Promotions: []wire.PromotionStatus{{ID: "n3", Waiting: "catchup"}, {ID: "n4", Waiting: "status", Error: "unreachable"}}},
		"n3": {SelfID: "n3", State: "Follower", Term: 3, RemotingAddr: "127.0.0.1:10941",
			Catchup: &wire.CatchupStatus{Pending: true, Phase: "log", BytesTotal: 10, BytesDone: 4}},
	}}
	g.merge(nil, map[string]int64{"127.0.0.1:10911": 0, "127.0.0.1:10941": 2})
	rows := map[string]RaftGroupMember{}
	for _, m := range g.Members {
		rows[m.ID] = m
	}
	if m := rows["n3"]; m.Catchup == nil || !m.Catchup.Pending || m.Promotion == nil || m.Promotion.Waiting != "catchup" {
		t.Fatalf("n3 row %+v", m)
	}
	if m := rows["n4"]; m.Catchup != nil || m.Promotion == nil || m.Promotion.Waiting != "status" || m.Error == "" {
		t.Fatalf("n4 row %+v", m)
	}
	if m := rows["n0"]; m.Catchup != nil || m.Promotion != nil {
		t.Fatalf("n0 row %+v", m)
	}
}
