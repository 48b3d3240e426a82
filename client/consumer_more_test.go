package client

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

func TestProcessQueue(t *testing.T) {
	pq := newProcessQueue(context.Background(), MessageQueue{"T", "b", 0})
	if off := pq.remove(nil); off != -1 {
		t.Fatalf("empty commit offset %d", off)
	}
	msgs := make([]*MessageExt, 5)
	for i := range msgs {
		msgs[i] = &MessageExt{QueueOffset: int64(10 + i)}
		msgs[i].Body = make([]byte, 100)
	}
	pq.put(msgs)
	pq.put(msgs[:2]) // a duplicate delivery is ignored
	if n, size, span := pq.stats(); n != 5 || size != 500 || span != 4 {
		t.Fatalf("stats %d %d %d", n, size, span)
	}
	// Out-of-order completion: the commit offset stays at the lowest
	// unconsumed message.
	if off := pq.remove([]*MessageExt{msgs[1], msgs[3]}); off != 10 {
		t.Fatalf("commit offset %d, want 10", off)
	}
	if off := pq.remove([]*MessageExt{msgs[0]}); off != 12 {
		t.Fatalf("commit offset %d, want 12", off)
	}
	if off := pq.remove([]*MessageExt{msgs[2], msgs[4]}); off != 15 {
		t.Fatalf("commit offset %d, want 15", off)
	}
	if n, size, span := pq.stats(); n != 0 || size != 0 || span != 0 {
		t.Fatalf("stats after all removed %d %d %d", n, size, span)
	}
	// Orderly: take, requeue, take again, commit.
	more := []*MessageExt{{QueueOffset: 15}, {QueueOffset: 16}, {QueueOffset: 17}}
	pq.put(more)
	got := pq.take(2)
	if len(got) != 2 || got[0].QueueOffset != 15 || got[1].QueueOffset != 16 {
		t.Fatalf("take %v", got)
	}
	pq.requeueConsuming()
	got = pq.take(2)
	if got[0].QueueOffset != 15 {
		t.Fatalf("after requeue take %v", got)
	}
	if off := pq.commitConsuming(); off != 17 {
		t.Fatalf("orderly commit offset %d", off)
	}
	if !pq.hasMessages() {
		t.Fatal("17 is still cached")
	}
}

// TestPushConsumerAckIndexPanicAndLocalRetry: AckIndex sends back only
// the messages after it; a panicking listener counts as RECONSUME_LATER;
// when neither the broker nor the retry topic takes a message back, it is
// consumed again locally.
func TestPushConsumerAckIndexPanicAndLocalRetry(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1}) // no retry topic route: the fallback fails too
	for i := range 3 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), ConsumeMessageBatchMaxSize(3), PullBatchSize(3))
	c.core.cfg.sendBackRetry = 20 * time.Millisecond
	_ = c.Subscribe("T", "*")
	var got collector
	calls := 0
	_ = c.RegisterConcurrentListener(func(_ context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		calls++
		switch calls {
		case 1:
			cc.AckIndex = 0 // only "0" is done
			return ConsumeSuccess
		case 2:
			panic("listener bug")
		}
		return ConsumeSuccess
	})
	b.mu.Lock()
	b.failSendBack = true
	b.mu.Unlock()
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "1 and 2 consumed again", func() bool { return got.len() >= 7 })
	bodies := got.bodies()
	if !slices.Equal(bodies[:3], []string{"0", "1", "2"}) || !slices.Equal(bodies[3:5], []string{"1", "2"}) || !slices.Equal(bodies[5:7], []string{"1", "2"}) {
		t.Fatalf("deliveries %v", bodies)
	}
	b.mu.Lock()
	nb := len(b.sendBacks)
	b.mu.Unlock()
	if nb != 4 {
		t.Fatalf("%d send-backs, want 4 (1 and 2, twice)", nb)
	}
	testutil.WaitFor(t, 5*time.Second, "offset 3 committed", func() bool { off, _ := b.offset("G", "T", 0); return off == 3 })
}

func TestPushConsumerOffsetMoved(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for i := range 5 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	b.mu.Lock()
	b.offsets["G|T|0"] = 50 // beyond the queue: the broker answers PULL_OFFSET_MOVED
	b.mu.Unlock()
	c := newTestPush(t, ns, "G")
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "offset corrected to 5", func() bool { off, _ := b.offset("G", "T", 0); return off == 5 })
	b.put("T", 0, "next", nil)
	testutil.WaitFor(t, 5*time.Second, "next", func() bool { return got.len() == 1 })
	if got.bodies()[0] != "next" {
		t.Fatalf("got %v", got.bodies())
	}
}

// TestPushConsumerListenerReplacingBodiesNotFlowControlled: a listener
// that replaces the bodies it is given (decoding them in place, or
// dropping them once done) must not skew its queue's cached-bytes count:
// counted by the bodies found when the messages leave, the count would
// keep what they lost, grow past PullThresholdSizeForQueue, and the queue
// would never be pulled again.
func TestPushConsumerListenerReplacingBodiesNotFlowControlled(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	for range 4 {
		b.put("T", 0, string(make([]byte, 300<<10)), nil)
	}
	c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset), PullThresholdSizeForQueue(1))
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			m.Body = nil
		}
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	testutil.WaitFor(t, 5*time.Second, "the 1.2 MiB consumed", func() bool { return got.len() == 4 })
	b.put("T", 0, "last", nil)
	testutil.WaitFor(t, 5*time.Second, "the message after them consumed", func() bool { return got.len() == 5 })
}
