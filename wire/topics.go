package wire

// Topic names with a meaning of their own (RocketMQ TopicValidator and
// MixAll).
const (
	// TopicAutoCreate is RocketMQ's TBW102: a broker with
	// autoCreateTopicEnable registers it so clients find a route for a
	// topic that does not exist yet; nobody may send to it directly.
	TopicAutoCreate = "TBW102"
	// TopicSchedule holds delayed messages, one queue per delay level.
	TopicSchedule = "SCHEDULE_TOPIC_XXXX"
	// RetryGroupTopicPrefix prefixes a group's retry topic: consumers of
	// group G in clustering mode also subscribe to "%RETRY%G", where the
	// broker puts messages sent back after a failed consumption.
	RetryGroupTopicPrefix = "%RETRY%"
	// DLQGroupTopicPrefix prefixes a group's dead-letter topic, where
	// messages go once they exhaust their redeliveries.
	DLQGroupTopicPrefix = "%DLQ%"
)

// RetryTopic returns group's retry topic.
func RetryTopic(group string) string { return RetryGroupTopicPrefix + group }
