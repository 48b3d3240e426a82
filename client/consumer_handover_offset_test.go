package client

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// handOverRig is a consumer of group "HG" that consumed the 3 messages of
// each of T's two queues while the broker refused every offset commit,
// then handed queue 1 over to another member, "~other", with that commit
// refused too. The refusals are SYSTEM_ERROR, which no call waits out (an
// election's would hold the hand-over for the request timeout); elect
// makes them an election's, accept ends them.
type handOverRig struct {
	b     *qBroker
	core  *consumerCore
	push  *PushConsumer
	close func(context.Context) error
	alone atomic.Bool // the group has no other member
	// shared counts the member lists the broker answered with the other
	// member in them.
	shared atomic.Int32
}

var (
	hoQ0 = MessageQueue{"T", "broker-a", 0}
	hoQ1 = MessageQueue{"T", "broker-a", 1}
)

// handOverKinds are the consumers a hand-over commits for: push
// (concurrent, orderly), and lite pull with AutoCommit or with Commit.
var handOverKinds = []string{"concurrent", "orderly", "lite", "liteCommit"}

// startHandOverBroker starts a name server and broker-a with topic T (two
// queues holding messages 0..2 each) and group HG's retry topic. Only
// UPDATE_CONSUMER_OFFSET commits: the push consumer's pulls carry its
// offsets too, which would commit queue 1's at a time of their own.
func startHandOverBroker(t *testing.T) (*namesrv.NameServer, *qBroker) {
	t.Helper()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	fillHandOverBroker(t, ns, b)
	return ns, b
}

// fillHandOverBroker registers b with ns and fills it as
// startHandOverBroker describes.
func fillHandOverBroker(t *testing.T, ns *namesrv.NameServer, b *qBroker) {
	t.Helper()
	b.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("HG"): 1})
	for q := range 2 {
		for range 3 {
			b.put("T", q, "m", nil)
		}
	}
	b.mu.Lock()
	b.noPullCommit = true
	b.mu.Unlock()
}

// answerMembers makes b list the group's consumers as the one whose id
// self returns, and, while alone is false, "~other", which sorts after it
// and so takes queue 1; shared, when set, counts those answers.
func answerMembers(b *qBroker, self func() string, alone *atomic.Bool, shared *atomic.Int32) {
	b.answer(remoting.RequestGetConsumerListByGroup, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		ids := []string{self()}
		if !alone.Load() {
			ids = append(ids, "~other")
			if shared != nil {
				shared.Add(1)
			}
		}
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		resp.Body, _ = json.Marshal(wire.ConsumerListBody{ConsumerIDList: ids})
		return resp
	})
}

// opts are added to the consumer's options.
func startHandOverRig(t *testing.T, kind string, opts ...ConsumerOpt) *handOverRig {
	t.Helper()
	ns, b := startHandOverBroker(t)
	r := &handOverRig{b: b}
	r.refuse(remoting.ResponseSystemError, "scripted refusal")
	// Only the hand-over and the test send offsets: no persist round runs.
	opts = append(append(fastConsumerOpts(t, ns, "HG"), ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour),
		RebalanceInterval(time.Hour)), opts...)
	var lite *LitePullConsumer
	switch kind {
	case "concurrent", "orderly":
		p, err := NewPushConsumer(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Subscribe("T", "*"); err != nil {
			t.Fatal(err)
		}
		if kind == "orderly" {
			err = p.RegisterOrderlyListener(func(context.Context, *ConsumeOrderlyContext, []*MessageExt) OrderlyResult { return OrderlySuccess })
		} else {
			err = p.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult { return ConsumeSuccess })
		}
		if err != nil {
			t.Fatal(err)
		}
		r.push, r.core, r.close = p, p.core, p.Close
	case "lite", "liteCommit":
		l, err := NewLitePullConsumer(append(opts, AutoCommit(kind == "lite"))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Subscribe("T", "*"); err != nil {
			t.Fatal(err)
		}
		lite, r.core, r.close = l, l.core, l.Close
	}
	r.alone.Store(true)
	answerMembers(b, func() string { return r.core.clientID }, &r.alone, &r.shared)
	ctx := context.Background()
	if lite != nil {
		if err := lite.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lite.Close(ctx) })
		pollN(t, lite, 6)
		if kind == "lite" {
			releasePolled(t, lite)
		}
		if kind == "liteCommit" {
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			err := lite.Commit(cctx)
			cancel()
			if err == nil {
				t.Fatal("a commit the broker refused succeeded")
			}
		}
	} else if err := r.push.Start(ctx); err != nil {
		t.Fatal(err)
	} else {
		t.Cleanup(func() { _ = r.push.Close(ctx) })
	}
	for _, mq := range []MessageQueue{hoQ0, hoQ1} {
		testutil.WaitFor(t, 5*time.Second, "consumed "+mq.String(), func() bool {
			off, err := r.core.store.Read(ctx, mq, ReadFromMemory)
			return err == nil && off == 3
		})
	}
	r.alone.Store(false)
	r.core.triggerRebalance()
	testutil.WaitFor(t, 5*time.Second, "queue 1 handed over", func() bool {
		return slices.Equal(r.ownedOf("T"), []MessageQueue{hoQ0})
	})
	// The rebalance that dropped it holds rebalanceMu until the hand-over
	// (its commit included) is over.
	r.core.rebalanceMu.Lock()
	r.core.rebalanceMu.Unlock()
	if r.updates(1) == 0 {
		t.Fatal("the hand-over sent no offset of queue 1")
	}
	return r
}

// ownedOf lists the owned queues of topic.
func (r *handOverRig) ownedOf(topic string) []MessageQueue {
	var out []MessageQueue
	for _, mq := range r.core.owned() {
		if mq.Topic == topic {
			out = append(out, mq)
		}
	}
	return out
}

// updates counts the offset commits of T's queue qid the broker received.
func (r *handOverRig) updates(qid int) int {
	n := 0
	for _, req := range r.b.requests(remoting.RequestUpdateConsumerOffset) {
		var h wire.UpdateConsumerOffsetRequestHeader
		if req.DecodeHeader(&h) == nil && h.Topic == "T" && h.QueueID == int32(qid) {
			n++
		}
	}
	return n
}

// refuse answers offset commits with code and remark.
func (r *handOverRig) refuse(code int16, remark string) {
	r.b.answer(remoting.RequestUpdateConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(code, remark)
	})
}

// elect answers offset commits as a member of a group electing its leader.
func (r *handOverRig) elect() {
	r.refuse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark(""))
}

// accept has the broker take commits again.
func (r *handOverRig) accept() { r.b.answer(remoting.RequestUpdateConsumerOffset, nil) }

// committed is the group's committed offset of T's queue qid (-1: none).
func (r *handOverRig) committed(qid int) int64 {
	off, ok := r.b.offset("HG", "T", qid)
	if !ok {
		return -1
	}
	return off
}

// TestHandOverOffsetKeptUntilConfirmed: the offset of a queue handed over
// that its broker refused stays with the consumer until a broker takes it,
// sent by the next persist round or by Close, which rides out the group's
// election for it and for the owned queues' offsets; dropped, the next
// owner would consume the queue's 3 messages again.
func TestHandOverOffsetKeptUntilConfirmed(t *testing.T) {
	for _, kind := range handOverKinds {
		t.Run(kind+"/persist", func(t *testing.T) {
			r := startHandOverRig(t, kind)
			r.accept()
			r.core.persistAll(context.Background())
			if got := r.committed(1); got != 3 {
				t.Fatalf("committed offset of the queue handed over after a persist round: %d, want 3", got)
			}
		})
		t.Run(kind+"/closeDuringElection", func(t *testing.T) {
			r := startHandOverRig(t, kind)
			r.elect()
			sent := r.b.count(remoting.RequestUpdateConsumerOffset)
			closed := make(chan error, 1)
			go func() { closed <- r.close(context.Background()) }()
			testutil.WaitFor(t, 5*time.Second, "Close's commit refused", func() bool {
				select {
				case err := <-closed:
					t.Fatalf("Close returned while the group elected: %v", err)
				default:
				}
				return r.b.count(remoting.RequestUpdateConsumerOffset) > sent
			})
			r.accept()
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			for qid := range 2 {
				if got := r.committed(qid); got != 3 {
					t.Fatalf("committed offset of queue %d after Close: %d, want 3", qid, got)
				}
			}
		})
	}
}

// TestHandOverOffsetNotSentOverNewOwnersCommit: once the next owner of a
// queue handed over committed an offset of its own, the offset this
// consumer kept for it is not sent: the broker keeps the last offset it is
// sent, and ours would move the new owner's back.
func TestHandOverOffsetNotSentOverNewOwnersCommit(t *testing.T) {
	for _, kind := range handOverKinds {
		t.Run(kind, func(t *testing.T) {
			r := startHandOverRig(t, kind)
			r.b.setOffset("HG", "T", 1, 10)
			r.accept()
			r.core.persistAll(context.Background())
			if got := r.committed(1); got != 10 {
				t.Fatalf("committed offset after a persist round: %d, want the new owner's 10", got)
			}
			if err := r.close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := r.committed(1); got != 10 {
				t.Fatalf("committed offset after Close: %d, want the new owner's 10", got)
			}
		})
	}
}

// TestHandOverOffsetSentOverOlderCommit: a committed offset below the one
// kept for a queue handed over (a pull carried it, or the new owner is
// behind) does not stop it: sending it loses nothing.
func TestHandOverOffsetSentOverOlderCommit(t *testing.T) {
	for _, kind := range handOverKinds {
		t.Run(kind, func(t *testing.T) {
			r := startHandOverRig(t, kind)
			r.b.setOffset("HG", "T", 1, 1)
			r.accept()
			r.core.persistAll(context.Background())
			if got := r.committed(1); got != 3 {
				t.Fatalf("committed offset after a persist round: %d, want 3", got)
			}
		})
	}
}

// TestHandOverOffsetKeptWhenQueueComesBack: a queue handed over whose
// offset no broker took yet comes back (the other member left); the
// consumer resumes it after what it consumed, not at the group's older
// committed offset, which would deliver those messages again.
func TestHandOverOffsetKeptWhenQueueComesBack(t *testing.T) {
	for _, kind := range handOverKinds {
		t.Run(kind, func(t *testing.T) {
			r := startHandOverRig(t, kind)
			pulls := len(r.b.requests(remoting.RequestPullMessage))
			r.alone.Store(true)
			r.core.triggerRebalance()
			testutil.WaitFor(t, 5*time.Second, "queue 1 taken back", func() bool {
				return slices.Equal(r.ownedOf("T"), []MessageQueue{hoQ0, hoQ1})
			})
			testutil.WaitFor(t, 5*time.Second, "queue 1 pulled again", func() bool {
				for _, req := range r.b.requests(remoting.RequestPullMessage)[pulls:] {
					var h wire.PullMessageRequestHeader
					if req.DecodeHeader(&h) == nil && h.Topic == "T" && h.QueueID == 1 {
						if h.QueueOffset != 3 {
							t.Fatalf("queue 1 resumed at offset %d, want 3", h.QueueOffset)
						}
						return true
					}
				}
				return false
			})
			r.accept()
			r.core.persistAll(context.Background())
			if kind == "liteCommit" {
				// Only a Commit commits, or Close.
				if err := r.close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.committed(1); got != 3 {
				t.Fatalf("committed offset of queue 1: %d, want 3", got)
			}
		})
	}
}

// TestHandOverOffsetNotSentOverNewOwnersCommitAfterFailedStart: a queue
// handed over with its offset kept comes back, but its start offset cannot
// be read, and it goes to the other member before it starts. Its new owner
// commits 10: the kept offset (3) is still a handed-over queue's and must
// not be sent over that commit; only a queue that started is ours again.
func TestHandOverOffsetNotSentOverNewOwnersCommitAfterFailedStart(t *testing.T) {
	for _, kind := range handOverKinds {
		t.Run(kind, func(t *testing.T) {
			r := startHandOverRig(t, kind)
			r.b.answer(remoting.RequestQueryConsumerOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
				return remoting.NewResponse(remoting.ResponseSystemError, "scripted")
			})
			r.alone.Store(true)
			r.core.triggerRebalance()
			testutil.WaitFor(t, 5*time.Second, "queue 1's start tried and failed", func() bool {
				r.core.mu.Lock()
				defer r.core.mu.Unlock()
				return r.core.unstarted[hoQ1]
			})
			shared := r.shared.Load()
			r.alone.Store(false)
			r.core.triggerRebalance()
			testutil.WaitFor(t, 5*time.Second, "a rebalance saw the other member", func() bool {
				return r.shared.Load() > shared
			})
			// That rebalance holds rebalanceMu until it is over, and any
			// later one sees the other member too.
			r.core.rebalanceMu.Lock()
			r.core.rebalanceMu.Unlock()
			if got := r.ownedOf("T"); !slices.Equal(got, []MessageQueue{hoQ0}) {
				t.Fatalf("owned %v", got)
			}
			// The new owner started and committed 10.
			r.b.answer(remoting.RequestQueryConsumerOffset, nil)
			r.b.setOffset("HG", "T", 1, 10)
			r.accept()
			r.core.persistAll(context.Background())
			if got := r.committed(1); got != 10 {
				t.Fatalf("committed offset of queue 1 after a persist round: %d, want the new owner's 10", got)
			}
		})
	}
}

// TestHandOverOffsetKeptWhenGroupHasNone: a queue handed over with its
// offset kept (3) comes back while the group has no committed offset for
// it, and the consumer starts from the last offset (where its queues began,
// 3, when the rig started it). Messages 3..7 arrived
// meanwhile and nobody consumed them: the queue resumes at the kept
// offset, what was consumed here; ConsumeFromWhere is for a queue the group
// never consumed, and would skip them (8).
func TestHandOverOffsetKeptWhenGroupHasNone(t *testing.T) {
	r := startHandOverRig(t, "concurrent", ConsumeFrom(ConsumeFromLastOffset))
	for range 5 {
		r.b.put("T", 1, "m", nil)
	}
	if r.committed(1) != -1 {
		t.Fatal("rig: broker has an offset for queue 1")
	}
	pulls := len(r.b.requests(remoting.RequestPullMessage))
	r.alone.Store(true)
	r.core.triggerRebalance()
	testutil.WaitFor(t, 5*time.Second, "queue 1 pulled again", func() bool {
		for _, req := range r.b.requests(remoting.RequestPullMessage)[pulls:] {
			var h wire.PullMessageRequestHeader
			if req.DecodeHeader(&h) == nil && h.Topic == "T" && h.QueueID == 1 {
				if h.QueueOffset != 3 {
					t.Fatalf("queue 1 resumed at offset %d, want the kept 3 (messages 3..7 skipped)", h.QueueOffset)
				}
				return true
			}
		}
		return false
	})
}

// TestHandOverOffsetsSentPerBrokerSideBySide: one rebalance hands over
// queues of two broker groups, and broker-a holds its offset commits
// unanswered. broker-b's must still be confirmed within the hand-over's
// request timeout, sent beside broker-a's rather than behind them (broker-b
// answers only once broker-a holds one), while broker-a's stay kept.
func TestHandOverOffsetsSentPerBrokerSideBySide(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"concurrent", "orderly"} {
		t.Run(kind, func(t *testing.T) {
			ns := startNameServer(t)
			ba, bb := startQBroker(t, "broker-a"), startQBroker(t, "broker-b")
			held := make(chan struct{}) // broker-a holds an offset commit
			release := make(chan struct{})
			var holdOnce sync.Once
			defer close(release) // before Close, which sends the kept offsets
			ba.answer(remoting.RequestUpdateConsumerOffset, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
				holdOnce.Do(func() { close(held) })
				<-release
				return ba.other(nil, req)
			})
			bb.answer(remoting.RequestUpdateConsumerOffset, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
				select {
				case <-held:
					return bb.other(nil, req)
				case <-release:
					return remoting.NewResponse(remoting.ResponseSystemError, "broker-a never held a commit")
				}
			})
			var gone atomic.Bool // the group's members no longer include the consumer
			var c *consumerCore
			for _, b := range []*qBroker{ba, bb} {
				fillHandOverBroker(t, ns, b)
				b.answer(remoting.RequestGetConsumerListByGroup, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
					ids := []string{c.clientID}
					if gone.Load() {
						ids = []string{"~other"}
					}
					resp := remoting.NewResponse(remoting.ResponseSuccess, "")
					resp.Body, _ = json.Marshal(wire.ConsumerListBody{ConsumerIDList: ids})
					return resp
				})
			}
			p := newTestPush(t, ns, "HG", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour),
				RebalanceInterval(time.Hour), RequestTimeout(time.Second))
			c = p.core
			if err := p.Subscribe("T", "*"); err != nil {
				t.Fatal(err)
			}
			var err error
			if kind == "orderly" {
				err = p.RegisterOrderlyListener(func(context.Context, *ConsumeOrderlyContext, []*MessageExt) OrderlyResult { return OrderlySuccess })
			} else {
				err = p.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult { return ConsumeSuccess })
			}
			if err != nil {
				t.Fatal(err)
			}
			startPush(t, p)
			all := []MessageQueue{{"T", "broker-a", 0}, {"T", "broker-a", 1}, {"T", "broker-b", 0}, {"T", "broker-b", 1}}
			for _, mq := range all {
				testutil.WaitFor(t, 5*time.Second, "consumed "+mq.String(), func() bool {
					off, err := c.store.Read(context.Background(), mq, ReadFromMemory)
					return err == nil && off == 3
				})
			}
			gone.Store(true)
			c.triggerRebalance()
			testutil.WaitFor(t, 10*time.Second, "every queue handed over", func() bool {
				if len(c.owned()) > 0 || !c.rebalanceMu.TryLock() {
					return false
				}
				c.rebalanceMu.Unlock()
				return true
			})
			for _, mq := range all {
				off, ok := map[string]*qBroker{"broker-a": ba, "broker-b": bb}[mq.BrokerName].offset("HG", "T", mq.QueueID)
				c.pendingMu.Lock()
				_, kept := c.pending[mq]
				c.pendingMu.Unlock()
				switch {
				case mq.BrokerName == "broker-b" && (!ok || off != 3 || kept):
					t.Errorf("%s: committed %d (%v), kept %v; want 3 confirmed", mq, off, ok, kept)
				case mq.BrokerName == "broker-a" && (ok || !kept):
					t.Errorf("%s: committed %d (%v), kept %v; want it kept unconfirmed", mq, off, ok, kept)
				}
			}
		})
	}
}

// TestConcurrentHandOverLateResultDiscarded: a concurrent listener is still
// inside a call on queue 1 when the queue is handed over; the hand-over
// gives up waiting (HandoverTimeout) and commits the queue's offset without
// the call, so the next owner starts at the call's message. When the call
// then returns ConsumeRetryLater, its result must be discarded, as
// RocketMQ's ConsumeMessageConcurrentlyService discards the result of a
// dropped queue: a send-back would have the message delivered twice (the
// next owner consumes it too), and the offset it would store belongs to a
// queue this consumer no longer owns.
func TestConcurrentHandOverLateResultDiscarded(t *testing.T) {
	ns, b := startHandOverBroker(t)
	var alone atomic.Bool
	alone.Store(true)
	var c *consumerCore
	answerMembers(b, func() string { return c.clientID }, &alone, nil)
	inside, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	p := newTestPush(t, ns, "HG", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour),
		RebalanceInterval(time.Hour), HandoverTimeout(50*time.Millisecond))
	c = p.core
	_ = p.Subscribe("T", "*")
	_ = p.RegisterConcurrentListener(func(_ context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		if cc.Queue == hoQ1 && msgs[0].QueueOffset == 0 {
			close(inside)
			<-release
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	})
	startPush(t, p)
	<-inside
	c.mu.Lock()
	pq := c.pqs[hoQ1]
	c.mu.Unlock()
	alone.Store(false)
	c.triggerRebalance()
	waitHandedOver(t, c)
	if off, _ := b.offset("HG", "T", 1); off != 0 {
		t.Fatalf("the hand-over committed %d for queue 1, want 0 (message 0 still in the listener)", off)
	}
	releaseOnce.Do(func() { close(release) })
	waitCallSettled(t, pq)
	b.mu.Lock()
	sendBacks := len(b.sendBacks)
	b.mu.Unlock()
	stored, err := c.store.Read(context.Background(), hoQ1, ReadFromMemory)
	if sendBacks != 0 || b.count(remoting.RequestSendMessageV2) != 0 || err == nil {
		t.Fatalf("after the hand-over, the late result was settled: %d send-backs, %d retry-topic sends, queue 1's offset stored: %d (%v)",
			sendBacks, b.count(remoting.RequestSendMessageV2), stored, err)
	}
}

// TestConcurrentHandOverSendBackInProgressNotDuplicated: the listener
// returns ConsumeRetryLater for queue 1's message 0 at once, but the
// send-back it starts is slow, and the queue is handed over meanwhile. The
// call holds the queue's consume lock, so the hand-over gives up waiting
// for it (HandoverTimeout); the call had begun settling, though, so the
// offset the hand-over commits must count the send-back's outcome: once
// the broker took message 0 back into the retry topic, queue 1 is
// committed past it, or its next owner consumes it a second time. A
// send-back that fails leaves the offset before the message, for the next
// owner; one that never answers holds the hand-over no longer than the
// call's request timeout.
func TestConcurrentHandOverSendBackInProgressNotDuplicated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer int16 // the broker's answer to the send-back; -1: none
		past   bool  // queue 1 must be committed past message 0
		copies int32
	}{
		{"accepted", remoting.ResponseSuccess, true, 1},
		{"refused", remoting.ResponseSystemError, false, 0},
		{"unanswered", -1, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			committed, copies := handOverDuringSendBack(t, tc.answer)
			if past := committed > 0; past != tc.past || copies != tc.copies {
				t.Fatalf("queue 1 handed over at offset %d (past message 0: %v, want %v), message 0 sent back %d times (want %d)",
					committed, past, tc.past, copies, tc.copies)
			}
		})
	}
}

// handOverDuringSendBack hands queue 1 over while the send-back of its
// message 0, which the listener failed at once, is held at the broker; the
// broker answers it with answer (-1: never, within the test) once the
// hand-over gave up waiting for the call. A retry-topic send, the
// send-back's fallback, is refused unless the send-back is accepted. It
// returns queue 1's offset committed once the hand-over is over (0 if
// none) and the copies of message 0 the broker took back.
func handOverDuringSendBack(t *testing.T, answer int16) (committed int64, copies int32) {
	ns, b := startHandOverBroker(t)
	var alone atomic.Bool
	alone.Store(true)
	var c *consumerCore
	answerMembers(b, func() string { return c.clientID }, &alone, nil)
	inside, release := make(chan struct{}), make(chan struct{})
	var insideOnce, releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	var accepted atomic.Int32
	b.answer(remoting.RequestConsumerSendMsgBack, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		insideOnce.Do(func() { close(inside) })
		<-release
		if answer != remoting.ResponseSuccess {
			return remoting.NewResponse(remoting.ResponseSystemError, "scripted refusal")
		}
		accepted.Add(1)
		return remoting.NewResponse(remoting.ResponseSuccess, "")
	})
	if answer != remoting.ResponseSuccess {
		b.answer(remoting.RequestSendMessageV2, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
			return remoting.NewResponse(remoting.ResponseSystemError, "scripted refusal")
		})
	}
	p := newTestPush(t, ns, "HG", ConsumeFrom(ConsumeFromFirstOffset), PersistInterval(time.Hour),
		RebalanceInterval(time.Hour), HandoverTimeout(50*time.Millisecond), RequestTimeout(time.Second))
	c = p.core
	_ = p.Subscribe("T", "*")
	var failed atomic.Bool
	_ = p.RegisterConcurrentListener(func(_ context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		if cc.Queue == hoQ1 && msgs[0].QueueOffset == 0 && failed.CompareAndSwap(false, true) {
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	})
	startPush(t, p)
	<-inside
	c.mu.Lock()
	pq := c.pqs[hoQ1]
	c.mu.Unlock()
	alone.Store(false)
	c.triggerRebalance()
	// Answer once the hand-over gave up waiting for the call, which it
	// shows by waiting for the call's settle, or else by committing.
	testutil.WaitFor(t, 10*time.Second, "the hand-over waiting for the call's settle, or committing", func() bool {
		_, committed := b.offset("HG", "T", 1)
		return committed || settlePending(pq)
	})
	if answer >= 0 {
		releaseOnce.Do(func() { close(release) })
	}
	waitHandedOver(t, c)
	committed, _ = b.offset("HG", "T", 1)
	// A copy stored after the hand-over would be delivered twice as well.
	waitCallSettled(t, pq)
	copies = accepted.Load()
	if answer == remoting.ResponseSuccess {
		copies += int32(b.count(remoting.RequestSendMessageV2)) // unscripted: stored
	}
	return committed, copies
}

// settlePending reports whether pq's hand-over gave up waiting for its
// listener calls and waits for those settling.
func settlePending(pq *processQueue) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.abandoned && pq.settling > 0
}

// waitHandedOver waits until c no longer owns queue 1 and its rebalance
// (the hand-over's commit included) is over.
func waitHandedOver(t *testing.T, c *consumerCore) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, "queue 1 handed over", func() bool {
		if c.isOwned(hoQ1) || !c.rebalanceMu.TryLock() {
			return false
		}
		c.rebalanceMu.Unlock()
		return true
	})
}

// waitCallSettled waits until no listener call on pq is in progress: a
// call holds the queue's consume lock (read) until it has settled.
func waitCallSettled(t *testing.T, pq *processQueue) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "the call settled", func() bool {
		if !pq.consumeMu.TryLock() {
			return false
		}
		pq.consumeMu.Unlock()
		return true
	})
}
