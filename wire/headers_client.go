package wire

// ConsumerGroupRequestHeader names a consumer group:
// GET_CONSUMER_LIST_BY_GROUP (38), GET_CONSUMER_CONNECTION_LIST (203) and
// the broker's NOTIFY_CONSUMER_IDS_CHANGED (40).
type ConsumerGroupRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
}

// UnregisterClientRequestHeader is UNREGISTER_CLIENT's (35) header.
type UnregisterClientRequestHeader struct {
	ClientID      string `ext:"clientID,required"`
	ProducerGroup string `ext:"producerGroup,omitempty"`
	ConsumerGroup string `ext:"consumerGroup,omitempty"`
}

// ConsumerSendMsgBackRequestHeader is CONSUMER_SEND_MSG_BACK's (36) header:
// a message the consumer failed goes back for redelivery.
type ConsumerSendMsgBackRequestHeader struct {
	// Offset is the message's CommitLog offset.
	Offset int64  `ext:"offset,required"`
	Group  string `ext:"group,required"`
	// DelayLevel is the redelivery delay level; 0 lets the broker pick
	// from the reconsume count, -1 sends straight to the DLQ.
	DelayLevel  int32  `ext:"delayLevel,required"`
	OriginMsgID string `ext:"originMsgId"`
	OriginTopic string `ext:"originTopic"`
	UnitMode    bool   `ext:"unitMode"`
	// MaxReconsumeTimes bounds redeliveries before the DLQ.
	MaxReconsumeTimes int32  `ext:"maxReconsumeTimes"`
	BrokerName        string `ext:"bname,omitempty"`
}
