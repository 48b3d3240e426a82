package wire

// SubscriptionGroupConfig mirrors RocketMQ's SubscriptionGroupConfig (JSON
// field names as RocketMQ writes them): the body of
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) and the entries of
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201).
type SubscriptionGroupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool   `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32  `json:"retryQueueNums"`
	RetryMaxTimes                  int32  `json:"retryMaxTimes"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int32  `json:"groupSysFlag"`
}

// DefaultSubscriptionGroupConfig returns RocketMQ's defaults for an
// auto-created group (retry queue 1, 16 retries).
func DefaultSubscriptionGroupConfig(group string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{
		GroupName:                      group,
		ConsumeEnable:                  true,
		ConsumeFromMinEnable:           true,
		ConsumeBroadcastEnable:         true,
		RetryQueueNums:                 1,
		RetryMaxTimes:                  16,
		WhichBrokerWhenConsumeSlowly:   1,
		NotifyConsumerIdsChangedEnable: true,
	}
}

// SubscriptionGroupWrapper is the body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG
// (201): every group of a broker and the data version it belongs to.
type SubscriptionGroupWrapper struct {
	SubscriptionGroupTable map[string]SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	DataVersion            DataVersion                        `json:"dataVersion"`
}
