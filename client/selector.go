package client

import (
	"math/rand/v2"
	"slices"

	"github.com/raftmq/raftmq/wire"
)

// MessageQueueSelector picks the queue of a message sent with
// SendWithSelector, typically to keep related messages in order on one
// queue (RocketMQ's MessageQueueSelector). queues are the topic's writable
// queues in route order; false means no suitable queue.
type MessageQueueSelector interface {
	Select(msg *Message, queues []MessageQueue) (MessageQueue, bool)
}

// SelectorFunc adapts a function to MessageQueueSelector.
type SelectorFunc func(msg *Message, queues []MessageQueue) (MessageQueue, bool)

// Select calls f.
func (f SelectorFunc) Select(msg *Message, queues []MessageQueue) (MessageQueue, bool) {
	return f(msg, queues)
}

// javaStringHash is Java's String.hashCode over UTF-16 code units, so that
// a Go and a Java producer hashing the same key pick the same queue.
func javaStringHash(s string) int32 { return int32(wire.TagsHashCode(s)) }

// HashSelector picks queue |hash(key)| mod len(queues), RocketMQ's
// SelectMessageQueueByHash with Java's String.hashCode, where key is the
// message's ShardingKey, or its first key when it has none. Messages with
// the same key land on the same queue while the queue count is unchanged.
func HashSelector() MessageQueueSelector {
	return SelectorFunc(func(msg *Message, queues []MessageQueue) (MessageQueue, bool) {
		if len(queues) == 0 {
			return MessageQueue{}, false
		}
		key := msg.ShardingKey
		if key == "" && len(msg.Keys) > 0 {
			key = msg.Keys[0]
		}
		v := javaStringHash(key) % int32(len(queues))
		if v < 0 {
			v = -v
		}
		return queues[v], true
	})
}

// RandomSelector picks a queue at random (SelectMessageQueueByRandom).
func RandomSelector() MessageQueueSelector {
	return SelectorFunc(func(_ *Message, queues []MessageQueue) (MessageQueue, bool) {
		if len(queues) == 0 {
			return MessageQueue{}, false
		}
		return queues[rand.IntN(len(queues))], true
	})
}

// ManualSelector always picks mq; it fails when mq is not among the
// topic's writable queues.
func ManualSelector(mq MessageQueue) MessageQueueSelector {
	return SelectorFunc(func(_ *Message, queues []MessageQueue) (MessageQueue, bool) {
		return mq, slices.Contains(queues, mq)
	})
}
