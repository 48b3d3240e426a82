package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestConsumerRefusesDefaultGroup: DEFAULT_CONSUMER is the group every
// consumer built without one would share, so unrelated applications
// would split each other's queues; RocketMQ's consumers refuse it
// (checkConfig), and so do ours, when they are built.
func TestConsumerRefusesDefaultGroup(t *testing.T) {
	opts := []ConsumerOpt{NameServers("127.0.0.1:9876"), ConsumerGroup(DefaultConsumerGroup)}
	if _, err := NewPushConsumer(opts...); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("push consumer of group %s: %v", DefaultConsumerGroup, err)
	}
	if _, err := NewLitePullConsumer(opts...); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("lite pull consumer of group %s: %v", DefaultConsumerGroup, err)
	}
}

// TestLiteSeekOutsideQueueRefused: a Seek to an offset outside the
// queue's [min, max] is refused at once with the bounds, as RocketMQ's
// DefaultLitePullConsumer.seek does, and changes nothing: the consumer
// reads on where it was, and AutoCommit commits no jump the broker's
// OFFSET_ILLEGAL answer would have made of it. Seeking to the max offset
// (the queue's end) is allowed.
func TestLiteSeekOutsideQueueRefused(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	for i := range 10 {
		b.put("T", 0, fmt.Sprint(i), nil)
	}
	l, err := NewLitePullConsumer(append(fastConsumerOpts(t, ns, "LSeek"), ConsumeFrom(ConsumeFromFirstOffset), PullBatchSize(4))...)
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
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	pollN(t, l, 10)
	if err := l.Seek(ctx, q0, 25); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Seek past the queue's end (max 10): %v", err)
	}
	b.put("T", 0, "10", nil)
	msgs := pollN(t, l, 1)
	if msgs[0].QueueOffset != 10 {
		t.Fatalf("after a refused Seek the consumer read offset %d, want 10", msgs[0].QueueOffset)
	}
	if err := l.Seek(ctx, q0, 11); err != nil {
		t.Fatalf("Seek to the queue's end: %v", err)
	}
	if err := l.Seek(ctx, q0, 4); err != nil {
		t.Fatal(err)
	}
	got := pollN(t, l, 1)
	if got[0].QueueOffset != 4 {
		t.Fatalf("after Seek to 4 read offset %d", got[0].QueueOffset)
	}
	// AutoCommit commits what Poll returned, never an offset past the queue.
	releasePolled(t, l)
	want := got[len(got)-1].QueueOffset + 1
	testutil.WaitFor(t, 5*time.Second, fmt.Sprint("offset ", want, " committed"), func() bool {
		off, _ := b.offset("LSeek", "T", 0)
		return off == want
	})
}
