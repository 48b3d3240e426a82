package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// panickyStrategy is AllocateAveragely whose first calls panic, as a
// user's strategy (or the resolver of AllocateMachineRoomNearby) with a
// bug might.
type panickyStrategy struct{ panics *atomic.Int32 }

func (panickyStrategy) Name() string { return "PANICKY" }

func (s panickyStrategy) Allocate(group, cid string, mqAll []MessageQueue, cidAll []string) ([]MessageQueue, error) {
	if s.panics.Add(-1) >= 0 {
		var m map[string]int
		m["boom"]++ // a nil map write: a runtime panic
	}
	return AllocateAveragely().Allocate(group, cid, mqAll, cidAll)
}

// TestPushConsumerSurvivesPanickingStrategy: a strategy's panic is the
// rebalance's error, as RocketMQ's rebalanceByTopic catches a Throwable
// from allocate: the process goes on, the rebalance is retried, and once
// the strategy answers the queues are consumed.
func TestPushConsumerSurvivesPanickingStrategy(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("GP"): 1})
	b.put("T", 0, "a", nil)
	b.put("T", 1, "b", nil)
	var panics atomic.Int32
	panics.Store(3)
	c := newTestPush(t, ns, "GP", ConsumeFrom(ConsumeFromFirstOffset), Strategy(panickyStrategy{&panics}))
	_ = c.Subscribe("T", "*")
	var got collector
	_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
		got.add(msgs...)
		return ConsumeSuccess
	})
	startPush(t, c)
	testutil.WaitFor(t, 10*time.Second, "both messages consumed after the strategy's panics", func() bool { return got.len() == 2 })
	if panics.Load() >= 0 {
		t.Fatalf("the strategy panicked fewer times than the test meant: %d left", panics.Load())
	}
}
