package wire

// MessageQueue is RocketMQ's MessageQueue as it is serialized in JSON
// bodies (lock batches, consume and topic stats).
type MessageQueue struct {
	// Topic is the topic the queue belongs to.
	Topic string `json:"topic"`
	// BrokerName is the broker group holding the queue.
	BrokerName string `json:"brokerName"`
	// QueueID numbers the topic's queues on that group from 0.
	QueueID int32 `json:"queueId"`
}
