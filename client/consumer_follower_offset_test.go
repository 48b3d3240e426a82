package client

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestQueueStartTrustsNoFollowerForMissingOffset: a queue starts while its
// group's leader is marked down, so that the committed offset is asked of
// a follower, which has not applied the group's first commit yet (a member
// restarted, replaying its log) and answers QUERY_NOT_FOUND. Taken as the
// group never having consumed the queue, ConsumeFromWhere (the queue's
// end) would skip what the group had not consumed; the queue must wait for
// the leader's answer, as RocketMQ's clients read offsets from the master
// only.
func TestQueueStartTrustsNoFollowerForMissingOffset(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	leader, follower := startQBroker(t, "broker-a"), startQBroker(t, "broker-a")
	topics := map[string]int{"T": 1, wire.RetryTopic("G"): 1}
	leader.register(t, ns, 0, topics)
	follower.register(t, ns, 1, topics)
	for i := range 5 {
		leader.put("T", 0, string(rune('0'+i)), nil)
		follower.put("T", 0, string(rune('0'+i)), nil)
	}
	leader.setOffset("G", "T", 0, 3)
	c := newTestPush(t, ns, "G", RebalanceInterval(time.Hour))
	var joined atomic.Bool // until then the group's list leaves this consumer out
	for _, b := range []*qBroker{leader, follower} {
		b.answer(remoting.RequestGetConsumerListByGroup, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
			ids := []string{"~other"}
			if joined.Load() {
				ids = []string{c.ClientID()}
			}
			resp := remoting.NewResponse(remoting.ResponseSuccess, "")
			resp.Body, _ = json.Marshal(wire.ConsumerListBody{ConsumerIDList: ids})
			return resp
		})
	}
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	c.core.routes.markDown("broker-a", leader.addr, time.Minute)
	if addr := c.core.routes.brokerAddr("broker-a"); addr != follower.addr {
		t.Fatalf("rig: the group is read from %s, want the follower %s", addr, follower.addr)
	}
	joined.Store(true)
	c.core.triggerRebalance()
	testutil.WaitFor(t, 5*time.Second, "the follower asked for the committed offset", func() bool {
		return follower.count(remoting.RequestQueryConsumerOffset) > 0
	})
	c.core.routes.markUp("broker-a", leader.addr)
	testutil.WaitFor(t, 5*time.Second, "messages 3 and 4 consumed", func() bool {
		b := got.bodies()
		return slices.Contains(b, "3") && slices.Contains(b, "4")
	})
}
