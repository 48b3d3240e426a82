package client

import (
	"cmp"
	"fmt"
	"slices"
)

// MessageQueue names one queue of a topic on one broker group.
type MessageQueue struct {
	// Topic is the topic the queue belongs to.
	Topic string
	// BrokerName is the broker group (a raftmq Raft group) holding it.
	BrokerName string
	// QueueID numbers the topic's queues on that group from 0.
	QueueID int
}

// String is RocketMQ's MessageQueue.toString. ConsistentHash hashes this
// exact text, so it must not change.
func (q MessageQueue) String() string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", q.Topic, q.BrokerName, q.QueueID)
}

// CompareQueues orders queues by topic, brokerName, then queue id
// (MessageQueue.compareTo).
func CompareQueues(a, b MessageQueue) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := cmp.Compare(a.BrokerName, b.BrokerName); c != 0 {
		return c
	}
	return cmp.Compare(a.QueueID, b.QueueID)
}

// SortQueues sorts queues in place with CompareQueues. A rebalance sorts
// both the queues and the consumer ids before calling a strategy, so every
// consumer computes from the same order.
func SortQueues(qs []MessageQueue) { slices.SortFunc(qs, CompareQueues) }
