package client

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// nsProxy is a name server in front of a real one: it relays route
// lookups, or, while fail is set, answers them SYSTEM_ERROR (a name
// server that cannot answer for a while).
type nsProxy struct {
	addr    string
	fail    atomic.Bool
	failed  atomic.Int32 // lookups answered with the failure
	lookups atomic.Int32
}

func startNSProxy(t *testing.T, ns *namesrv.NameServer) *nsProxy {
	t.Helper()
	p := &nsProxy{}
	rc := remoting.NewClient(remoting.ClientConfig{}, nil)
	srv := remoting.NewServer(remoting.ServerConfig{}, nil)
	srv.Register(remoting.RequestGetRouteInfoByTopic, func(ctx context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		p.lookups.Add(1)
		if p.fail.Load() {
			p.failed.Add(1)
			return remoting.NewResponse(remoting.ResponseSystemError, "scripted name server failure"), nil
		}
		var h wire.GetRouteInfoRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			return nil, err
		}
		up, err := rc.InvokeSync(ctx, ns.Addr().String(), remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, &h, nil))
		if err != nil {
			return nil, err
		}
		resp := remoting.NewResponse(up.Code, up.Remark)
		resp.Body = up.Body
		return resp, nil
	}, 2, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	p.addr = srv.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = rc.Close()
	})
	return p
}

// unregister removes member id of b's group from ns (UNREGISTER_BROKER),
// as a broker that shuts down for good does.
func (b *qBroker) unregister(t *testing.T, ns *namesrv.NameServer, id int64) {
	t.Helper()
	h := &wire.UnregisterBrokerRequestHeader{Cluster: "C", BrokerAddr: b.addr, BrokerName: b.name, BrokerID: id}
	resp, err := b.nsClient.InvokeSync(context.Background(), ns.Addr().String(), remoting.NewRequest(remoting.RequestUnregisterBroker, h, nil))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("unregister %s: %v %v", b.name, err, resp)
	}
}

// offlineRig is a lite pull consumer (AutoCommit) of group HG reading T
// from broker-a and broker-b through a name server proxy. It consumed the
// 3 messages of each of the 4 queues, then "!other" joined and took
// broker-a's queues while broker-a refused offset commits: their offsets
// (3) are kept, and nothing else is pending.
type offlineRig struct {
	ns     *namesrv.NameServer
	proxy  *nsProxy
	ba, bb *qBroker
	l      *LitePullConsumer
	c      *consumerCore
}

func startOfflineRig(t *testing.T) *offlineRig {
	t.Helper()
	r := &offlineRig{ns: startNameServer(t)}
	r.proxy = startNSProxy(t, r.ns)
	r.ba, r.bb = startQBroker(t, "broker-a"), startQBroker(t, "broker-b")
	var split atomic.Bool
	for _, b := range []*qBroker{r.ba, r.bb} {
		fillHandOverBroker(t, r.ns, b)
		b.answer(remoting.RequestGetConsumerListByGroup, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
			ids := []string{r.c.clientID}
			if split.Load() {
				ids = append(ids, "!other") // sorts first: broker-a's queues are its share
			}
			resp := remoting.NewResponse(remoting.ResponseSuccess, "")
			resp.Body, _ = json.Marshal(wire.ConsumerListBody{ConsumerIDList: ids})
			return resp
		})
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, r.ns, "HG"), NameServers(r.proxy.addr),
		ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour), RebalanceInterval(time.Hour),
		RequestTimeout(time.Second), RouteRefreshInterval(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	r.l, r.c = l, l.core
	if err := l.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	pollN(t, l, 12)
	releasePolled(t, l)
	r.ba.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "scripted refusal")
	})
	split.Store(true)
	r.c.triggerRebalance()
	testutil.WaitFor(t, 10*time.Second, "broker-a's queues handed over", func() bool {
		if len(r.c.owned()) != 2 || r.c.owned()[0].BrokerName != "broker-b" || !r.c.rebalanceMu.TryLock() {
			return false
		}
		r.c.rebalanceMu.Unlock()
		return true
	})
	if kept := r.kept(); !slices.Equal(kept, []MessageQueue{{"T", "broker-a", 0}, {"T", "broker-a", 1}}) {
		t.Fatalf("rig: kept %v, want broker-a's 2 queues", kept)
	}
	return r
}

// kept lists the queues whose offset is pending, sorted.
func (r *offlineRig) kept() []MessageQueue {
	r.c.pendingMu.Lock()
	defer r.c.pendingMu.Unlock()
	out := make([]MessageQueue, 0, len(r.c.pending))
	for mq := range r.c.pending {
		out = append(out, mq)
	}
	SortQueues(out)
	return out
}

// leave shuts broker-a down for good: unregistered and stopped.
func (r *offlineRig) leave(t *testing.T) {
	t.Helper()
	r.ba.unregister(t, r.ns, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.ba.srv.Shutdown(ctx)
}

// TestHandOverOffsetDroppedWhenGroupLeaves: broker-a, holding the kept
// offsets of two queues handed over, leaves the cluster for good. Once the
// route refresh shows no route names it any more, the consumer forgets
// the group and drops those offsets (they can be committed nowhere);
// kept, every persist round would resend them and Close would wait the
// full leaderFollowWait on a group that is gone.
func TestHandOverOffsetDroppedWhenGroupLeaves(t *testing.T) {
	t.Parallel()
	r := startOfflineRig(t)
	r.leave(t)
	testutil.WaitFor(t, 5*time.Second, "T's route without broker-a", func() bool {
		return slices.Equal(r.c.topicBrokers("T"), []string{"broker-b"})
	})
	dropped := eventually(2*time.Second, func() bool { return len(r.kept()) == 0 })
	known := r.c.routes.brokerAddr("broker-a") != ""
	start := time.Now()
	err := r.l.Close(context.Background())
	took := time.Since(start)
	if !dropped || known {
		t.Errorf("after the routes stopped naming broker-a: kept %v, group still known %v", r.kept(), known)
	}
	if err != nil || took > 3*time.Second {
		t.Errorf("Close: %v after %v; want it to return promptly without waiting on the departed group", err, took.Round(time.Millisecond))
	}
	for qid := range 2 {
		if off, _ := r.bb.offset("HG", "T", qid); off != 3 {
			t.Errorf("broker-b's queue %d committed %d on Close, want 3", qid, off)
		}
	}
}

// TestHandOverOffsetKeptThroughFailedRouteLookup: while the name server
// cannot answer, broker-a leaves; the cached route still names it, so
// however many refresh rounds fail, the group and its kept offsets stay.
// Only a lookup that succeeds and no longer names it drops them.
func TestHandOverOffsetKeptThroughFailedRouteLookup(t *testing.T) {
	t.Parallel()
	r := startOfflineRig(t)
	r.proxy.fail.Store(true)
	r.leave(t)
	// The third failed lookup begins a third round: two ended, each
	// followed by the check for groups that left.
	testutil.WaitFor(t, 5*time.Second, "three failed route lookups", func() bool {
		return r.proxy.failed.Load() >= 3
	})
	if kept := r.kept(); len(kept) != 2 || r.c.routes.brokerAddr("broker-a") == "" {
		t.Fatalf("after failed route lookups: kept %v, broker-a known %v; want both kept",
			kept, r.c.routes.brokerAddr("broker-a") != "")
	}
	r.proxy.fail.Store(false)
	testutil.WaitFor(t, 5*time.Second, "kept offsets dropped once a lookup confirmed broker-a left", func() bool {
		return len(r.kept()) == 0 && r.c.routes.brokerAddr("broker-a") == ""
	})
}

// TestLiteCommitKeptThroughGroupAbsence: a lite pull Commit broker-a
// refused stays pending for its queue, still owned (Assign), while no
// route names broker-a long enough for the consumer to forget the group
// (its registration gone, as from a name server that restarted or took it
// for dead); once a route names it again, a persist round commits it.
// Only the offsets kept for queues handed over leave with their group.
func TestLiteCommitKeptThroughGroupAbsence(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	proxy := startNSProxy(t, ns)
	ba, bb := startQBroker(t, "broker-a"), startQBroker(t, "broker-b")
	fillHandOverBroker(t, ns, ba)
	fillHandOverBroker(t, ns, bb) // keeps T routed while broker-a is not
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "HG"), NameServers(proxy.addr), AutoCommit(false),
		ConsumeFrom(ConsumeFromFirstOffset), RequestTimeout(time.Second), RouteRefreshInterval(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	mq := MessageQueue{"T", "broker-a", 0}
	if err := l.Assign([]MessageQueue{mq}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	pollN(t, l, 3)
	ba.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "scripted refusal")
	})
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := l.Commit(cctx); err == nil {
		t.Fatal("Commit confirmed though broker-a refused it")
	}
	ba.unregister(t, ns, 0)
	testutil.WaitFor(t, 5*time.Second, "broker-a forgotten", func() bool { return l.core.routes.brokerAddr("broker-a") == "" })
	// A lookup after that one is the refresh loop's next: the round that
	// forgot broker-a is over.
	n := proxy.lookups.Load()
	testutil.WaitFor(t, 5*time.Second, "the round that forgot broker-a over", func() bool { return proxy.lookups.Load() > n })
	ba.answer(remoting.RequestUpdateConsumerOffset, nil)
	ba.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("HG"): 1})
	testutil.WaitFor(t, 5*time.Second, "the Commit's offset at broker-a once routed again", func() bool {
		off, _ := ba.offset("HG", "T", 0)
		return off == 3
	})
}

// TestHandOverCommittedToGroupMissingFromOneRound: broker-a, alive, is
// missing from one refresh round's route (its registration gone for a
// while: a name server that restarted and has not heard from it yet, a
// death claim it refutes). A rebalance then hands its queues over: their
// offsets must still reach broker-a, which a group forgotten on a single
// round's evidence would make impossible (no known member), and a later
// round would drop them for good, leaving the queues' next owner to
// consume those messages again. A group is forgotten only once two
// successive rounds show no route naming it.
func TestHandOverCommittedToGroupMissingFromOneRound(t *testing.T) {
	ns := startNameServer(t)
	ba, bb := startQBroker(t, "broker-a"), startQBroker(t, "broker-b")
	fillHandOverBroker(t, ns, ba)
	fillHandOverBroker(t, ns, bb)
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "HG"), ConsumeFrom(ConsumeFromFirstOffset),
		PersistInterval(time.Hour), RebalanceInterval(time.Hour), RouteRefreshInterval(time.Hour), RequestTimeout(time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	c := l.core
	pollN(t, l, 12)
	releasePolled(t, l)
	ba.unregister(t, ns, 0)
	// A round whose lookup shared one begun before the unregistration
	// still names broker-a, and counts for nothing.
	testutil.WaitFor(t, 5*time.Second, "a round without broker-a", func() bool {
		c.refreshRound()
		return slices.Equal(c.topicBrokers("T"), []string{"broker-b"})
	})
	c.triggerRebalance()
	testutil.WaitFor(t, 10*time.Second, "broker-a's queues handed over", func() bool {
		if len(c.owned()) != 2 || c.owned()[0].BrokerName != "broker-b" || !c.rebalanceMu.TryLock() {
			return false
		}
		c.rebalanceMu.Unlock()
		return true
	})
	for qid := range 2 {
		if off, _ := ba.offset("HG", "T", qid); off != 3 {
			t.Errorf("broker-a's queue %d: hand-over committed %d, want 3", qid, off)
		}
	}
	// The second round without broker-a forgets it.
	c.refreshRound()
	if addr := c.routes.brokerAddr("broker-a"); addr != "" {
		t.Errorf("broker-a missing from two rounds' routes still known at %s", addr)
	}
}

// TestOffsetSendTokenLeavesWithGroup: broker-a, whose offsets the
// consumer sent (the hand-over's and the rig's earlier commits), leaves
// the cluster for good. Once the consumer forgot the group, nothing of it
// stays in the table of the groups' send tokens, which would otherwise
// grow with every broker group ever seen.
func TestOffsetSendTokenLeavesWithGroup(t *testing.T) {
	t.Parallel()
	r := startOfflineRig(t)
	r.leave(t)
	testutil.WaitFor(t, 5*time.Second, "broker-a forgotten and its kept offsets dropped", func() bool {
		return r.c.routes.brokerAddr("broker-a") == "" && len(r.kept()) == 0
	})
	r.c.sendingMu.Lock()
	_, held := r.c.sending["broker-a"]
	r.c.sendingMu.Unlock()
	if held {
		t.Fatal("broker-a's offset send token is still in the table after the consumer forgot the group")
	}
}
