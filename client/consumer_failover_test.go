package client

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// stalledLeaderGroup starts broker-a as a stalled leader (it takes pulls
// and never answers them, as a SIGSTOPped or partitioned process whose
// connection stays up) and a follower that holds one message on T:0, and
// a push consumer with opts whose long polls are parked at the leader.
func stalledLeaderGroup(t *testing.T, opts ...ConsumerOpt) (leader, follower *qBroker, got *collector, reregister func()) {
	t.Helper()
	ns := startNameServer(t)
	leader = startQBroker(t, "broker-a")
	follower = startQBroker(t, "broker-a")
	topics := map[string]int{"T": 1, wire.RetryTopic("G"): 1}
	leader.register(t, ns, 0, topics)
	follower.register(t, ns, 1, topics)
	leader.answer(remoting.RequestPullMessage, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		<-leader.quit
		return remoting.NewResponse(remoting.ResponsePullNotFound, "")
	})
	follower.put("T", 0, "m0", nil)
	c := newTestPush(t, ns, "G", append([]ConsumerOpt{ConsumeFrom(ConsumeFromFirstOffset)}, opts...)...)
	got = collectAll(t, c, "T")
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "a long poll parked at the stalled leader", func() bool {
		for _, r := range leader.requests(remoting.RequestPullMessage) {
			if r.ExtFields["topic"] == "T" {
				return true
			}
		}
		return false
	})
	return leader, follower, got, func() { follower.register(t, ns, 0, topics) }
}

// TestPullMovesOffDeposedLeader: a long poll
// in flight to a leader that stalls is abandoned as soon as the route
// shows another leader, and the queue is read from the new one at once,
// not after the 30 s client-side poll timeout.
func TestPullMovesOffDeposedLeader(t *testing.T) {
	_, follower, got, failover := stalledLeaderGroup(t, LongPolling(20*time.Second, 30*time.Second), RouteRefreshInterval(50*time.Millisecond))
	start := time.Now()
	failover() // the follower takes over: the route shows it as master
	testutil.WaitFor(t, 5*time.Second, "m0 consumed from the new leader", func() bool { return slices.Contains(got.bodies(), "m0") })
	t.Logf("consumed %v after the route changed", time.Since(start))
	if follower.count(remoting.RequestPullMessage) == 0 {
		t.Fatal("the new leader got no pull")
	}
}

// TestPullTimeoutReadsAnotherMember: with no route change at all (the name
// server still lists the stalled leader), a long poll that gets no answer
// within its client-side timeout marks the member down, and the queue is
// read from a follower (raftmq followers serve pulls).
func TestPullTimeoutReadsAnotherMember(t *testing.T) {
	t.Parallel()
	_, follower, got, _ := stalledLeaderGroup(t, LongPolling(200*time.Millisecond, 400*time.Millisecond))
	testutil.WaitFor(t, 5*time.Second, "m0 consumed from the follower", func() bool { return slices.Contains(got.bodies(), "m0") })
	if follower.count(remoting.RequestPullMessage) == 0 {
		t.Fatal("the follower got no pull")
	}
}

// TestPullConnFailureReadsAnotherMemberAtOnce: the leader holding a long
// poll dies (its connection closes, its port refuses): the queue is read
// from the follower at once, not after PullBackoff.
func TestPullConnFailureReadsAnotherMemberAtOnce(t *testing.T) {
	leader, follower, got, _ := stalledLeaderGroup(t, PullBackoff(time.Minute))
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: connections close at once, like a killed process's
	go func() { _ = leader.srv.Shutdown(ctx) }()
	testutil.WaitFor(t, 10*time.Second, "m0 consumed from the follower", func() bool { return slices.Contains(got.bodies(), "m0") })
	t.Logf("consumed %v after the leader died", time.Since(start))
	if follower.count(remoting.RequestPullMessage) == 0 {
		t.Fatal("the follower got no pull")
	}
}

// TestLeaderNoticeMovesParkedPolls: a broker's notice that it now leads the
// group (NOTIFY_CONSUMER_IDS_CHANGED with leaderOf / leaderAddr) moves the
// long polls parked at a stalled old leader there at once, with no route
// change and no poll timeout.
func TestLeaderNoticeMovesParkedPolls(t *testing.T) {
	_, follower, got, _ := stalledLeaderGroup(t, LongPolling(20*time.Second, 30*time.Second))
	start := sendLeaderNotice(t, follower, "G")
	testutil.WaitFor(t, 5*time.Second, "m0 consumed from the new leader", func() bool { return slices.Contains(got.bodies(), "m0") })
	t.Logf("consumed %v after the notice", time.Since(start))
}

// sendLeaderNotice has b tell group's consumers that it now leads its
// broker group, once one of them has heartbeaten b; it returns when the
// notice went out.
func sendLeaderNotice(t *testing.T, b *qBroker, group string) time.Time {
	t.Helper()
	var conns []*remoting.Conn
	testutil.WaitFor(t, 5*time.Second, "the consumer's heartbeat at "+b.addr, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		conns = conns[:0]
		for _, m := range b.members[group] {
			conns = append(conns, m.conn)
		}
		return len(conns) > 0
	})
	start := time.Now()
	for _, c := range conns {
		req := remoting.NewRequest(remoting.RequestNotifyConsumerIDsChanged, &wire.ConsumerGroupRequestHeader{ConsumerGroup: group}, nil)
		req.ExtFields[wire.ExtLeaderOf] = b.name
		req.ExtFields[wire.ExtLeaderAddr] = b.addr
		req.Flag |= remoting.FlagOneway
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := c.InvokeOneway(ctx, req); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	return start
}

// TestQueueStartRetriedOnLeaderNotice: a queue whose start offset the
// leader failed to answer (as one killed mid-request does) starts as soon
// as a new leader announces itself, not at the rebalance retry (a second
// at least; here a minute, so only the notice can start it).
func TestQueueStartRetriedOnLeaderNotice(t *testing.T) {
	c, follower, got := failingLeaderGroup(t)
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "the queue's start failed at the leader", func() bool {
		c.core.mu.Lock()
		defer c.core.mu.Unlock()
		return len(c.core.unstarted) > 0
	})
	start := sendLeaderNotice(t, follower, "G")
	testutil.WaitFor(t, 5*time.Second, "m0 consumed from the new leader", func() bool { return slices.Contains(got.bodies(), "m0") })
	t.Logf("consumed %v after the notice", time.Since(start))
}

// TestRetryUnstartedWhileStartInFlight: a leader learned while a queue's
// start offset is still being read (a frozen old leader answers only at
// the request timeout) schedules a rebalance, so the queue is retried when
// that read fails; a group with nothing unstarted and no read in flight
// schedules none, and one retry clears what scheduled it.
func TestRetryUnstartedWhileStartInFlight(t *testing.T) {
	c := newConsumerCore(defaultConsumerConfig(), "test", queueHooks{})
	pending := func() bool {
		select {
		case <-c.rebalanceCh:
			return true
		default:
			return false
		}
	}
	c.retryUnstarted("a")
	if pending() {
		t.Fatal("a rebalance with nothing to retry")
	}
	c.starting["a"] = 1
	c.retryUnstarted("b")
	if pending() {
		t.Fatal("another group's read in flight scheduled a rebalance")
	}
	c.retryUnstarted("a")
	if !pending() {
		t.Fatal("no rebalance for a read in flight when the leader was learned")
	}
	delete(c.starting, "a")
	c.unstarted[MessageQueue{Topic: "T", BrokerName: "a"}] = true
	c.retryUnstarted("a")
	if !pending() {
		t.Fatal("no rebalance for a queue that could not start")
	}
	c.retryUnstarted("a")
	if pending() {
		t.Fatal("the retry did not clear the failed queue")
	}
}

// failingLeaderGroup starts broker-a's leader, which fails every
// start-offset query, a follower holding m0 on T:0, and a push consumer of
// T (not started) that only a rebalance trigger can make retry a queue.
func failingLeaderGroup(t *testing.T) (*PushConsumer, *qBroker, *collector) {
	t.Helper()
	ns := startNameServer(t)
	leader := startQBroker(t, "broker-a")
	follower := startQBroker(t, "broker-a")
	topics := map[string]int{"T": 1, wire.RetryTopic("G"): 1}
	leader.register(t, ns, 0, topics)
	follower.register(t, ns, 1, topics)
	leader.answer(remoting.RequestQueryConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "leader going down")
	})
	follower.put("T", 0, "m0", nil)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), RebalanceInterval(time.Minute))
	c.core.cfg.lockRetryDelay = time.Minute
	return c, follower, collectAll(t, c, "T")
}

// collectAll subscribes c to every message of topic and records them.
func collectAll(t *testing.T, c *PushConsumer, topic string) *collector {
	t.Helper()
	if err := c.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	got := &collector{}
	if err := c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		return ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestConsumerHeartbeatsNewMember: a member that joins the route after the
// consumer's first heartbeats (addMember, or back after it left the route)
// gets one as soon as the route shows it, not a heartbeat interval later:
// until then, leading the group, it would leave the consumer out of the
// group's consumer list. Only a change of members starts a round: the
// route refreshes in between send none.
func TestConsumerHeartbeatsNewMember(t *testing.T) {
	ns := startNameServer(t)
	first, joiner := startQBroker(t, "broker-a"), startQBroker(t, "broker-a")
	topics := map[string]int{"T": 1, wire.RetryTopic("G"): 1}
	first.register(t, ns, 0, topics)
	c := newTestPush(t, ns, "G", HeartbeatInterval(time.Hour), RouteRefreshInterval(20*time.Millisecond))
	collectAll(t, c, "T")
	startPush(t, c)
	if n := first.count(remoting.RequestHeartBeat); n != 1 {
		t.Fatalf("start sent %d heartbeats to the only member, want 1", n)
	}
	waitRouteFetchedAfter(t, c.core.routes, "T", time.Now().Add(100*time.Millisecond))
	if n := first.count(remoting.RequestHeartBeat); n != 1 {
		t.Fatalf("route refreshes with the same members sent heartbeats: %d in all, want 1", n)
	}
	joiner.register(t, ns, 1, topics)
	testutil.WaitFor(t, 5*time.Second, "a heartbeat to the member that joined (the interval is 1 h)", func() bool {
		return joiner.count(remoting.RequestHeartBeat) > 0
	})
}

// waitRouteFetchedAfter waits until routes fetched topic's route after at.
func waitRouteFetchedAfter(t *testing.T, routes *routeManager, topic string, at time.Time) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "a route of "+topic+" fetched after "+at.Format(time.StampMilli), func() bool {
		routes.mu.Lock()
		defer routes.mu.Unlock()
		tr := routes.topics[topic]
		return tr != nil && tr.fetchedAt.After(at)
	})
}

// TestPullFollowsLeaderAFollowerNames: a consumer whose route names a dead
// master reads from a follower; the follower's answer names the leader
// (which the route does not know yet), and the next pulls go there, not
// to the follower until the next route refresh (an hour here).
func TestPullFollowsLeaderAFollowerNames(t *testing.T) {
	ns := startNameServer(t)
	dead, follower, leader := startQBroker(t, "broker-a"), startQBroker(t, "broker-a"), startQBroker(t, "broker-a")
	topics := map[string]int{"T": 1, wire.RetryTopic("G"): 1}
	dead.register(t, ns, 0, topics)
	follower.register(t, ns, 1, topics)
	// Its server goes, its registration stays: the route still names it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := dead.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	follower.answer(remoting.RequestPullMessage, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		off, _ := strconv.ParseInt(req.ExtFields["queueOffset"], 10, 64)
		r := remoting.NewResponse(remoting.ResponsePullNotFound, "")
		r.EncodeHeader(&wire.PullMessageResponseHeader{NextBeginOffset: off, LeaderAddr: leader.addr})
		return r
	})
	leader.put("T", 0, "m0", nil)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), RouteRefreshInterval(time.Hour))
	got := collectAll(t, c, "T")
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "m0 from the leader the follower named", func() bool { return got.len() == 1 })
	// One pull per queue (T and the retry topic) reached the follower.
	if n := len(follower.requests(remoting.RequestPullMessage)); n > 2 {
		t.Fatalf("the follower got %d pulls, want at most 2", n)
	}
}

// TestFollowerHintIgnoredWhileLeaderMarked: a consumer reading from a
// follower because the leader's long poll timed out (a stalled leader,
// connection up) does not go back to that leader when the follower names
// it, in pull answers or in refusals of offset commits, once hints naming
// it are trusted again (1 s): the mark (3 s) says the leader failed us,
// and the follower may not see why.
func TestFollowerHintIgnoredWhileLeaderMarked(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	// Close's commit at cleanup waits out the group, whose leader stays
	// marked and whose follower keeps naming it: shorten that wait.
	leader, follower, _, _ := stalledLeaderGroup(t, LongPolling(200*time.Millisecond, 400*time.Millisecond),
		PersistInterval(20*time.Millisecond), WithClock(clk.now), LeaderFollowWait(500*time.Millisecond))
	follower.answer(remoting.RequestPullMessage, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		off, _ := strconv.ParseInt(req.ExtFields["queueOffset"], 10, 64)
		r := remoting.NewResponse(remoting.ResponsePullNotFound, "")
		r.EncodeHeader(&wire.PullMessageResponseHeader{NextBeginOffset: off, LeaderAddr: leader.addr})
		return r
	})
	follower.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		r := remoting.NewResponse(remoting.ResponseServiceNotAvailable, "not leader")
		r.ExtFields = map[string]string{wire.ExtLeaderAddr: leader.addr}
		return r
	})
	// Persist rounds run one after another and commit at most two queues
	// here (T and its retry topic), so once three commits have reached
	// the follower, a round that sent one to the leader before the mark
	// has been answered: the baseline below counts it.
	testutil.WaitFor(t, 5*time.Second, "a pull and two persist rounds at the follower (the leader's poll timed out)", func() bool {
		return follower.count(remoting.RequestPullMessage) > 0 && follower.count(remoting.RequestUpdateConsumerOffset) >= 3
	})
	clk.advance(2 * time.Second) // past the hint distrust, within the mark
	atLeader := leader.count(remoting.RequestPullMessage)
	commitsAtLeader := leader.count(remoting.RequestUpdateConsumerOffset)
	served := follower.count(remoting.RequestPullMessage)
	commits := follower.count(remoting.RequestUpdateConsumerOffset)
	testutil.WaitFor(t, 5*time.Second, "50 more pull answers and 5 more commit refusals naming the leader", func() bool {
		return follower.count(remoting.RequestPullMessage) >= served+50 &&
			follower.count(remoting.RequestUpdateConsumerOffset) >= commits+5
	})
	if n := leader.count(remoting.RequestPullMessage); n != atLeader {
		t.Fatalf("the consumer went back to the leader it marked down: %d pulls there, %d before", n, atLeader)
	}
	// Nor do the persist rounds' commits: a commit the leader took would
	// lift its mark and send the pulls back to wait there.
	if n := leader.count(remoting.RequestUpdateConsumerOffset); n != commitsAtLeader {
		t.Fatalf("persist rounds sent %d commits to the leader marked down", n-commitsAtLeader)
	}
}
