package wire

// CreateTopicRequestHeader is UPDATE_AND_CREATE_TOPIC's (17) header
// (CreateTopicRequestHeader).
type CreateTopicRequestHeader struct {
	Topic string `ext:"topic,required"`
	// DefaultTopic is the template topic, TBW102 by convention.
	DefaultTopic   string `ext:"defaultTopic"`
	ReadQueueNums  int    `ext:"readQueueNums,required"`
	WriteQueueNums int    `ext:"writeQueueNums,required"`
	// Perm holds the permission bits (2 write, 4 read).
	Perm            int    `ext:"perm,required"`
	TopicFilterType string `ext:"topicFilterType"`
	TopicSysFlag    int    `ext:"topicSysFlag"`
	Order           bool   `ext:"order"`
	// Attributes alters the topic's attributes (RocketMQ 5):
	// "+key=value,…" adds or changes, "-key" deletes.
	Attributes string `ext:"attributes,omitempty"`
}

// TopicRequestHeader names one topic: DELETE_TOPIC_IN_BROKER (215) and
// GET_TOPIC_STATS_INFO (202).
type TopicRequestHeader struct {
	Topic string `ext:"topic,required"`
}

// DeleteSubscriptionGroupRequestHeader is DELETE_SUBSCRIPTIONGROUP's (207)
// header (DeleteSubscriptionGroupRequestHeader).
type DeleteSubscriptionGroupRequestHeader struct {
	GroupName string `ext:"groupName,required"`
	// CleanOffset also removes the group's consumer offsets (RocketMQ 5;
	// mqadmin deleteSubGroup -r true). Absent, as from older clients, it
	// is false: the offsets stay.
	CleanOffset bool `ext:"cleanOffset"`
}

// QueryMessageRequestHeader is QUERY_MESSAGE's (12) header: messages of
// Topic indexed under Key, stored in [BeginTimestamp, EndTimestamp] (ms).
type QueryMessageRequestHeader struct {
	Topic          string `ext:"topic,required"`
	Key            string `ext:"key,required"`
	MaxNum         int32  `ext:"maxNum,required"`
	BeginTimestamp int64  `ext:"beginTimestamp,required"`
	EndTimestamp   int64  `ext:"endTimestamp,required"`
}

// ViewMessageRequestHeader is VIEW_MESSAGE_BY_ID's (33) header: the
// CommitLog offset an offset msgId names.
type ViewMessageRequestHeader struct {
	Offset int64 `ext:"offset,required"`
}

// LeadershipTransferRequestHeader is raftmq's LEADERSHIP_TRANSFER header:
// the target's Raft id, or empty for the most caught-up follower.
type LeadershipTransferRequestHeader struct {
	TargetID string `ext:"targetId,omitempty"`
}
