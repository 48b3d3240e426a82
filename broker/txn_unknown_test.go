package broker

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// offlineController builds a Controller over rep that is never started: no
// listener, no registration, no background service. A test drives its
// processors or services itself, beside the node that serves rep.
func offlineController(t *testing.T, cfg BrokerConfig, rep Replica) *Controller {
	t.Helper()
	c, err := New(cfg, rep, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c
}

// lateEnds is a leader's Group whose first END_TRANSACTION writes (as
// many as timeouts says) report a timeout though they were applied: a Raft
// write whose wait ran out while its entry still committed.
type lateEnds struct {
	*Group
	timeouts atomic.Int32
}

func (g *lateEnds) EndTransaction(ctx context.Context, half int64, commit bool, msgs []*store.Message) (bool, error) {
	applied, err := g.Group.EndTransaction(ctx, half, commit, msgs)
	if err == nil && g.timeouts.Add(-1) >= 0 {
		return false, fmt.Errorf("%w after 5s", ErrApplyTimeout)
	}
	return applied, err
}

// OnRoleChange keeps the offline controller's callbacks off the real group.
func (g *lateEnds) OnRoleChange(func(bool, uint64)) {}

// TestEndTransactionOutcomeUnknown: an END_TRANSACTION whose replication
// timed out is answered SYSTEM_BUSY, saying the outcome is unknown, not
// SYSTEM_ERROR, which the SDK reports as a refusal: here the commit did
// take effect, and a user told it was refused would take the message for
// never delivered. Asking again is answered success and stores nothing
// twice.
func TestEndTransactionOutcomeUnknown(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXU", 1)
	half := sendHalf(t, pc, addr, "TXU", "maybe-committed", "U1")

	g := &lateEnds{Group: pc.groups[l]}
	g.timeouts.Store(1)
	c := offlineController(t, pc.cfgs[l], g)
	end := func() *remoting.RemotingCommand {
		t.Helper()
		req := remoting.NewRequest(remoting.RequestEndTransaction, nil, nil)
		req.ExtFields = endExt(half, wire.SysFlagTransCommit, false)
		r, err := c.processEndTransaction(context.Background(), nil, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := end(); r.Code != remoting.ResponseSystemBusy || !strings.Contains(r.Remark, "outcome unknown") {
		t.Fatalf("END_TRANSACTION whose replication timed out: code %d %q; want SYSTEM_BUSY saying the outcome is unknown", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXU", 1, map[string]int{"maybe-committed": 1})
	if r := end(); r.Code != remoting.ResponseSuccess {
		t.Fatalf("END_TRANSACTION asked again: code %d %q", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXU", 1, map[string]int{"maybe-committed": 1})
}
