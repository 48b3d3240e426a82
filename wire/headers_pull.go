package wire

// Pull request sysFlag bits (RocketMQ PullSysFlag).
const (
	PullFlagCommitOffset int32 = 0x1
	PullFlagSuspend      int32 = 0x2
	PullFlagSubscription int32 = 0x4
	PullFlagClassFilter  int32 = 0x8
	PullFlagLitePull     int32 = 0x10
)

// PullMessageRequestHeader is PULL_MESSAGE's (11) and LITE_PULL_MESSAGE's
// (361) header (PullMessageRequestHeader); the required set is
// RocketMQ's @CFNotNull set.
type PullMessageRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	Topic         string `ext:"topic,required"`
	QueueID       int32  `ext:"queueId,required"`
	// QueueOffset is the first queue offset wanted.
	QueueOffset int64 `ext:"queueOffset,required"`
	// MaxMsgNums bounds the batch.
	MaxMsgNums int32 `ext:"maxMsgNums,required"`
	// SysFlag holds PullFlag* bits.
	SysFlag int32 `ext:"sysFlag,required"`
	// CommitOffset is the consumed offset piggybacked on the pull when
	// PullFlagCommitOffset is set.
	CommitOffset int64 `ext:"commitOffset,required"`
	// SuspendTimeoutMillis is how long the broker may hold the request
	// when nothing is there yet (long polling, PullFlagSuspend).
	SuspendTimeoutMillis int64 `ext:"suspendTimeoutMillis,required"`
	// Subscription, SubVersion and ExpressionType carry the subscription
	// when PullFlagSubscription is set.
	Subscription   string `ext:"subscription,omitempty"`
	SubVersion     int64  `ext:"subVersion"`
	ExpressionType string `ext:"expressionType,omitempty"`
	// BrokerName is RocketMQ 5's "bname", the target broker group.
	BrokerName string `ext:"bname,omitempty"`
}

// PullMessageResponseHeader is a pull answer's header
// (PullMessageResponseHeader).
type PullMessageResponseHeader struct {
	// SuggestWhichBrokerID is the member to pull from next (0 = master).
	SuggestWhichBrokerID int64 `ext:"suggestWhichBrokerId"`
	// NextBeginOffset is where the next pull of the queue starts.
	NextBeginOffset int64 `ext:"nextBeginOffset"`
	// MinOffset and MaxOffset bound the queue at the time of the pull.
	MinOffset int64 `ext:"minOffset"`
	MaxOffset int64 `ext:"maxOffset"`
	// LeaderAddr (ExtLeaderAddr) is set when a raftmq follower answered:
	// its group's leader, where the SDK reads from next. RocketMQ clients
	// ignore it and follow SuggestWhichBrokerID (the master) as they do
	// with a RocketMQ slave.
	LeaderAddr string `ext:"leaderAddr,omitempty"`
}
