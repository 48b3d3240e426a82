package broker

import "github.com/raftmq/raftmq/wire"

// The replicated tables are persisted twice: as Raft command entries
// (CmdUpdateTopic, CmdUpdateGroup) and in snapshots (stateImage). Both use
// the record types below, not the wire types they mirror, so that changing
// a wire struct (a RocketMQ field added, a JSON tag fixed) cannot change the
// bytes of logs and snapshots already on disk. The JSON names are frozen:
// they are the names the entries were first written with. Every record
// field is converted explicitly; TestRecordsCarryEveryWireField fails when
// a wire type gains a field that no record carries.

// topicRecord is a topic config in a CmdUpdateTopic entry (version 1) and in
// a snapshot's topic table.
type topicRecord struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int               `json:"readQueueNums"`
	WriteQueueNums  int               `json:"writeQueueNums"`
	Perm            int               `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int               `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes,omitempty"`
}

func topicRecordOf(tc wire.TopicConfig) topicRecord {
	return topicRecord{
		TopicName: tc.TopicName, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
		Perm: tc.Perm, TopicFilterType: tc.TopicFilterType, TopicSysFlag: tc.TopicSysFlag,
		Order: tc.Order, Attributes: tc.Attributes,
	}
}

func (r topicRecord) config() wire.TopicConfig {
	return wire.TopicConfig{
		TopicName: r.TopicName, ReadQueueNums: r.ReadQueueNums, WriteQueueNums: r.WriteQueueNums,
		Perm: r.Perm, TopicFilterType: r.TopicFilterType, TopicSysFlag: r.TopicSysFlag,
		Order: r.Order, Attributes: r.Attributes,
	}
}

// groupRecord is a subscription group config in a CmdUpdateGroup entry
// (version 1) and in a snapshot's group table.
type groupRecord struct {
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

func groupRecordOf(g wire.SubscriptionGroupConfig) groupRecord {
	return groupRecord{
		GroupName: g.GroupName, ConsumeEnable: g.ConsumeEnable, ConsumeFromMinEnable: g.ConsumeFromMinEnable,
		ConsumeBroadcastEnable: g.ConsumeBroadcastEnable, ConsumeMessageOrderly: g.ConsumeMessageOrderly,
		RetryQueueNums: g.RetryQueueNums, RetryMaxTimes: g.RetryMaxTimes, BrokerID: g.BrokerID,
		WhichBrokerWhenConsumeSlowly:   g.WhichBrokerWhenConsumeSlowly,
		NotifyConsumerIdsChangedEnable: g.NotifyConsumerIdsChangedEnable, GroupSysFlag: g.GroupSysFlag,
	}
}

func (r groupRecord) config() wire.SubscriptionGroupConfig {
	return wire.SubscriptionGroupConfig{
		GroupName: r.GroupName, ConsumeEnable: r.ConsumeEnable, ConsumeFromMinEnable: r.ConsumeFromMinEnable,
		ConsumeBroadcastEnable: r.ConsumeBroadcastEnable, ConsumeMessageOrderly: r.ConsumeMessageOrderly,
		RetryQueueNums: r.RetryQueueNums, RetryMaxTimes: r.RetryMaxTimes, BrokerID: r.BrokerID,
		WhichBrokerWhenConsumeSlowly:   r.WhichBrokerWhenConsumeSlowly,
		NotifyConsumerIdsChangedEnable: r.NotifyConsumerIdsChangedEnable, GroupSysFlag: r.GroupSysFlag,
	}
}

// versionRecord is the topic table's data version in a snapshot.
type versionRecord struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

func versionRecordOf(v wire.DataVersion) versionRecord {
	return versionRecord{StateVersion: v.StateVersion, Timestamp: v.Timestamp, Counter: v.Counter}
}

func (r versionRecord) dataVersion() wire.DataVersion {
	return wire.DataVersion{StateVersion: r.StateVersion, Timestamp: r.Timestamp, Counter: r.Counter}
}
