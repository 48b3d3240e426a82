package broker

import (
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestSubscriptionGroupDefaults: a subscription group body that leaves
// fields out gets RocketMQ's defaults for them (the Java broker decodes
// onto a new SubscriptionGroupConfig), not Go's zero values: 0 retries
// would dead-letter a message at its first failure and consumeEnable
// false would stop the group.
func TestSubscriptionGroupDefaults(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"PART","retryQueueNums":2}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup with a partial body: %d %s", r.Code, r.Remark)
	}
	got, ok := rep.State().SubscriptionGroup("PART")
	want := wire.DefaultSubscriptionGroupConfig("PART")
	want.RetryQueueNums = 2
	if !ok || got != want {
		t.Fatalf("stored group %+v (found %v); want %+v", got, ok, want)
	}
}
