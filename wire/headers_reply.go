package wire

// Request-reply (RocketMQ 4.6+, MessageConst and MixAll): a requester
// marks its message with a correlation id, its own client id and a time
// to live; the broker that stores the request adds its cluster; the
// replier sends the reply to the cluster's reply topic with
// SEND_REPLY_MESSAGE(_V2), and that broker pushes it to the requester's
// connection with PUSH_REPLY_MESSAGE_TO_CLIENT.
const (
	// PropertyCorrelationID pairs a reply with its request.
	PropertyCorrelationID = "CORRELATION_ID"
	// PropertyReplyToClient is the requester's client id, by which a
	// broker finds its connection in the producer table.
	PropertyReplyToClient = "REPLY_TO_CLIENT"
	// PropertyMessageTTL is the request's timeout as the requester set it
	// (milliseconds from the Java client, seconds from the official Go
	// client); informational.
	PropertyMessageTTL = "TTL"
	// PropertyReplyArriveTime is set by the requester when the reply
	// arrives (milliseconds since the epoch).
	PropertyReplyArriveTime = "ARRIVE_TIME"
	// PropertyPushReplyTime is set by the broker when it pushes a reply.
	PropertyPushReplyTime = "PUSH_REPLY_TIME"
	// PropertyCluster is the cluster of the broker that stored a message;
	// a replier reads it to name the reply topic.
	PropertyCluster = "CLUSTER"
	// PropertyMessageType marks a reply (ReplyMessageFlag), which clients
	// send with SEND_REPLY_MESSAGE(_V2) instead of SEND_MESSAGE(_V2).
	PropertyMessageType = "MSG_TYPE"
	// ReplyMessageFlag is PropertyMessageType's value on replies.
	ReplyMessageFlag = "reply"
	// ReplyTopicSuffix ends every cluster's reply topic (ReplyTopic).
	ReplyTopicSuffix = "REPLY_TOPIC"
)

// ReplyTopic is the reply topic of a cluster: "<cluster>_REPLY_TOPIC".
func ReplyTopic(cluster string) string { return cluster + "_" + ReplyTopicSuffix }

// ReplyMessageRequestHeader is PUSH_REPLY_MESSAGE_TO_CLIENT's (326)
// header (RocketMQ ReplyMessageRequestHeader): the reply's send header as
// the replier sent it, plus where it was born and stored. The body is the
// reply's body as sent (compressed when SysFlag says so).
type ReplyMessageRequestHeader struct {
	ProducerGroup         string `ext:"producerGroup,required"`
	Topic                 string `ext:"topic,required"`
	DefaultTopic          string `ext:"defaultTopic,required"`
	DefaultTopicQueueNums int32  `ext:"defaultTopicQueueNums,required"`
	QueueID               int32  `ext:"queueId,required"`
	SysFlag               int32  `ext:"sysFlag,required"`
	BornTimestamp         int64  `ext:"bornTimestamp,required"`
	Flag                  int32  `ext:"flag,required"`
	// Properties are the reply's properties (EncodeProperties), with
	// PropertyPushReplyTime added by the broker.
	Properties     string `ext:"properties"`
	ReconsumeTimes int32  `ext:"reconsumeTimes"`
	UnitMode       bool   `ext:"unitMode"`
	// BornHost is the replier's address, StoreHost the broker's
	// ("ip:port"); StoreTimestamp is when the broker pushed.
	BornHost       string `ext:"bornHost,required"`
	StoreHost      string `ext:"storeHost,required"`
	StoreTimestamp int64  `ext:"storeTimestamp,required"`
}
