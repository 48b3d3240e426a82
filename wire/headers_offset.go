package wire

// Headers of the offset requests: consumer offsets, queue bounds and
// lookups by time. A BrokerName field is RocketMQ 5's "bname", the target
// broker group, which raftmq brokers ignore.

// QueryConsumerOffsetRequestHeader is QUERY_CONSUMER_OFFSET's (14) header.
type QueryConsumerOffsetRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	Topic         string `ext:"topic,required"`
	QueueID       int32  `ext:"queueId,required"`
	BrokerName    string `ext:"bname,omitempty"`
}

// UpdateConsumerOffsetRequestHeader is UPDATE_CONSUMER_OFFSET's (15) header.
type UpdateConsumerOffsetRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	Topic         string `ext:"topic,required"`
	QueueID       int32  `ext:"queueId,required"`
	CommitOffset  int64  `ext:"commitOffset,required"`
	BrokerName    string `ext:"bname,omitempty"`
}

// QueueOffsetRequestHeader is GET_MAX_OFFSET's (30), GET_MIN_OFFSET's (31)
// and GET_EARLIEST_MSG_STORETIME's (32) header (GetMaxOffsetRequestHeader
// and its siblings).
type QueueOffsetRequestHeader struct {
	Topic      string `ext:"topic,required"`
	QueueID    int32  `ext:"queueId,required"`
	BrokerName string `ext:"bname,omitempty"`
}

// SearchOffsetRequestHeader is SEARCH_OFFSET_BY_TIMESTAMP's (29) header.
type SearchOffsetRequestHeader struct {
	Topic   string `ext:"topic,required"`
	QueueID int32  `ext:"queueId,required"`
	// Timestamp is in milliseconds since the epoch.
	Timestamp  int64  `ext:"timestamp,required"`
	BrokerName string `ext:"bname,omitempty"`
	// BoundaryType is RocketMQ 5's: "LOWER" (or absent) asks for the
	// first message stored at or after Timestamp, "UPPER" for the last
	// one stored at or before it (compared ignoring case).
	BoundaryType string `ext:"boundaryType,omitempty"`
}

// ConsumeStatsRequestHeader is GET_CONSUME_STATS's (208) header; an empty
// Topic asks for every topic the group consumes. TopicList (RocketMQ 5:
// topics separated by ';') names the topics instead and takes precedence
// over Topic.
type ConsumeStatsRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	Topic         string `ext:"topic,omitempty"`
	TopicList     string `ext:"topicList,omitempty"`
}

// ResetOffsetRequestHeader is INVOKE_BROKER_TO_RESET_OFFSET's (222) header
// (ResetOffsetRequestHeader).
type ResetOffsetRequestHeader struct {
	Topic string `ext:"topic"`
	Group string `ext:"group"`
	// Timestamp is in milliseconds since the epoch.
	Timestamp int64 `ext:"timestamp"`
	// IsForce also moves offsets forward, not only back.
	IsForce bool `ext:"isForce"`
	// QueueID, when 0 or more, resets that queue only (RocketMQ 5's
	// mqadmin resetOffsetByTime -q); -1 resets every queue. RocketMQ 4.9
	// clients leave it out, which a decoder must read as -1.
	QueueID int32 `ext:"queueId"`
	// Offset, when 0 or more with a QueueID, is the queue's new offset in
	// place of the timestamp's (-o); -1 (or absent) means none.
	Offset int64 `ext:"offset"`
}
