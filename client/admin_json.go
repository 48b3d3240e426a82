package client

import (
	"encoding/json"
	"slices"

	"github.com/raftmq/raftmq/wire"
)

// queueEntry is one key/value of a queue-keyed table, keyed by the SDK's
// MessageQueue.
type queueEntry struct {
	Queue MessageQueue
	Value json.RawMessage
}

// decodeQueueTable is wire.DecodeQueueTable with the SDK's queues, sorted
// with CompareQueues.
func decodeQueueTable(body []byte, field string) ([]queueEntry, error) {
	entries, err := wire.DecodeQueueTable(body, field)
	if err != nil || entries == nil {
		return nil, err
	}
	out := make([]queueEntry, len(entries))
	for i, e := range entries {
		out[i] = queueEntry{Queue: MessageQueue{Topic: e.Queue.Topic, BrokerName: e.Queue.BrokerName, QueueID: int(e.Queue.QueueID)}, Value: e.Value}
	}
	slices.SortFunc(out, func(a, b queueEntry) int { return CompareQueues(a.Queue, b.Queue) })
	return out, nil
}
