package wire

import (
	"encoding/json"
	"slices"
)

// HeartbeatData is HEART_BEAT's (34) JSON body (RocketMQ HeartbeatData):
// a client's producer and consumer groups, which the broker keeps to
// route replies, filter pulls and rebalance groups.
type HeartbeatData struct {
	// ClientID is the client instance's id (ip@instance).
	ClientID string `json:"clientID"`
	// ProducerDataSet lists the client's producer groups.
	ProducerDataSet []HeartbeatProducerData `json:"producerDataSet"`
	// ConsumerDataSet lists the client's consumer groups.
	ConsumerDataSet []HeartbeatConsumerData `json:"consumerDataSet"`
}

// HeartbeatProducerData names one producer group of the client
// (RocketMQ ProducerData).
type HeartbeatProducerData struct {
	// GroupName is the producer group.
	GroupName string `json:"groupName"`
}

// HeartbeatConsumerData is one consumer group of the client with its
// subscriptions (RocketMQ ConsumerData). The enum fields hold Java's enum
// names as strings so a value this package does not know still round-trips.
type HeartbeatConsumerData struct {
	// GroupName is the consumer group.
	GroupName string `json:"groupName"`
	// ConsumeType is ConsumeTypePush or ConsumeTypePull.
	ConsumeType string `json:"consumeType"`
	// MessageModel is MessageModel.String(): "CLUSTERING" or "BROADCASTING".
	MessageModel string `json:"messageModel"`
	// ConsumeFromWhere is ConsumeFromWhere.String(), e.g. CONSUME_FROM_LAST_OFFSET.
	ConsumeFromWhere string `json:"consumeFromWhere"`
	// SubscriptionDataSet holds the group's subscriptions.
	SubscriptionDataSet []*SubscriptionData `json:"subscriptionDataSet"`
	// UnitMode is RocketMQ's unit mode flag (always false here).
	UnitMode bool `json:"unitMode"`
}

// Consume types of HeartbeatConsumerData (RocketMQ ConsumeType).
const (
	ConsumeTypePush = "CONSUME_PASSIVELY"
	ConsumeTypePull = "CONSUME_ACTIVELY"
)

// MessageModel says how a group shares a topic (RocketMQ's MessageModel).
type MessageModel int

const (
	// Clustering: each message goes to one consumer of the group; queues
	// are divided by rebalancing and offsets live on the brokers.
	Clustering MessageModel = iota
	// Broadcasting: every consumer of the group gets every message; each
	// keeps its own offsets in a local file.
	Broadcasting
)

// String returns RocketMQ's enum name, as sent in heartbeats.
func (m MessageModel) String() string {
	if m == Broadcasting {
		return "BROADCASTING"
	}
	return "CLUSTERING"
}

// ConsumeFromWhere says where a group with no recorded offset for a queue
// starts (RocketMQ's ConsumeFromWhere).
type ConsumeFromWhere int

const (
	// ConsumeFromLastOffset starts at the queue's end: only new messages.
	ConsumeFromLastOffset ConsumeFromWhere = iota
	// ConsumeFromFirstOffset starts at the oldest message still stored.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// a given time (SEARCH_OFFSET_BY_TIMESTAMP, 29).
	ConsumeFromTimestamp
)

// String returns RocketMQ's enum name, as sent in heartbeats.
func (w ConsumeFromWhere) String() string {
	switch w {
	case ConsumeFromFirstOffset:
		return "CONSUME_FROM_FIRST_OFFSET"
	case ConsumeFromTimestamp:
		return "CONSUME_FROM_TIMESTAMP"
	}
	return "CONSUME_FROM_LAST_OFFSET"
}

// SubAll is the expression that matches every tag.
const SubAll = "*"

// Expression types of SubscriptionData (RocketMQ ExpressionType).
const (
	// ExpressionTypeTag selects by tag: "*" or "TagA || TagB". An empty
	// type means TAG too.
	ExpressionTypeTag = "TAG"
	// ExpressionTypeSQL92 selects by a SQL92 condition over message
	// properties; brokers need enablePropertyFilter=true.
	ExpressionTypeSQL92 = "SQL92"
)

// CheckClientRequestBody is CHECK_CLIENT_CONFIG's (46) JSON body (RocketMQ
// CheckClientRequestBody): a consumer asks a broker at start whether it
// can serve one subscription (SQL92 filtering on, expression valid).
type CheckClientRequestBody struct {
	// ClientID is the asking client instance's id.
	ClientID string `json:"clientId"`
	// Group is the consumer group.
	Group string `json:"group"`
	// SubscriptionData is the subscription to check.
	SubscriptionData *SubscriptionData `json:"subscriptionData"`
}

// SubscriptionData is one topic subscription of a consumer group, as it
// travels in heartbeats and pull requests (RocketMQ's SubscriptionData).
type SubscriptionData struct {
	// ClassFilterMode is RocketMQ's removed class filter; always false.
	ClassFilterMode bool `json:"classFilterMode"`
	// Topic is the subscribed topic.
	Topic string `json:"topic"`
	// SubString is the expression as given ("TagA || TagB", "*").
	SubString string `json:"subString"`
	// TagsSet holds the tags of a tag expression; empty means all.
	TagsSet []string `json:"tagsSet"`
	// CodeSet holds the Java String.hashCode (TagsHashCode) of each tag,
	// which brokers filter consume-queue entries on. It is kept as the JSON
	// the client sent — Java clients send numbers, the official Go client
	// numeric strings — so a broker hands back what it got.
	CodeSet json.RawMessage `json:"codeSet,omitempty"`
	// SubVersion orders subscription changes (creation time in ms).
	SubVersion int64 `json:"subVersion"`
	// ExpressionType is "TAG" or "SQL92".
	ExpressionType string `json:"expressionType"`
}

// MatchesTag reports whether a message with tags passes the subscription,
// the client-side re-check of PullAPIWrapper.processPullResult (brokers
// filter on hash codes, which can collide): everything passes a "*"
// subscription; otherwise the message's tags must be one of TagsSet.
func (s *SubscriptionData) MatchesTag(tags string) bool {
	if len(s.TagsSet) == 0 {
		return true
	}
	return tags != "" && slices.Contains(s.TagsSet, tags)
}

// JSON renders the subscription as brokers expect it in heartbeats.
func (s *SubscriptionData) JSON() []byte {
	b, _ := json.Marshal(s)
	return b
}

// ConsumerListBody is GET_CONSUMER_LIST_BY_GROUP's (38) answer body
// (GetConsumerListByGroupResponseBody).
type ConsumerListBody struct {
	// ConsumerIDList holds the client ids of the group's live consumers.
	ConsumerIDList []string `json:"consumerIdList"`
}

// ConsumerConnection is GET_CONSUMER_CONNECTION_LIST's (203) answer body
// (RocketMQ ConsumerConnection).
type ConsumerConnection struct {
	// ConnectionSet lists the group's connected clients.
	ConnectionSet []Connection `json:"connectionSet"`
	// SubscriptionTable is the group's subscriptions by topic.
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"`
	// ConsumeType, MessageModel and ConsumeFromWhere are the enum names
	// of the group's last heartbeat.
	ConsumeType      string `json:"consumeType"`
	MessageModel     string `json:"messageModel"`
	ConsumeFromWhere string `json:"consumeFromWhere"`
}

// Connection is one client connection of ConsumerConnection.
type Connection struct {
	// ClientID is the client instance's id.
	ClientID string `json:"clientId"`
	// ClientAddr is the connection's remote "ip:port".
	ClientAddr string `json:"clientAddr"`
	// Language is the client's language code name (GO, JAVA, ...).
	Language string `json:"language"`
	// Version is the client's protocol version.
	Version int `json:"version"`
}

// LockBatchBody is LOCK_BATCH_MQ's (41) and UNLOCK_BATCH_MQ's (42)
// request body (LockBatchRequestBody / UnlockBatchRequestBody).
type LockBatchBody struct {
	// ConsumerGroup and ClientID name the lock holder.
	ConsumerGroup string `json:"consumerGroup"`
	ClientID      string `json:"clientId"`
	// OnlyThisBroker is RocketMQ's flag not to relay to other brokers.
	OnlyThisBroker bool `json:"onlyThisBroker"`
	// MQSet holds the queues to lock or unlock.
	MQSet []MessageQueue `json:"mqSet"`
}

// LockBatchResponse is LOCK_BATCH_MQ's answer body (LockBatchResponseBody).
type LockBatchResponse struct {
	// LockOKMQSet holds the queues the broker granted.
	LockOKMQSet []MessageQueue `json:"lockOKMQSet"`
}
