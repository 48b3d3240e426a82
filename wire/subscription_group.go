package wire

import "strings"

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

// builtInGroups are the groups a RocketMQ broker creates at start
// (SubscriptionGroupManager.init), which its tools (TOOLS_CONSUMER) and
// rocketmq-dashboard count as system groups.
var builtInGroups = map[string]bool{
	"TOOLS_CONSUMER": true, "FILTERSRV_CONSUMER": true, "SELF_TEST_C_GROUP": true, "CID_ONS-HTTP-PROXY": true,
	"CID_ONSAPI_PULL": true, "CID_ONSAPI_PERMISSION": true, "CID_ONSAPI_OWNER": true, "CID_RMQ_SYS_TRANS": true,
}

// SystemGroupPrefix starts the names of RocketMQ's system consumer groups
// (MixAll.CID_RMQ_SYS_PREFIX).
const SystemGroupPrefix = "CID_RMQ_SYS_"

// IsSystemGroup reports whether group is one of RocketMQ's built-in or
// system consumer groups, which a broker serves whether or not
// autoCreateSubscriptionGroup is on.
func IsSystemGroup(group string) bool {
	return builtInGroups[group] || strings.HasPrefix(group, SystemGroupPrefix)
}
