package broker

import (
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

// TestFollowerPullOfGroupNotAppliedYet: with autoCreateSubscriptionGroup
// off, a follower that has not applied a group's creation yet (it lags,
// or replays its log after a restart) must not tell the group's consumers
// the group does not exist: as for a topic or queue it has not applied,
// only the leader may say so, and the pull is sent there.
func TestFollowerPullOfGroupNotAppliedYet(t *testing.T) {
	tc, rep := startFakeProc(t, func(c *BrokerConfig) { c.AutoCreateSubscriptionGroup = false })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "FG", 1)
	rep.setLeader(false, "127.0.0.1:1")
	r := tc.call(addr, remoting.RequestPullMessage, pullExt("FG-group", "FG", 0, 0, 0), nil)
	if r.Code != remoting.ResponseServiceNotAvailable {
		t.Fatalf("a follower's pull of a group it has not applied answered %d %q; want the not-leader answer", r.Code, r.Remark)
	}
}
