package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// A member added to the group is routed (it registers under its brokerId
// slot) as soon as it is in the configuration, before it has applied the
// group's consumer offsets; any follower may be that far behind. Asked
// for an offset it does not hold yet, it must not answer QUERY_NOT_FOUND:
// a consumer takes that for "this group never committed here" and starts
// where consumeFromWhere says (the queue's end by default), skipping every
// message between its committed offset and there. It names the leader
// instead, as for the other answers only a leader can give.
func TestNewMemberDoesNotDenyAnOffsetItHasNotApplied(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.createTopicOnLeader("OT", 1)
	ctx := context.Background()
	if err := pc.groups[l].UpdateSubscriptionGroup(ctx, wire.SubscriptionGroupConfig{GroupName: "OG", ConsumeEnable: true}); err != nil {
		t.Fatal(err)
	}
	raftAddr := addProcMember(t, pc, "n3")
	if _, err := pc.groups[l].AddMember(ctx, "n3", raftAddr, AddMemberOptions{Learner: true}); err != nil {
		t.Fatal(err)
	}
	n3 := len(pc.groups) - 1
	testutil.WaitFor(t, 15*time.Second, "n3 knows it is a member", func() bool {
		_, ok := pc.groups[n3].memberBrokerID("n3")
		return ok
	})
	// n3 stops receiving the log: it applies nothing the leader commits now.
	pc.net.SetPartitioned(raft.ServerAddress(raftAddr), true)
	query := map[string]string{"consumerGroup": "OG", "topic": "OT", "queueId": "0"}
	commit := map[string]string{"consumerGroup": "OG", "topic": "OT", "queueId": "0", "commitOffset": "5"}
	if r := pc.call(pc.nodes[l].Addr(), remoting.RequestUpdateConsumerOffset, commit, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	testutil.WaitFor(t, 15*time.Second, "the commit applied on a voter", func() bool {
		for i, g := range pc.groups[:3] {
			if i != l && g != nil && g.State().ConsumerOffsets()["OT@OG"][0] == 5 {
				return true
			}
		}
		return false
	})
	r := pc.call(pc.nodes[n3].Addr(), remoting.RequestQueryConsumerOffset, query, nil)
	if r.Code == remoting.ResponseQueryNotFound || (r.Code == remoting.ResponseSuccess && r.ExtFields["offset"] != "5") {
		t.Fatalf("n3, which has not applied the commit, answers %d %q (offset %q); want the leader named",
			r.Code, r.Remark, r.ExtFields["offset"])
	}
	if r.Code != remoting.ResponseServiceNotAvailable || r.ExtFields[wire.ExtLeaderAddr] != pc.nodes[l].Addr() {
		t.Fatalf("n3: %d %q %v, want SERVICE_NOT_AVAILABLE naming leader %s", r.Code, r.Remark, r.ExtFields, pc.nodes[l].Addr())
	}
	pc.net.SetPartitioned(raft.ServerAddress(raftAddr), false)
	testutil.WaitFor(t, 15*time.Second, "n3 answers the committed offset once it applied it", func() bool {
		r := pc.call(pc.nodes[n3].Addr(), remoting.RequestQueryConsumerOffset, query, nil)
		return r.Code == remoting.ResponseSuccess && r.ExtFields["offset"] == strconv.Itoa(5)
	})
}
