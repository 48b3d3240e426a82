package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestAdminRidesOutLeaderKill: topic and subscription-group updates and a
// topic deletion sent right after the group's leader is killed (the name
// server still routes it) wait for the new leader within their context
// and succeed there.
func TestAdminRidesOutLeaderKill(t *testing.T) {
	ec := sharedFailoverCluster(t)
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
		_, err := admin.UpdateSubscriptionGroup(ctx, sg, "DefaultCluster", "")
		errs <- err
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

// refusals is a remoting.RPCHook that records which request codes got an
// answer with code refused.
type refusals struct {
	refused int16
	mu      sync.Mutex
	codes   map[int16]bool // guarded by mu
}

func watchRefusals(rc *remoting.Client, refused int16) *refusals {
	r := &refusals{refused: refused, codes: map[int16]bool{}}
	rc.AddHook(r)
	return r
}

// BeforeRequest implements remoting.RPCHook.
func (r *refusals) BeforeRequest(string, *remoting.RemotingCommand) {}

// AfterResponse implements remoting.RPCHook.
func (r *refusals) AfterResponse(_ string, req, resp *remoting.RemotingCommand) {
	if resp != nil && resp.Code == r.refused {
		r.mu.Lock()
		r.codes[req.Code] = true
		r.mu.Unlock()
	}
}

// got reports whether every one of codes got a refusal.
func (r *refusals) got(codes ...int16) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range codes {
		if !r.codes[c] {
			return false
		}
	}
	return true
}

// TestAdminAddressCallsRideOutElection: calls naming a broker address
// (BrokerRequest, and CreateTopic and UpdateSubscriptionGroup given one)
// sent to the last member of a group that lost its leader and quorum are
// refused as not-leader, wait out the election, and reach the leader the
// group elects once a member comes back. A request any member answers
// (BrokerConfig) is answered by the named member meanwhile.
func TestAdminAddressCallsRideOutElection(t *testing.T) {
	ec := sharedFailoverCluster(t)
	admin := startFailoverTopic(t, ec, "AEOld")
	l := ec.Leader(0)
	f, s := (l+1)%3, (l+2)%3
	ec.Kill(0, l)
	ec.Kill(0, f)
	addr := ec.Member(0, s).Addr()
	watch := watchRefusals(client.AdminRemoting(admin), remoting.ResponseServiceNotAvailable)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 3)
	go func() {
		_, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "AENew", ReadQueueNums: 2, WriteQueueNums: 2}, "", addr)
		errs <- err
	}()
	go func() {
		sg := wire.DefaultSubscriptionGroupConfig("AEGroup")
		sg.RetryMaxTimes = 3
		_, err := admin.UpdateSubscriptionGroup(ctx, sg, "", addr)
		errs <- err
	}()
	go func() {
		_, err := admin.BrokerRequest(ctx, addr, remoting.RequestDeleteTopicInBroker, &wire.TopicRequestHeader{Topic: "AEOld"}, nil)
		errs <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "every call refused as not-leader by "+addr, func() bool {
		select {
		case err := <-errs:
			t.Fatalf("a call naming %s gave up while its group elects: %v", addr, err)
		default:
		}
		return watch.got(remoting.RequestUpdateAndCreateTopic, remoting.RequestUpdateAndCreateSubscriptionGroup, remoting.RequestDeleteTopicInBroker)
	})
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	kv, err := admin.BrokerConfig(cctx, addr)
	ccancel()
	if err != nil {
		t.Fatalf("broker config of %s while its group elects: %v", addr, err)
	}
	if _, port, _ := strings.Cut(addr, ":"); kv["listenPort"] != port {
		t.Fatalf("broker config asked of %s came from listenPort %q", addr, kv["listenPort"])
	}
	if err := ec.Restart(0, f); err != nil {
		t.Fatal(err)
	}
	var all []error
	for range 3 {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatalf("calls naming %s: %v", addr, err)
	}
	nl := ec.Leader(0)
	if nl != s && nl != f {
		t.Fatalf("leader %d, want %d or %d", nl, s, f)
	}
	st := ec.Member(0, nl).Group.State()
	if tc, ok := st.Topic("AENew"); !ok || tc.WriteQueueNums != 2 {
		t.Fatalf("leader's AENew: %+v %v", tc, ok)
	}
	if sg, ok := st.SubscriptionGroup("AEGroup"); !ok || sg.RetryMaxTimes != 3 {
		t.Fatalf("leader's AEGroup: %+v %v", sg, ok)
	}
	if _, ok := st.Topic("AEOld"); ok {
		t.Fatal("AEOld still exists on the leader")
	}
}
