package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

// TestResetOffsetUnknownGroup: a reset (INVOKE_BROKER_TO_RESET_OFFSET,
// mqadmin resetOffsetByTime / skipAccumulatedMessage) for a group the
// broker neither has a config for nor has connected consumers of is
// refused, as RocketMQ refuses it (SUBSCRIPTION_GROUP_NOT_EXIST in its
// server-side reset, "consumer group not exist" otherwise), and commits
// nothing: a mistyped group name in an incident must not answer success
// with a table of offsets while the real group stays where it was.
func TestResetOffsetUnknownGroup(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "RU", 2)
	for _, q := range []string{"-1", "0"} {
		r := tc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
			"topic": "RU", "group": "NoSuchGroup", "timestamp": "0", "isForce": "true", "queueId": q, "offset": "-1"}, nil)
		if r.Code != remoting.ResponseSubscriptionGroupNotExist || !strings.Contains(r.Remark, "NoSuchGroup") {
			t.Fatalf("reset (queueId %s) of a group never configured or connected: %d %q; want SUBSCRIPTION_GROUP_NOT_EXIST naming it",
				q, r.Code, r.Remark)
		}
	}
	for q := range int32(2) {
		if off, ok := rep.State().ConsumerOffset("NoSuchGroup", "RU", q); ok {
			t.Fatalf("refused reset left offset %d on queue %d", off, q)
		}
	}
	// A configured group without consumers is reset (RocketMQ's mqadmin
	// falls back to committing the offsets itself).
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"RUG"}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "RU", "group": "RUG", "timestamp": "0", "isForce": "true", "queueId": "-1", "offset": "-1"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("reset of a configured group: %d %s", r.Code, r.Remark)
	}
}
