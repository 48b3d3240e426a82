package console

import (
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// FuzzDecodeTopicStats: a GET_TOPIC_STATS_INFO answer (fastjson, queue
// objects as keys) either decodes into one view per queue or fails; a
// table written back decodes to the same queues.
func FuzzDecodeTopicStats(f *testing.F) {
	b := []byte(`{"offsetTable":{`)
	b = wire.AppendQueueEntry(b, wire.MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}, wire.TopicOffset{MinOffset: 1, MaxOffset: 9, LastUpdateTimestamp: 7})
	b = append(b, `}}`...)
	f.Add(b)
	f.Add([]byte(`{"offsetTable":{}}`))
	f.Add([]byte(`{"offsetTable":{"x":{}}}`))
	f.Add([]byte(`{"offsetTable":{{"topic":"T","queueId":"1"}:{"minOffset":1}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		views, err := decodeTopicStats(body)
		if err != nil {
			return
		}
		out := []byte(`{"offsetTable":{`)
		for i, v := range views {
			if i > 0 {
				out = append(out, ',')
			}
			out = wire.AppendQueueEntry(out, wire.MessageQueue{Topic: "T", BrokerName: v.BrokerName, QueueID: v.QueueID},
				wire.TopicOffset{MinOffset: v.MinOffset, MaxOffset: v.MaxOffset, LastUpdateTimestamp: v.LastUpdate})
		}
		out = append(out, `}}`...)
		again, err := decodeTopicStats(out)
		if err != nil || len(again) > len(views) {
			t.Fatalf("written back as %s: %d views, %v; want %d", out, len(again), err, len(views))
		}
	})
}
