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

// wipeAndRefill empties topic T's queue 0 at b, as a RocketMQ broker's
// queue is after its topic was deleted and created again, waits for a
// pull of it at offset 0 (the broker answered the pulls past its end
// OFFSET_ILLEGAL with the queue's start, as RocketMQ's does while the
// queue's min offset is 0), and stores bodies there from offset 0.
func wipeAndRefill(t *testing.T, b *qBroker, bodies ...string) {
	t.Helper()
	b.mu.Lock()
	seen := len(b.pulls)
	b.queues[qKey{"T", 0}] = nil
	b.mu.Unlock()
	testutil.WaitFor(t, 5*time.Second, "a pull of T/0 at offset 0 after the wipe", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return slices.ContainsFunc(b.pulls[seen:], func(h wire.PullMessageRequestHeader) bool { return h.Topic == "T" && h.QueueOffset == 0 })
	})
	for _, body := range bodies {
		b.put("T", 0, body, nil)
	}
}

// TestConsumerQueueRestartedBelowCached: an OFFSET_ILLEGAL answer that
// moves a queue's pulls to or below offsets the consumer already cached
// means the queue started over (a RocketMQ topic deleted and created
// again, a wiped store): the messages now at those offsets are new. Each
// consumer kind delivers them and commits no offset past them (the offset
// committed ends at the new queue's end), as RocketMQ's push consumer
// does by dropping the process queue and starting the queue afresh. A
// process queue kept would take them for copies of the messages it had
// consumed there: an orderly consumer would never deliver them, and the
// others would commit one past the old queue's last offset.
func TestConsumerQueueRestartedBelowCached(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"concurrent", "orderly", "lite"} {
		t.Run(kind, func(t *testing.T) {
			ns := startNameServer(t)
			b := startQBroker(t, "broker-a")
			b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("GR"): 1})
			for i := range 5 {
				b.put("T", 0, fmt.Sprint("old", i), nil)
			}
			var got collector
			var poll func(n int)
			switch kind {
			case "lite":
				l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "GR"), ConsumeFrom(ConsumeFromFirstOffset))...)
				if err != nil {
					t.Fatal(err)
				}
				_ = l.Subscribe("T", "*")
				if err := l.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close(context.Background()) })
				poll = func(n int) { got.add(pollN(t, l, n)...); releasePolled(t, l) }
			default:
				c := newTestPush(t, ns, "GR", ConsumeFrom(ConsumeFromFirstOffset))
				_ = c.Subscribe("T", "*")
				if kind == "orderly" {
					_ = c.RegisterOrderlyListener(func(_ context.Context, _ *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
						got.add(msgs...)
						return OrderlySuccess
					})
				} else {
					_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
						got.add(msgs...)
						return ConsumeSuccess
					})
				}
				startPush(t, c)
				poll = func(int) {}
			}
			poll(5)
			testutil.WaitFor(t, 5*time.Second, "the old messages consumed and committed", func() bool {
				off, _ := b.offset("GR", "T", 0)
				return got.len() == 5 && off == 5
			})
			wipeAndRefill(t, b, "new0", "new1", "new2")
			poll(3)
			testutil.WaitFor(t, 5*time.Second, "the new messages consumed", func() bool { return got.len() >= 8 })
			bodies := got.bodies()
			if kind == "concurrent" {
				slices.Sort(bodies[5:]) // the pool's calls end in any order
			}
			if !slices.Equal(bodies[5:], []string{"new0", "new1", "new2"}) {
				t.Fatalf("consumed %v", bodies)
			}
			testutil.WaitFor(t, 5*time.Second, "offset 3 committed, the new queue's end", func() bool {
				off, _ := b.offset("GR", "T", 0)
				return off == 3
			})
		})
	}
}
