package broker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// A learner removed (removeMember) while an addMember waits for its
// catch-up must not be promoted afterwards: the waiting add would put a
// member the operator just removed back into the group as a voter.
func TestGroupRemovedLearnerNotPromotedByWaitingAdd(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	l := c.leader()
	n3 := addTestNode(t, c, "n3", 3)
	addr, _ := n3.cfg.Raft.SelfAddr()
	var ready atomic.Bool
	l.g().setLearnerProbe(func(context.Context, string) (learnerStatus, error) {
		return learnerStatus{catchup: CatchupStatus{Pending: !ready.Load(), Phase: "log"}}, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := l.g().AddMember(context.Background(), "n3", addr, AddMemberOptions{MaxLag: 1 << 30, Timeout: 30 * time.Second})
		done <- err
	}()
	testutil.WaitFor(t, 15*time.Second, "the add waits for n3's catch-up", func() bool {
		for _, p := range l.g().Promotions() {
			if p.ID == "n3" && p.Waiting == "catchup" {
				return true
			}
		}
		return false
	})
	if _, err := l.g().RemoveMember(context.Background(), "n3", false); err != nil {
		t.Fatal(err)
	}
	ready.Store(true)
	var err error
	select {
	case err = <-done:
	case <-time.After(45 * time.Second):
		t.Fatal("the add did not return")
	}
	if got := membersOf(t, l.g()); strings.Contains(got, "n3") {
		t.Fatalf("n3 was removed during the add's wait, but the configuration is %s (add: %v)", got, err)
	}
	if err == nil {
		t.Fatal("the add of a member removed during its wait succeeded")
	}
	t.Logf("add: %v", err)
}
