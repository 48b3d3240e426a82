package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Calls bound to a group's leader ride out its election: the lite pull
// consumer's Commit here, the admin client's updates in
// admin_failover_test.go.

// polledLiteConsumer sends n messages to a new topic of ec and returns a
// lite pull consumer without AutoCommit that has polled all of them.
func polledLiteConsumer(t *testing.T, ec *devcluster.Cluster, topic string, n int, opts ...client.ConsumerOpt) (*client.Admin, *client.LitePullConsumer) {
	t.Helper()
	ctx := context.Background()
	admin := startFailoverTopic(t, ec, topic)
	p, err := client.NewProducer(client.NameServers(ec.NamesrvAddr()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for i := range n {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	opts = append([]client.ConsumerOpt{client.NameServers(ec.NamesrvAddr()), client.ConsumerGroup(topic + "-g"),
		client.ConsumeFrom(client.ConsumeFromFirstOffset), client.AutoCommit(false)}, opts...)
	lp, err := client.NewLitePullConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := lp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lp.Close(context.Background()) })
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for got := 0; got < n; {
		msgs, err := lp.Poll(pctx)
		if err != nil {
			t.Fatalf("poll after %d of %d: %v", got, n, err)
		}
		got += len(msgs)
	}
	return admin, lp
}

// waitCommitted waits until the group's committed offsets on topic add up
// to n, as the group's leader reports them.
func waitCommitted(t *testing.T, admin *client.Admin, group, topic string, n int64) {
	t.Helper()
	waitCommittedUnless(t, admin, group, topic, n, func() bool { return false })
}

// waitCommittedUnless is waitCommitted that stops waiting, and reports
// false, once excused says the offsets may never add up to n.
func waitCommittedUnless(t *testing.T, admin *client.Admin, group, topic string, n int64, excused func() bool) bool {
	t.Helper()
	var sum int64
	testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%s's committed offsets on %s add up to %d", group, topic, n), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		qs, err := admin.ConsumerProgress(ctx, group, topic)
		if err != nil {
			return excused()
		}
		sum = 0
		for _, q := range qs {
			sum += q.ConsumerOffset
		}
		return sum == n || excused()
	})
	return sum == n
}

// TestLiteCommitRidesOutLeaderKill: Commit right after the leader is
// killed waits for the new leader within its context and succeeds; the
// new leader has every offset.
func TestLiteCommitRidesOutLeaderKill(t *testing.T) {
	ec := sharedFailoverCluster(t)
	const n = 20
	admin, lp := polledLiteConsumer(t, ec, "LCK", n)
	ec.Kill(0, ec.Leader(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := lp.Commit(ctx); err != nil {
		t.Fatalf("commit during the election: %v", err)
	}
	waitCommitted(t, admin, "LCK-g", "LCK", n)
}

// TestLiteCommitKeptUntilALeaderTakesIt: a Commit whose context ends while
// the group has no quorum fails, but the offsets are kept and reach the
// group once it elects a leader again, with no further Commit.
func TestLiteCommitKeptUntilALeaderTakesIt(t *testing.T) {
	ec := sharedFailoverCluster(t)
	const n = 20
	admin, lp := polledLiteConsumer(t, ec, "LCQ", n, client.PersistInterval(100*time.Millisecond))
	l := ec.Leader(0)
	f := (l + 1) % 3
	ec.Kill(0, l)
	ec.Kill(0, f)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := lp.Commit(ctx)
	cancel()
	if err == nil {
		t.Fatal("commit without a quorum succeeded")
	}
	if err := ec.Restart(0, f); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, admin, "LCQ-g", "LCQ", n)
}

// shortFollowWait stands in for the client's 10 s wait for a new leader
// (LeaderFollowWait) in tests that wait it out without a deadline: long
// enough that a Commit giving up at once, or waiting it once per queue
// (four on the group), tells from one that waits it once; the bound of
// three waits leaves a loaded -race run a whole wait of slack.
const shortFollowWait = 2 * time.Second

// TestLiteCommitWaitsOnceWithoutDeadline: a Commit given a context without
// a deadline waits out a group that has no quorum for the client's wait
// for a new leader in all, not that long for each of the queues it owns
// there.
func TestLiteCommitWaitsOnceWithoutDeadline(t *testing.T) {
	ec := sharedFailoverCluster(t)
	_, lp := polledLiteConsumer(t, ec, "LCW", 20, client.LeaderFollowWait(shortFollowWait))
	l := ec.Leader(0)
	ec.Kill(0, l)
	ec.Kill(0, (l+1)%3)
	start := time.Now()
	err := lp.Commit(context.Background())
	took := time.Since(start)
	if err == nil {
		t.Fatal("commit without a quorum succeeded")
	}
	// The topic has four queues on the group: a wait for each would take
	// four times as long.
	if took < shortFollowWait || took > 3*shortFollowWait {
		t.Fatalf("commit without a deadline took %v, want about %v", took, shortFollowWait)
	}
}

// sharedTwoGroupCluster is a name server and two 3-member groups
// (broker-a, broker-b) on in-memory parts, shared by the tests that take
// broker-a's quorum away (see client.SharedFailoverCluster).
func sharedTwoGroupCluster(t *testing.T) *devcluster.Cluster {
	t.Helper()
	return client.SharedFailoverCluster(t, "two-groups", func(string) devcluster.Options {
		return devcluster.Options{InMemory: true, Groups: 2, Configure: func(_, _ int, cfg *broker.BrokerConfig) {
			cfg.ConsumerOffsetCommitCoalescer = 20 * time.Millisecond
		}}
	})
}

// TestLiteCommitOtherGroupsWhileOneHasNoQuorum: a Commit whose context
// ends while broker-a has no quorum still commits the queues of broker-b:
// a group that cannot answer does not use up the time of the others.
func TestLiteCommitOtherGroupsWhileOneHasNoQuorum(t *testing.T) {
	ec := sharedTwoGroupCluster(t)
	// No persist round while the test looks: only Commit sends. The
	// cleanup's Close waits out broker-a for the client's wait, shortened.
	_, lp := polledLiteConsumer(t, ec, "LCS", 40, client.PersistInterval(time.Hour), client.LeaderFollowWait(shortFollowWait))
	l := ec.Leader(0)
	ec.Kill(0, l)
	ec.Kill(0, (l+1)%3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := lp.Commit(ctx)
	cancel()
	if err == nil {
		t.Fatal("commit without broker-a's quorum succeeded")
	}
	if strings.Contains(err.Error(), "broker-b") {
		t.Fatalf("commit failed on broker-b, whose leader runs: %v", err)
	}
	b := ec.Member(1, ec.Leader(1)).Group
	testutil.WaitFor(t, 3*time.Second, "broker-b has LCS-g's offsets of every queue", func() bool {
		for q := range int32(4) {
			if off, ok := b.State().ConsumerOffset("LCS-g", "LCS", q); !ok || off <= 0 {
				return false
			}
		}
		return true
	})
}

// TestAdminOtherGroupsWhileOneHasNoQuorum: a cluster-wide update reaches
// every group whose leader runs although another group waits out its
// election for the whole ctx. The two updates run side by side, each
// with its own ctx, so the test waits that out once.
func TestAdminOtherGroupsWhileOneHasNoQuorum(t *testing.T) {
	ec := sharedTwoGroupCluster(t)
	admin := startFailoverTopic(t, ec, "AOG")
	l := ec.Leader(0)
	ec.Kill(0, l)
	ec.Kill(0, (l+1)%3)
	var groupErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, groupErr = admin.UpdateSubscriptionGroup(ctx, wire.SubscriptionGroupConfig{GroupName: "AOG-g2", ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 3}, "DefaultCluster", "")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "AOG2", ReadQueueNums: 2, WriteQueueNums: 2}, "DefaultCluster", "")
	cancel()
	wg.Wait()
	if err == nil {
		t.Fatal("create without broker-a's quorum succeeded")
	}
	if strings.Contains(err.Error(), "broker-b") {
		t.Fatalf("create failed on broker-b, whose leader runs: %v", err)
	}
	if _, ok := ec.Member(1, ec.Leader(1)).Group.State().Topic("AOG2"); !ok {
		t.Fatal("broker-b has no topic AOG2")
	}
	if groupErr == nil || strings.Contains(groupErr.Error(), "broker-b") {
		t.Fatalf("group update with broker-a down: %v, want broker-a's failure only", groupErr)
	}
}

// offsetRefusals is a remoting.RPCHook counting the not-leader answers to
// a lite pull consumer's offset requests (UPDATE_CONSUMER_OFFSET, or the
// QUERY_CONSUMER_OFFSET a hand-over's send asks first) for queues it did
// not own when the answer came.
type offsetRefusals struct {
	lp      *client.LitePullConsumer
	unowned atomic.Int64
}

// BeforeRequest implements remoting.RPCHook.
func (r *offsetRefusals) BeforeRequest(string, *remoting.RemotingCommand) {}

// AfterResponse implements remoting.RPCHook.
func (r *offsetRefusals) AfterResponse(_ string, req, resp *remoting.RemotingCommand) {
	if resp == nil || resp.Code != remoting.ResponseServiceNotAvailable {
		return
	}
	var mq client.MessageQueue
	switch req.Code {
	case remoting.RequestUpdateConsumerOffset:
		var h wire.UpdateConsumerOffsetRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			return
		}
		mq = client.MessageQueue{Topic: h.Topic, BrokerName: h.BrokerName, QueueID: int(h.QueueID)}
	case remoting.RequestQueryConsumerOffset:
		var h wire.QueryConsumerOffsetRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			return
		}
		mq = client.MessageQueue{Topic: h.Topic, BrokerName: h.BrokerName, QueueID: int(h.QueueID)}
	default:
		return
	}
	if !slices.Contains(r.lp.OwnedQueues(), mq) {
		r.unowned.Add(1)
	}
}

// TestLiteHandOverKeepsOffsetThroughElection: queues handed over (a second
// consumer joins) while their group has no quorum keep the offsets a
// Commit could not send; they reach the group once it elects again.
func TestLiteHandOverKeepsOffsetThroughElection(t *testing.T) {
	ec := sharedFailoverCluster(t)
	const n = 20
	admin, lp := polledLiteConsumer(t, ec, "LHO", n, client.PersistInterval(100*time.Millisecond), client.RebalanceInterval(100*time.Millisecond))
	l := ec.Leader(0)
	f := (l + 1) % 3
	ec.Kill(0, l)
	ec.Kill(0, f)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := lp.Commit(ctx)
	cancel()
	if err == nil {
		t.Fatal("commit without a quorum succeeded")
	}
	refusals := &offsetRefusals{lp: lp}
	client.LiteRemoting(lp).AddHook(refusals)
	other, err := client.NewLitePullConsumer(client.NameServers(ec.NamesrvAddr()), client.ConsumerGroup("LHO-g"), client.AutoCommit(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Subscribe("LHO", "*"); err != nil {
		t.Fatal(err)
	}
	if err := other.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	// The hand-over's commit was refused: the group cannot take it yet.
	testutil.WaitFor(t, 10*time.Second, "the offset of a queue handed over refused", func() bool {
		return len(lp.OwnedQueues()) == 2 && refusals.unowned.Load() > 0
	})
	if err := ec.Restart(0, f); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, admin, "LHO-g", "LHO", n)
}

// TestLiteCloseRidesOutElection: Close of a consumer whose Commit its
// group could not take (no quorum) waits within its context for the group
// to elect again, and commits the offsets there.
//
// The leader answers an offset commit once queued and replicates it within
// consumerOffsetCommitInterval (ADR 0004); a leader deposed before that
// drops it, and Close, which commits once (no persist round after it),
// never sends it again: the next owner re-consumes (at-least-once). Under
// load the member that took Close's commits can lose leadership right
// after (the restarted member, catching up, can miss its lease). So the
// offsets must add up to n unless a member stepped down after the group
// got its quorum back.
//
// It keeps a group of its own rather than share sharedFailoverCluster's:
// its elections are its own.
func TestLiteCloseRidesOutElection(t *testing.T) {
	ec := devcluster.MustStart(t, e2eOptions(true))
	const n = 20
	// No persist round: only Commit and Close send.
	admin, lp := polledLiteConsumer(t, ec, "LCE", n, client.PersistInterval(time.Hour))
	l := ec.Leader(0)
	f, s := (l+1)%3, (l+2)%3
	ec.Kill(0, l)
	ec.Kill(0, f)
	var stepDowns atomic.Int32
	stepDown := func(leader bool, _ uint64) {
		if !leader {
			stepDowns.Add(1)
		}
	}
	ec.Member(0, s).Group.OnRoleChange(stepDown)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := lp.Commit(ctx)
	cancel()
	if err == nil {
		t.Fatal("commit without a quorum succeeded")
	}
	watch := watchRefusals(client.LiteRemoting(lp), remoting.ResponseServiceNotAvailable)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- lp.Close(ctx) }()
	testutil.WaitFor(t, 10*time.Second, "Close's commit refused as not-leader", func() bool {
		select {
		case err := <-closed:
			t.Fatalf("Close returned while the group had no quorum: %v", err)
		default:
		}
		return watch.got(remoting.RequestUpdateConsumerOffset)
	})
	if err := ec.Restart(0, f); err != nil {
		t.Fatal(err)
	}
	// Before f can lead: an election and its barrier come first.
	ec.Member(0, f).Group.OnRoleChange(stepDown)
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	if !waitCommittedUnless(t, admin, "LCE-g", "LCE", n, func() bool { return stepDowns.Load() > 0 }) {
		t.Logf("a member stepped down after the group got its quorum back; Close's commits may have gone with its leadership")
	}
}

// TestLiteCloseWaitsBoundedWithoutDeadline: Close given a context without
// a deadline waits out a group without quorum for the client's wait for a
// new leader, then returns the commit's failure.
func TestLiteCloseWaitsBoundedWithoutDeadline(t *testing.T) {
	ec := sharedFailoverCluster(t)
	_, lp := polledLiteConsumer(t, ec, "LCB", 20, client.PersistInterval(time.Hour), client.LeaderFollowWait(shortFollowWait))
	l := ec.Leader(0)
	ec.Kill(0, l)
	ec.Kill(0, (l+1)%3)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_ = lp.Commit(ctx)
	cancel()
	start := time.Now()
	err := lp.Close(context.Background())
	took := time.Since(start)
	if err == nil {
		t.Fatal("close without a quorum committed")
	}
	if took < shortFollowWait || took > 3*shortFollowWait {
		t.Fatalf("close without a deadline took %v, want about %v", took, shortFollowWait)
	}
}
