package main

import (
	"context"
	"encoding/binary"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
)

// failoverConsumerGroup is the report's push consumer group.
const failoverConsumerGroup = "raftmq_failover_consumer"

// failoverQueues is the report topic's queue count.
const failoverQueues = 4

// startFailoverConsumer starts a push consumer on topic that records in w
// when messages sent after a kill arrive again from every queue: the
// consumer's resume time, measured like the producer's first write. Every
// queue counts, because each has its own pull loop, and one stuck behind
// the dead leader stalls its share of the messages.
func startFailoverConsumer(ctx context.Context, ns, topic string, w *ackWatch, log *zap.Logger) (*client.PushConsumer, error) {
	c, err := client.NewPushConsumer(client.NameServers(ns), client.WithLogger(log),
		client.ConsumerGroup(failoverConsumerGroup), client.ConsumeFrom(client.ConsumeFromLastOffset))
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(topic, "*"); err != nil {
		return nil, err
	}
	err = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		now := time.Now()
		for _, m := range msgs {
			if len(m.Body) >= 8 {
				w.recordConsumed(m.QueueID, time.Unix(0, int64(binary.BigEndian.Uint64(m.Body))), now)
			}
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// recordConsumed notes one delivery, at, from queue q of a message whose
// send started at sent.
func (w *ackWatch) recordConsumed(q int32, sent, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() || !w.consumed.IsZero() || !sent.After(w.since) {
		return
	}
	if w.queues == nil {
		w.queues = map[int32]bool{}
	}
	w.queues[q] = true
	if len(w.queues) == failoverQueues {
		w.consumed = at
	}
}

// firstConsumed is the first qualifying delivery, zero if none yet.
func (w *ackWatch) firstConsumed() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.consumed
}
