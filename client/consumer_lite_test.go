package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func pollN(t *testing.T, l *LitePullConsumer, n int) []*MessageExt {
	t.Helper()
	var out []*MessageExt
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(out) < n {
		msgs, err := l.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, msgs...)
	}
	return out
}

// releasePolled has l, with AutoCommit, take what Poll returned as
// consumed, as its next Poll does; nothing may be waiting to be polled.
func releasePolled(t *testing.T, l *LitePullConsumer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if msgs, err := l.Poll(ctx); len(msgs) > 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("releasing Poll: %d messages, %v", len(msgs), err)
	}
}

func TestLitePullAssignPollCommitSeek(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2})
	for i := range 10 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), AutoCommit(false), ConsumeFrom(ConsumeFromFirstOffset), PullBatchSize(4))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Poll(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatal(err)
	}
	q0 := MessageQueue{"T", "broker-a", 0}
	if err := l.Assign([]MessageQueue{q0}); err != nil {
		t.Fatal(err)
	}
	if err := l.Subscribe("T", "*"); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Subscribe after Assign: %v", err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	msgs := pollN(t, l, 10)
	for i, m := range msgs {
		if string(m.Body) != fmt.Sprint(i) || m.QueueOffset != int64(i) {
			t.Fatalf("message %d: %v", i, m)
		}
	}
	// Nothing more: Poll ends with the context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := l.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("empty poll: %v", err)
	}
	cancel()
	if _, ok := b.offset("LG", "T", 0); ok {
		t.Fatal("committed without Commit (AutoCommit off)")
	}
	if err := l.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("LG", "T", 0); off != 10 {
		t.Fatalf("committed %d", off)
	}
	// Seek back: messages from offset 3 again.
	if err := l.Seek(context.Background(), q0, 3); err != nil {
		t.Fatal(err)
	}
	again := pollN(t, l, 7)
	if again[0].QueueOffset != 3 || again[6].QueueOffset != 9 {
		t.Fatalf("after seek: %v .. %v", again[0], again[len(again)-1])
	}
	if err := l.Seek(context.Background(), MessageQueue{"T", "broker-a", 1}, 0); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("seek on a queue not assigned: %v", err)
	}
	if err := l.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("LG", "T", 0); off != 10 {
		t.Fatalf("committed %d after re-reading", off)
	}
}

func TestLitePullSubscribeAutoCommitFromTimestamp(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 6 {
		b.putAt("T", 0, []byte(fmt.Sprint(i)), nil, base+int64(i)*1000, 0)
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), ConsumeFrom(ConsumeFromTimestamp),
		ConsumeTimestamp(time.UnixMilli(base+2500)))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	msgs := pollN(t, l, 3)
	if string(msgs[0].Body) != "3" {
		t.Fatalf("from timestamp: first message %q, want 3", msgs[0].Body)
	}
	if b.count(remoting.RequestSearchOffsetByTimestamp) == 0 {
		t.Fatal("no SEARCH_OFFSET_BY_TIMESTAMP")
	}
	releasePolled(t, l)
	testutil.WaitFor(t, 5*time.Second, "auto-commit", func() bool { off, _ := b.offset("LG", "T", 0); return off == 6 })
}

// TestConsumerFollowsLeader: the route names a member that is not the
// leader (answers 501 with leaderAddr); the consumer learns the leader
// from the answer and pulls, commits and lists the group there.
func TestConsumerFollowsLeader(t *testing.T) {
	ns := startNameServer(t)
	follower := startQBroker(t, "broker-a")
	leader := startQBroker(t, "broker-a")
	topics := map[string]int{"T": 1, wire.RetryTopic("G"): 1}
	follower.register(t, ns, 0, topics) // the stale route calls it master
	leader.register(t, ns, 1, topics)
	follower.setNotLeader(leader.addr)
	leader.put("T", 0, "x", nil)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset))
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "message from the leader", func() bool { return got.len() == 1 })
	testutil.WaitFor(t, 5*time.Second, "offset committed at the leader", func() bool { off, _ := leader.offset("G", "T", 0); return off == 1 })
	if follower.count(remoting.RequestGetConsumerListByGroup) == 0 || leader.count(remoting.RequestGetConsumerListByGroup) == 0 {
		t.Fatal("consumer list did not go follower → leader")
	}
}

func TestPushConsumerFlowControl(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 100 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	release := make(chan struct{})
	var got collector
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), PullThresholdForQueue(10), PullBatchSize(5), ConsumeGoroutines(1))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(func(ctx context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ConsumeSuccess
	})
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "listener blocked", func() bool { return got.len() == 1 })
	// Pulls stop once more than 10 messages are cached: 15 at most.
	testutil.WaitFor(t, 5*time.Second, "flow control", func() bool {
		c.core.mu.Lock()
		defer c.core.mu.Unlock()
		for _, pq := range c.core.pqs {
			if pq.mq.Topic == "T" {
				n, _, _ := pq.stats()
				return n > 10
			}
		}
		return false
	})
	c.core.mu.Lock()
	for _, pq := range c.core.pqs {
		if n, _, _ := pq.stats(); pq.mq.Topic == "T" && n > 15 {
			t.Errorf("cached %d messages with threshold 10", n)
		}
	}
	c.core.mu.Unlock()
	close(release)
	testutil.WaitFor(t, 5*time.Second, "all 100", func() bool { return got.len() == 100 })
}

// TestLitePullCloseWithoutCommitKeepsUncommitted polls a message with
// AutoCommit off and closes without Commit: the queue's next long poll
// finds nothing new, which must not move the offset Close commits past
// the message the application never committed (a restart redelivers it).
func TestLitePullCloseWithoutCommitKeepsUncommitted(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	b.put("T", 0, "m0", nil)
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), AutoCommit(false), ConsumeFrom(ConsumeFromFirstOffset),
		LongPolling(20*time.Millisecond, time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	q0 := MessageQueue{"T", "broker-a", 0}
	if err := l.Assign([]MessageQueue{q0}); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	if msgs := pollN(t, l, 1); string(msgs[0].Body) != "m0" {
		t.Fatalf("polled %v", msgs)
	}
	// The second pull at offset 1 is sent after the first one's NOT_FOUND
	// answer was handled.
	testutil.WaitFor(t, 5*time.Second, "two empty pulls at offset 1", func() bool {
		n := 0
		for _, r := range b.requests(remoting.RequestPullMessage) {
			var h wire.PullMessageRequestHeader
			if err := r.DecodeHeader(&h); err == nil && h.QueueOffset == 1 {
				n++
			}
		}
		return n >= 2
	})
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off, ok := b.offset("LG", "T", 0); ok && off > 0 {
		t.Fatalf("Close committed offset %d past a message never committed", off)
	}
}

// TestLitePullStartAgainAfterFailedStart retries Start after it failed to
// find an assigned queue's start offset: the second Start must give a
// consumer that consumes, or fail, not a silent one.
func TestLitePullStartAgainAfterFailedStart(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	b.put("T", 0, "m0", nil)
	b.answer(remoting.RequestQueryConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "scripted failure")
	})
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), ConsumeFrom(ConsumeFromFirstOffset))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Assign([]MessageQueue{{"T", "broker-a", 0}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded without the queue's offset")
	}
	b.answer(remoting.RequestQueryConsumerOffset, nil)
	if err := l.Start(context.Background()); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	if msgs := pollN(t, l, 1); string(msgs[0].Body) != "m0" {
		t.Fatalf("polled %v", msgs)
	}
}

// TestLitePullStartAgainAfterStartTimedOut: a Start whose ctx runs out
// while it reads an assigned queue's start offset fails, and a Start with a
// fresh ctx must then give a consumer that consumes, not ErrClosed.
func TestLitePullStartAgainAfterStartTimedOut(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	b.put("T", 0, "m0", nil)
	gate := make(chan struct{})
	asked := make(chan struct{}, 1)
	b.answer(remoting.RequestQueryConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-gate
		return remoting.NewResponse(remoting.ResponseSystemError, "too late")
	})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), ConsumeFrom(ConsumeFromFirstOffset))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Assign([]MessageQueue{{"T", "broker-a", 0}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-asked; cancel() }() // the ctx runs out mid-read
	if err := l.Start(ctx); err == nil {
		t.Fatal("Start succeeded without the queue's offset")
	}
	b.answer(remoting.RequestQueryConsumerOffset, nil)
	close(gate)
	if err := l.Start(context.Background()); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	if msgs := pollN(t, l, 1); string(msgs[0].Body) != "m0" {
		t.Fatalf("polled %v", msgs)
	}
}

// TestLitePullPersistKeepsCommitOfQueueTakenMeanwhile: a persist round
// that began before the consumer took a queue leaves a Commit on that
// queue pending (the broker refused it: its group elects), and the offset
// reaches the broker once it answers again.
func TestLitePullPersistKeepsCommitOfQueueTakenMeanwhile(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2})
	for q := range 2 {
		for i := range 3 {
			b.put("T", q, fmt.Sprint(i), nil)
		}
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), AutoCommit(false), ConsumeFrom(ConsumeFromFirstOffset),
		RebalanceInterval(time.Hour))...)
	if err != nil {
		t.Fatal(err)
	}
	// The group has another consumer, which sorts after l (and so holds
	// queue 1), until alone is set.
	var alone atomic.Bool
	b.answer(remoting.RequestGetConsumerListByGroup, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		ids := []string{l.ClientID()}
		if !alone.Load() {
			ids = append(ids, "~other")
		}
		r := remoting.NewResponse(remoting.ResponseSuccess, "")
		r.Body, _ = json.Marshal(wire.ConsumerListBody{ConsumerIDList: ids})
		return r
	})
	var armed atomic.Bool
	began, resume := make(chan struct{}), make(chan struct{})
	l.core.beforePersist = func() {
		if armed.CompareAndSwap(true, false) {
			close(began)
			<-resume
		}
	}
	if err := l.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	var resumeOnce sync.Once
	t.Cleanup(func() { resumeOnce.Do(func() { close(resume) }) })
	q0, q1 := MessageQueue{"T", "broker-a", 0}, MessageQueue{"T", "broker-a", 1}
	testutil.WaitFor(t, 5*time.Second, "the consumer owns queue 0", func() bool { return slices.Equal(l.OwnedQueues(), []MessageQueue{q0}) })
	armed.Store(true)
	<-began
	alone.Store(true)
	l.core.triggerRebalance()
	testutil.WaitFor(t, 5*time.Second, "the consumer owns both queues", func() bool { return slices.Equal(l.OwnedQueues(), []MessageQueue{q0, q1}) })
	pollN(t, l, 6)
	b.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark(""))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = l.Commit(ctx)
	cancel()
	if err == nil {
		t.Fatal("commit the broker refused succeeded")
	}
	b.answer(remoting.RequestUpdateConsumerOffset, nil)
	resumeOnce.Do(func() { close(resume) })
	testutil.WaitFor(t, 5*time.Second, "both queues' offsets committed", func() bool {
		off0, _ := b.offset("LG", "T", 0)
		off1, _ := b.offset("LG", "T", 1)
		return off0 == 3 && off1 == 3
	})
}

// TestLitePullCommitNotOvertakenByPersistRound: a persist round still
// sending an older offset (its request held at the broker) is not
// overtaken by a Commit of a newer one: brokers keep the last offset
// they are sent, so the older one landing last would undo the Commit.
func TestLitePullCommitNotOvertakenByPersistRound(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	for i := range 6 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), AutoCommit(false), ConsumeFrom(ConsumeFromFirstOffset),
		PullBatchSize(3), PullThresholdForQueue(1))...)
	if err != nil {
		t.Fatal(err)
	}
	q0 := MessageQueue{"T", "broker-a", 0}
	if err := l.Assign([]MessageQueue{q0}); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	if msgs := pollN(t, l, 3); msgs[len(msgs)-1].QueueOffset != 2 {
		t.Fatalf("first poll ended at offset %d", msgs[len(msgs)-1].QueueOffset)
	}
	// The group elects: the Commit of offset 3 stays pending.
	b.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark(""))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = l.Commit(ctx)
	cancel()
	if err == nil {
		t.Fatal("commit the broker refused succeeded")
	}
	// The next persist round's request is held at the broker, then applied.
	held, release, applied := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	var first atomic.Bool
	b.answer(remoting.RequestUpdateConsumerOffset, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if !first.CompareAndSwap(false, true) {
			return b.other(nil, req)
		}
		close(held)
		<-release
		defer close(applied)
		return b.other(nil, req)
	})
	<-held
	if msgs := pollN(t, l, 3); msgs[len(msgs)-1].QueueOffset != 5 {
		t.Fatalf("second poll ended at offset %d", msgs[len(msgs)-1].QueueOffset)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	_ = l.Commit(ctx) // either way the offset is kept until a broker takes it
	cancel()
	releaseOnce.Do(func() { close(release) })
	<-applied
	testutil.WaitFor(t, 5*time.Second, "offset 6 committed", func() bool {
		off, _ := b.offset("LG", "T", 0)
		return off == 6
	})
}

// TestLiteSeekCommitsNothing: Seek moves where Poll reads, not the
// committed offset (RocketMQ's seek leaves the offset store alone): with
// AutoCommit off, a Close after a Seek and no Commit commits what the
// last Commit did, not the sought offset (forwards, that would skip
// messages never polled).
func TestLiteSeekCommitsNothing(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	for range 10 {
		b.put("T", 0, "m", nil)
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), AutoCommit(false), ConsumeFrom(ConsumeFromFirstOffset), PullBatchSize(2))...)
	if err != nil {
		t.Fatal(err)
	}
	q0 := MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 0}
	if err := l.Assign([]MessageQueue{q0}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pollN(t, l, 2)
	if err := l.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Seek(ctx, q0, 8); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("LG", "T", 0); off != 2 {
		t.Fatalf("Close after a Seek to 8 and no Commit committed %d, want the committed 2", off)
	}
}

// TestLitePullCommitAfterResetByBroker: a broker relays a reset to 1 of a
// queue whose messages up to 3 were polled and committed. The reset
// commits 1; a Commit before anything was polled since must not send the
// offset polled before the reset (3) over it, as a Seek would not.
func TestLitePullCommitAfterResetByBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, l, conn := startPolledLiteForReset(ctx, t, AutoCommit(false))
	if err := l.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := resetQueueToOne(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("LG", "T", 0); off != 1 {
		t.Fatalf("committed offset after the reset to 1: %d", off)
	}
	if err := l.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("LG", "T", 0); off != 1 {
		t.Fatalf("committed offset after a Commit with nothing polled since the reset to 1: %d", off)
	}
}

// TestLitePullResetNotUndoneByPollInProgress: a broker relays a reset to 1
// of a queue (AutoCommit) while a Poll of a batch pulled before it is in
// its critical section (consumedMu held, the queue not yet dropped when it
// looked), about to store the offset after that batch (3). The reset must
// store and commit 1 after that Poll, not before: the stored 3 would be
// what it commits, and what every persist round and Close send.
func TestLitePullResetNotUndoneByPollInProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, l, conn := startPolledLiteForReset(ctx, t)
	mq := MessageQueue{"T", "broker-a", 0}
	l.consumedMu.Lock() // a Poll in progress, which saw the queue not dropped
	locked := true
	defer func() {
		if locked { // the test failed holding it: let the consumer close
			l.consumedMu.Unlock()
		}
	}()
	reset := make(chan error, 1)
	go func() { reset <- resetQueueToOne(ctx, conn) }()
	testutil.WaitFor(t, 5*time.Second, "the reset waiting for the Poll", func() bool {
		return strings.Contains(allStacks(), "(*LitePullConsumer).sought(")
	})
	l.core.store.Update(mq, 3, false) // the Poll's AutoCommit store
	locked = false
	l.consumedMu.Unlock()
	if err := <-reset; err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("LG", "T", 0); off != 1 {
		t.Errorf("the reset to 1 committed %d", off)
	}
	if off, err := l.Committed(ctx, mq); err != nil || off != 1 {
		t.Errorf("stored offset after the reset to 1: %d %v", off, err)
	}
}

// TestLitePullStartFailingBesideResetReturns: a lite pull consumer's
// Start (Assign) started broker-a's queue and cannot find where broker-b's
// starts, while broker-a relays a reset of its queue. The failed Start
// closes the core, which waits for the client's request handlers; the
// reset among them must not wait in turn for what Start holds.
func TestLitePullStartFailingBesideResetReturns(t *testing.T) {
	ns := startNameServer(t)
	ba, bb := startQBroker(t, "broker-a"), startQBroker(t, "broker-b")
	ba.register(t, ns, 0, map[string]int{"T": 1})
	bb.register(t, ns, 0, map[string]int{"T": 1})
	ba.put("T", 0, "0", nil)
	release := make(chan struct{})
	bb.answer(remoting.RequestQueryConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		<-release
		return remoting.NewResponse(remoting.ResponseSystemError, "scripted failure")
	})
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), ConsumeFrom(ConsumeFromFirstOffset),
		RequestTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Assign([]MessageQueue{{"T", "broker-a", 0}, {"T", "broker-b", 0}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- l.Start(ctx) }()
	var conn *remoting.Conn
	testutil.WaitFor(t, 5*time.Second, "broker-a's queue started and the consumer's heartbeat at broker-a", func() bool {
		ba.mu.Lock()
		conn = ba.members["LG"][l.ClientID()].conn
		ba.mu.Unlock()
		return conn != nil && len(bb.requests(remoting.RequestQueryConsumerOffset)) > 0
	})
	reset := make(chan error, 1)
	go func() {
		req := remoting.NewRequest(remoting.RequestResetConsumerClientOffset, &wire.ResetOffsetRequestHeader{Topic: "T", Group: "LG", Timestamp: 1, IsForce: true},
			[]byte(`{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:0}}`))
		_, err := conn.InvokeSync(ctx, req)
		reset <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "the reset waiting for Start's queues", func() bool {
		for _, g := range sdkGoroutines() {
			if strings.Contains(g, "(*consumerCore).resetOffsets(") {
				return true
			}
		}
		return false
	})
	close(release)
	select {
	case err := <-started:
		if err == nil {
			t.Fatal("Start succeeded without broker-b's start offset")
		}
	case <-time.After(8 * time.Second):
		t.Fatal("Start did not return: its close waits for the reset's handler, which waits for Start")
	}
	<-reset
}

// startPolledLiteForReset starts a lite pull consumer of group LG (with
// opts) assigned broker-a's one queue of T, which holds three messages,
// polls them, and returns the broker, the consumer and the connection its
// heartbeat registered, over which the broker relays resets.
func startPolledLiteForReset(ctx context.Context, t *testing.T, opts ...ConsumerOpt) (*qBroker, *LitePullConsumer, *remoting.Conn) {
	t.Helper()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	for i := range 3 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	b.mu.Lock()
	b.noPullCommit = true
	b.mu.Unlock()
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), append(opts, ConsumeFrom(ConsumeFromFirstOffset),
		PersistInterval(time.Hour))...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Assign([]MessageQueue{{"T", "broker-a", 0}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	pollN(t, l, 3)
	var conn *remoting.Conn
	testutil.WaitFor(t, 5*time.Second, "the consumer's heartbeat", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		conn = b.members["LG"][l.ClientID()].conn
		return conn != nil
	})
	return b, l, conn
}

// resetQueueToOne relays, as a broker does, a reset of group LG's queue
// broker-a/T/0 to offset 1.
func resetQueueToOne(ctx context.Context, conn *remoting.Conn) error {
	req := remoting.NewRequest(remoting.RequestResetConsumerClientOffset, &wire.ResetOffsetRequestHeader{Topic: "T", Group: "LG", Timestamp: 1, IsForce: true},
		[]byte(`{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:1}}`))
	resp, err := conn.InvokeSync(ctx, req)
	if err == nil && resp.Code != remoting.ResponseSuccess {
		err = fmt.Errorf("reset answered %d %s", resp.Code, resp.Remark)
	}
	return err
}

// TestLiteOffsetIllegalNotCommittedWithoutAutoCommit: a lite pull consumer
// with AutoCommit off starts at a committed offset beyond its queue; the
// broker answers OFFSET_ILLEGAL and the consumer pulls on from the queue's
// end. As in RocketMQ's DefaultLitePullConsumerImpl, that moves only where
// it pulls: the application owns commits, so the broker's committed offset
// and Committed stay until a Commit after Poll returned messages.
func TestLiteOffsetIllegalNotCommittedWithoutAutoCommit(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	b.setOffset("LG", "T", 0, 50) // beyond the queue: the broker answers PULL_OFFSET_MOVED
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), AutoCommit(false))...)
	if err != nil {
		t.Fatal(err)
	}
	q0 := MessageQueue{"T", "broker-a", 0}
	if err := l.Assign([]MessageQueue{q0}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	testutil.WaitFor(t, 5*time.Second, "a pull from the queue's end", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return slices.ContainsFunc(b.pulls, func(h wire.PullMessageRequestHeader) bool { return h.QueueOffset == 5 })
	})
	off, _ := b.offset("LG", "T", 0)
	stored, err := l.Committed(ctx, q0)
	if off != 50 || b.count(remoting.RequestUpdateConsumerOffset) != 0 || err != nil || stored != 50 {
		t.Fatalf("after OFFSET_ILLEGAL without Commit: broker's committed offset %d (%d commits), Committed %d (%v); want 50, none, 50",
			off, b.count(remoting.RequestUpdateConsumerOffset), stored, err)
	}
	b.put("T", 0, "next", nil)
	if msgs := pollN(t, l, 1); string(msgs[0].Body) != "next" || msgs[0].QueueOffset != 5 {
		t.Fatalf("polled %v", msgs[0])
	}
	if err := l.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if off, _ := b.offset("LG", "T", 0); off != 6 {
		t.Fatalf("committed %d after polling offset 5, want 6", off)
	}
}

// TestLitePullAutoCommitWaitsForTheNextPoll: with AutoCommit, a batch Poll
// returned is in the application's hands until it polls again; a persist
// round meanwhile must not commit past it, or a crash while it is being
// processed loses it. The next Poll releases it (RocketMQ's
// DefaultLitePullConsumer commits in poll what the polls before returned).
func TestLitePullAutoCommitWaitsForTheNextPoll(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	for range 4 {
		b.put("T", 0, "m", nil)
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LG"), ConsumeFrom(ConsumeFromFirstOffset))...)
	if err != nil {
		t.Fatal(err)
	}
	var rounds atomic.Int64
	l.core.beforePersist = func() { rounds.Add(1) }
	if err := l.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	if msgs := pollN(t, l, 4); len(msgs) != 4 {
		t.Fatalf("polled %d messages, want 4", len(msgs))
	}
	// A round that begins after Poll returned has ended once the next begins.
	after := rounds.Load()
	testutil.WaitFor(t, 5*time.Second, "a whole persist round after Poll", func() bool { return rounds.Load() >= after+2 })
	if off, _ := b.offset("LG", "T", 0); off != 0 {
		t.Fatalf("committed %d while the application still held the batch up to 3, want 0", off)
	}
	releasePolled(t, l)
	testutil.WaitFor(t, 5*time.Second, "the next Poll's release committed", func() bool { off, _ := b.offset("LG", "T", 0); return off == 4 })
}
