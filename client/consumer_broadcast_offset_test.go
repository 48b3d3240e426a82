package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestBroadcastQueueBackResumesAtItsOffset: a broadcasting consumer
// consumed queue 1 to offset 3; the queue leaves its route (a broker group
// evicted from the name server, its read queues shrunk) and comes back
// while messages 3..5 are in it. As with RocketMQ's LocalFileOffsetStore,
// whose removeOffset does nothing, the offsets file keeps 3 through the
// hand-over and the persist rounds after it, and the queue resumes there:
// starting at ConsumeFromWhere (last offset) would skip 3..5.
func TestBroadcastQueueBackResumesAtItsOffset(t *testing.T) {
	c, b, delivered := startBroadcastQueueOut(t)
	ctx := context.Background()
	c.persistAll(ctx) // any persist round
	for range 3 {
		b.put("T", 1, "m", nil) // 3..5, not consumed by this consumer yet
	}
	if off, err := c.store.Read(ctx, hoQ1, ReadFromStore); err != nil || off != 3 {
		t.Errorf("offsets file after queue 1 left and a persist round: %d, %v; want 3", off, err)
	}
	// Queue 1 comes back.
	c.rebalanceMu.Lock()
	c.updateQueues(c.ctx, "T", []MessageQueue{hoQ0, hoQ1})
	c.rebalanceMu.Unlock()
	if !eventually(3*time.Second, func() bool { return delivered(3) && delivered(4) && delivered(5) }) {
		off, _ := c.store.Read(ctx, hoQ1, ReadFromMemory)
		t.Fatalf("messages 3..5 of queue 1 never delivered after it came back (restarted at %d)", off)
	}
}

// TestBroadcastQueueStartKeepsOtherOffsets: a broadcasting consumer's
// queue 0 is consumed to 6 in memory while its file holds 3 (the last
// persist round). Reading another queue's start offset from the file (a
// queue that joins the route) leaves queue 0's in memory: were it put back
// to 3, Close would write 3 and 3..5 be delivered again after a restart.
func TestBroadcastQueueStartKeepsOtherOffsets(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2})
	dir := t.TempDir()
	p := newTestPush(t, ns, "BG", ConsumerModel(Broadcasting), OffsetDir(dir),
		ConsumeFrom(ConsumeFromLastOffset), PersistInterval(time.Hour), RebalanceInterval(time.Hour))
	_ = p.Subscribe("T", "*")
	_ = p.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	startPush(t, p)
	c := p.core
	ctx := context.Background()
	testutil.WaitFor(t, 5*time.Second, "both queues started", func() bool { return len(c.owned()) == 2 })
	consumedTo := func(want int64) {
		testutil.WaitFor(t, 5*time.Second, "queue 0 consumed", func() bool {
			off, err := c.store.Read(ctx, hoQ0, ReadFromMemory)
			return err == nil && off == want
		})
	}
	for range 3 {
		b.put("T", 0, "m", nil)
	}
	consumedTo(3)
	c.persistAll(ctx)
	for range 3 {
		b.put("T", 0, "m", nil)
	}
	consumedTo(6)
	if _, err := c.startOffset(ctx, hoQ1, 0, false); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.store.Read(ctx, hoQ0, ReadFromMemory); off != 6 {
		t.Fatalf("queue 0's offset in memory after another queue's start offset was read: %d, want 6", off)
	}
}

// startBroadcastQueueOut starts a broadcasting push consumer on two
// queues, has it consume queue 1 to offset 3 and takes queue 1 out of
// its route (what a route refresh and a rebalance do). delivered reports
// whether an offset of queue 1 was delivered.
func startBroadcastQueueOut(t *testing.T) (c *consumerCore, b *qBroker, delivered func(int64) bool) {
	ns := startNameServer(t)
	b = startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2})
	var mu sync.Mutex
	got := map[int64]bool{}
	p := newTestPush(t, ns, "BG", ConsumerModel(Broadcasting), OffsetDir(t.TempDir()),
		ConsumeFrom(ConsumeFromLastOffset), PersistInterval(time.Hour), RebalanceInterval(time.Hour))
	_ = p.Subscribe("T", "*")
	_ = p.RegisterConcurrentListener(func(_ context.Context, cc *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if cc.Queue == hoQ1 {
				got[m.QueueOffset] = true
			}
		}
		return ConsumeSuccess
	})
	startPush(t, p)
	c = p.core
	testutil.WaitFor(t, 5*time.Second, "both queues started", func() bool { return len(c.owned()) == 2 })
	for range 3 {
		b.put("T", 1, "m", nil)
	}
	testutil.WaitFor(t, 5*time.Second, "queue 1 consumed to 3", func() bool {
		off, err := c.store.Read(context.Background(), hoQ1, ReadFromMemory)
		return err == nil && off == 3
	})
	c.rebalanceMu.Lock()
	c.updateQueues(c.ctx, "T", []MessageQueue{hoQ0})
	c.rebalanceMu.Unlock()
	return c, b, func(o int64) bool {
		mu.Lock()
		defer mu.Unlock()
		return got[o]
	}
}

// TestBroadcastQueueBackResumesAtOffsetInMemory: a queue that comes back
// to a broadcasting consumer resumes at the offset the consumer holds in
// memory, not at what the offsets file says when another writer changed
// it meanwhile (here one that never saw the queue: the file lacks it, and
// ConsumeFromWhere would skip messages 3..5).
func TestBroadcastQueueBackResumesAtOffsetInMemory(t *testing.T) {
	c, b, delivered := startBroadcastQueueOut(t)
	ctx := context.Background()
	for range 3 {
		b.put("T", 1, "m", nil) // 3..5
	}
	peer := NewLocalOffsetStore(c.store.(*LocalOffsetStore).path)
	peer.Update(hoQ0, 0, false)
	if err := peer.Persist(ctx, nil); err != nil {
		t.Fatal(err)
	}
	c.rebalanceMu.Lock()
	c.updateQueues(c.ctx, "T", []MessageQueue{hoQ0, hoQ1})
	c.rebalanceMu.Unlock()
	if !eventually(3*time.Second, func() bool { return delivered(3) && delivered(4) && delivered(5) }) {
		off, _ := c.store.Read(ctx, hoQ1, ReadFromMemory)
		t.Fatalf("queue 1 resumed at %d, not at its own offset 3 held in memory", off)
	}
}
