package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/wire"
)

// TestAdminRidesOutLeaderKill: topic and subscription-group updates and a
// topic deletion sent right after the group's leader is killed (the name
// server still routes it) wait for the new leader within their context
// and succeed there.
func TestAdminRidesOutLeaderKill(t *testing.T) {
	ec := startE2ECluster(t)
	admin := startFailoverTopic(t, ec, "AKOld")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := ec.Leader(0)
	ec.Kill(0, l)
	errs := make(chan error, 3)
	go func() {
		_, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "AKNew", ReadQueueNums: 2, WriteQueueNums: 2}, "DefaultCluster", "")
		errs <- err
	}()
	go func() {
		sg := wire.DefaultSubscriptionGroupConfig("AKGroup")
		sg.RetryMaxTimes = 3
		errs <- admin.UpdateSubscriptionGroup(ctx, sg, "DefaultCluster", "")
	}()
	go func() { errs <- admin.DeleteTopic(ctx, "AKOld", "DefaultCluster") }()
	var all []error
	for range 3 {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatalf("admin calls during the election: %v", err)
	}
	nl := ec.Leader(0)
	if nl < 0 || nl == l {
		t.Fatalf("leader %d after the kill of %d", nl, l)
	}
	st := ec.Member(0, nl).Group.State()
	if tc, ok := st.Topic("AKNew"); !ok || tc.WriteQueueNums != 2 {
		t.Fatalf("new leader's AKNew: %+v %v", tc, ok)
	}
	if sg, ok := st.SubscriptionGroup("AKGroup"); !ok || sg.RetryMaxTimes != 3 {
		t.Fatalf("new leader's AKGroup: %+v %v", sg, ok)
	}
	if _, ok := st.Topic("AKOld"); ok {
		t.Fatal("AKOld still exists on the new leader")
	}
}
