package wire

import "strings"

// DataVersion identifies one state of a broker's topic configuration. Brokers
// bump it on every topic change; the name server rebuilds a broker's queue
// data only when it changes (RocketMQ DataVersion, compared field by field).
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// TopicConfig is one topic as a broker reports it when registering, and as
// the topic-config admin answers carry it.
type TopicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int               `json:"readQueueNums"`
	WriteQueueNums  int               `json:"writeQueueNums"`
	Perm            int               `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int               `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes,omitempty"`
}

// TopicConfig.TopicSysFlag bits (RocketMQ's TopicSysFlag): a unit topic,
// and a topic with unit subscriptions. raftmq stores and routes them; it
// has no unit (multi-site) routing that reads them.
const (
	TopicSysFlagUnit    = 1 << 0
	TopicSysFlagUnitSub = 1 << 1
)

// TopicConfigSerializeWrapper is a broker's whole topic table plus the data
// version it belongs to.
type TopicConfigSerializeWrapper struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion            `json:"dataVersion"`
}

// Topic names with a meaning of their own (RocketMQ TopicValidator and
// MixAll).
const (
	// TopicAutoCreate is RocketMQ's TBW102: a broker with
	// autoCreateTopicEnable registers it so clients find a route for a
	// topic that does not exist yet; nobody may send to it directly.
	TopicAutoCreate = "TBW102"
	// TopicSchedule holds delayed messages, one queue per delay level.
	TopicSchedule = "SCHEDULE_TOPIC_XXXX"
	// TopicTimer holds timer messages until they are due (RocketMQ 5's
	// TimerMessageStore.TIMER_TOPIC), in one queue.
	TopicTimer = "rmq_sys_wheel_timer"
	// TopicTransCheckMaxTime, TopicSelfTest and TopicOffsetMovedEvent are
	// RocketMQ system topics raftmq does not use; like the schedule and
	// half topics, no client may send to them (TopicValidator's
	// NOT_ALLOWED_SEND_TOPIC_SET).
	TopicTransCheckMaxTime = "TRANS_CHECK_MAX_TIME_TOPIC"
	TopicSelfTest          = "SELF_TEST_TOPIC"
	TopicOffsetMovedEvent  = "OFFSET_MOVED_EVENT"
	// RetryGroupTopicPrefix prefixes a group's retry topic: consumers of
	// group G in clustering mode also subscribe to "%RETRY%G", where the
	// broker puts messages sent back after a failed consumption.
	RetryGroupTopicPrefix = "%RETRY%"
	// DLQGroupTopicPrefix prefixes a group's dead-letter topic, where
	// messages go once they exhaust their redeliveries.
	DLQGroupTopicPrefix = "%DLQ%"
)

// SendForbidden reports whether no client may send to topic: the topics
// of TopicValidator's NOT_ALLOWED_SEND_TOPIC_SET, TBW102 and the timer
// topic. Brokers answer such a send NO_PERMISSION; clients refuse it
// before sending, as RocketMQ's do.
func SendForbidden(topic string) bool {
	switch topic {
	case TopicAutoCreate, TopicSchedule, TopicTimer, TopicTransHalf, TopicTransOpHalf,
		TopicTransCheckMaxTime, TopicSelfTest, TopicOffsetMovedEvent:
		return true
	}
	return false
}

// SystemTopic reports whether RocketMQ counts topic as a system topic
// (TopicValidator.isSystemTopic): the "rmq_sys_" prefix or a name of its
// SYSTEM_TOPIC_SET. A cluster's reply topic and the names of clusters and
// broker groups are system topics too, but only a broker or name server
// that knows the cluster can tell.
func SystemTopic(topic string) bool {
	if strings.HasPrefix(topic, "rmq_sys_") {
		return true
	}
	switch topic {
	case TopicAutoCreate, TopicSchedule, TopicTransHalf, TopicTransOpHalf, TopicTransCheckMaxTime,
		TopicSelfTest, TopicOffsetMovedEvent, "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC":
		return true
	}
	return false
}

// RetryTopic returns group's retry topic.
func RetryTopic(group string) string { return RetryGroupTopicPrefix + group }

// Name limits of RocketMQ's TopicValidator and Validators, which broker and
// clients both enforce.
const (
	// MaxTopicLength is TOPIC_MAX_LENGTH; a longer topic would also need
	// the V2 stored format, which the official Go client cannot read.
	MaxTopicLength = 127
	// MaxGroupLength is CHARACTER_MAX_LENGTH, the limit for group names.
	MaxGroupLength = 255
)

// ValidName reports whether s is a non-empty topic or group name made of
// the characters RocketMQ allows: letters, digits, '%', '-', '_' and '|'.
// Lengths are checked separately (MaxTopicLength, MaxGroupLength).
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
			ch == '%' || ch == '-' || ch == '_' || ch == '|') {
			return false
		}
	}
	return true
}
