package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// stuckListener is a concurrent listener that blocks its first call on
// body "1" until release is closed, then returns late; every other call
// succeeds. What it consumed is in got.
type stuckListener struct {
	got      collector
	release  chan struct{}
	inside   chan struct{} // closed once the stuck call began
	returned chan struct{} // closed once it returned
	late     ConsumeResult // what the stuck call returns
	once     sync.Once
}

func newStuckListener(late ConsumeResult) *stuckListener {
	return &stuckListener{release: make(chan struct{}), inside: make(chan struct{}), returned: make(chan struct{}), late: late}
}

func (s *stuckListener) unblock() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *stuckListener) listen(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
	stuck := false
	if string(msgs[0].Body) == "1" {
		s.once.Do(func() { stuck = true })
	}
	if !stuck {
		s.got.add(msgs...)
		return ConsumeSuccess
	}
	close(s.inside)
	<-s.release
	close(s.returned)
	return s.late
}

// sendBacksOf counts the CONSUMER_SEND_MSG_BACK requests b received.
func sendBacksOf(b *qBroker) []wire.ConsumerSendMsgBackRequestHeader {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sendBacks)
}

// TestPushConsumerConsumeTimeoutSendsStuckMessageBack: a concurrent
// listener call that never returns must not hold its queue's offset
// forever. Past ConsumeTimeout its message is sent back (delay level 3,
// RocketMQ's cleanExpiredMsg) and let go: it is redelivered through the
// retry topic, the messages after it have their offset committed past it,
// and the stuck call's result, when it finally returns, is ignored (no
// second send-back, the offset not moved back).
func TestPushConsumerConsumeTimeoutSendsStuckMessageBack(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	s := newStuckListener(ConsumeRetryLater)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), ConsumeTimeout(300*time.Millisecond))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(s.listen)
	startPush(t, c)
	t.Cleanup(s.unblock) // before Close, which waits for the call
	<-s.inside
	testutil.WaitFor(t, 10*time.Second, "1 redelivered through the retry topic", func() bool {
		return slices.ContainsFunc(s.got.snapshot(), func(m *MessageExt) bool { return string(m.Body) == "1" && m.ReconsumeTimes == 1 })
	})
	testutil.WaitFor(t, 5*time.Second, "T/0's offset committed past the stuck message", func() bool {
		off, _ := b.offset("G", "T", 0)
		return off == 5
	})
	if got := slices.Sorted(slices.Values(s.got.bodies())); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("consumed %v, want 0..4 once each", got)
	}
	if sb := sendBacksOf(b); len(sb) != 1 || sb[0].DelayLevel != 3 {
		t.Fatalf("send-backs %+v, want one at delay level 3", sb)
	}
	// The stuck call returns RECONSUME_LATER; Close waits for its worker,
	// whose result must settle nothing.
	s.unblock()
	<-s.returned
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if sb := sendBacksOf(b); len(sb) != 1 {
		t.Fatalf("%d send-backs: the late result was not ignored", len(sb))
	}
	if off, _ := b.offset("G", "T", 0); off != 5 {
		t.Fatalf("T/0's committed offset %d after close, want 5", off)
	}
}

// TestPushConsumerConsumeTimeoutSendBackFails: a timed-out message whose
// send-back fails (broker and retry-topic fallback both) stays held, as a
// failed listener's does: the committed offset stays at it while the
// messages after it are consumed, and once send-backs work again it is
// sent back and the offset moves past it.
func TestPushConsumerConsumeTimeoutSendBackFails(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	b.mu.Lock()
	b.failSendBack = true
	b.mu.Unlock()
	b.answer(remoting.RequestSendMessageV2, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "scripted: retry topic unwritable")
	})
	s := newStuckListener(ConsumeSuccess)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), ConsumeTimeout(200*time.Millisecond),
		RequestTimeout(500*time.Millisecond))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(s.listen)
	startPush(t, c)
	t.Cleanup(s.unblock) // before Close, which waits for the call
	<-s.inside
	testutil.WaitFor(t, 10*time.Second, "two send-back attempts", func() bool { return len(sendBacksOf(b)) >= 2 })
	commits := b.count(remoting.RequestUpdateConsumerOffset)
	testutil.WaitFor(t, 5*time.Second, "a persist round after them", func() bool {
		return b.count(remoting.RequestUpdateConsumerOffset) > commits+1
	})
	if off, _ := b.offset("G", "T", 0); off != 1 {
		t.Fatalf("T/0's committed offset %d while 1's send-back fails, want 1", off)
	}
	if got := slices.Sorted(slices.Values(s.got.bodies())); !slices.Equal(got, []string{"0", "2", "3", "4"}) {
		t.Fatalf("consumed %v", got)
	}
	b.mu.Lock()
	b.failSendBack = false
	delete(b.script, remoting.RequestSendMessageV2)
	b.mu.Unlock()
	testutil.WaitFor(t, 10*time.Second, "1 redelivered and T/0's offset past it", func() bool {
		off, _ := b.offset("G", "T", 0)
		return off == 5 && slices.Contains(s.got.bodies(), "1")
	})
}

func (c *collector) snapshot() []*MessageExt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

// TestConsumeTimeoutOption: RocketMQ's default, and a timeout below the
// durations the consumer accepts refused.
func TestConsumeTimeoutOption(t *testing.T) {
	c, err := NewPushConsumer(NameServers("127.0.0.1:9876"), ConsumerGroup("G"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.core.cfg.consumeTimeout; d != 15*time.Minute {
		t.Fatalf("default ConsumeTimeout %v, want 15m", d)
	}
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := NewPushConsumer(NameServers("127.0.0.1:9876"), ConsumerGroup("G"), ConsumeTimeout(d)); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("ConsumeTimeout(%v): %v", d, err)
		}
	}
}

// TestPushConsumerConsumeTimeoutLateSuccessAfterFailedSendBack: a
// timed-out message whose send-back failed was not let go, so the late
// result of its call still counts (as RocketMQ's processConsumeResult
// removes it): a call that returns ConsumeSuccess then settles it, the
// queue's offset moves past it, and no later round sends it back for a
// second delivery. The rounds are run by the test (ConsumeTimeout of an
// hour, a fake clock) so that none comes between the failed send-back and
// the call's return.
func TestPushConsumerConsumeTimeoutLateSuccessAfterFailedSendBack(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	b.mu.Lock()
	b.failSendBack = true
	b.mu.Unlock()
	b.answer(remoting.RequestSendMessageV2, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "scripted: retry topic unwritable")
	})
	clk := &fakeClock{t: time.Now()}
	s := newStuckListener(ConsumeSuccess)
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), ConsumeTimeout(time.Hour),
		RequestTimeout(500*time.Millisecond), WithClock(clk.now))
	_ = c.Subscribe("T", "*")
	_ = c.RegisterConcurrentListener(s.listen)
	startPush(t, c)
	t.Cleanup(s.unblock) // before Close, which waits for the call
	<-s.inside
	testutil.WaitFor(t, 5*time.Second, "0, 2, 3, 4 consumed", func() bool { return s.got.len() == 4 })
	clk.advance(2 * time.Hour)
	c.timeoutRound(c.core.ctx)
	if n := len(sendBacksOf(b)); n != 1 {
		t.Fatalf("%d send-back attempts in the round, want 1", n)
	}
	s.unblock()
	<-s.returned
	testutil.WaitFor(t, 5*time.Second, "T/0's offset committed past 1, which the late call consumed", func() bool {
		off, _ := b.offset("G", "T", 0)
		return off == 5
	})
	c.timeoutRound(c.core.ctx)
	if n := len(sendBacksOf(b)); n != 1 {
		t.Fatalf("%d send-back attempts: 1 was sent back after its call consumed it", n)
	}
}
