package namesrv

// Permission bits of a topic's queues (RocketMQ PermName).
const (
	PermInherit = 1 << 0
	PermWrite   = 1 << 1
	PermRead    = 1 << 2
)

// MasterID is the brokerId of a group's master; in raftmq the Raft leader.
const MasterID int64 = 0

// NamespaceOrderTopicConfig is the KV namespace whose keys are topics and
// whose values are "brokerName:queueNums;..." order configurations
// (RocketMQ NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG).
const NamespaceOrderTopicConfig = "ORDER_TOPIC_CONFIG"

// DataVersion identifies one state of a broker's topic configuration. Brokers
// bump it on every topic change; the name server rebuilds a broker's queue
// data only when it changes (RocketMQ DataVersion, compared field by field).
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// TopicConfig is one topic as a broker reports it when registering.
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

// TopicConfigSerializeWrapper is a broker's whole topic table plus the data
// version it belongs to.
type TopicConfigSerializeWrapper struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion            `json:"dataVersion"`
}

// RegisterBrokerBody is the body of REGISTER_BROKER (103).
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
	// FilterServerList replaces the broker's filter servers; empty clears
	// them (a missing field reads as empty, as in RocketMQ).
	FilterServerList []string `json:"filterServerList"`
}

// QueueData is one broker's share of a topic in a route.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

// BrokerData is one broker group: its name, cluster and the address of each
// member by brokerId (0 = master).
type BrokerData struct {
	Cluster            string           `json:"cluster"`
	BrokerName         string           `json:"brokerName"`
	BrokerAddrs        map[int64]string `json:"brokerAddrs"`
	ZoneName           string           `json:"zoneName,omitempty"`
	EnableActingMaster bool             `json:"enableActingMaster"`
}

// clone returns a deep copy so callers never share the table's map.
func (b *BrokerData) clone() BrokerData {
	c := *b
	c.BrokerAddrs = make(map[int64]string, len(b.BrokerAddrs))
	for id, addr := range b.BrokerAddrs {
		c.BrokerAddrs[id] = addr
	}
	return c
}

// TopicRouteData is the answer to GET_ROUTEINFO_BY_TOPIC (105).
type TopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []QueueData         `json:"queueDatas"`
	BrokerDatas       []BrokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// ClusterInfo is the answer to GET_BROKER_CLUSTER_INFO (106).
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// TopicList is the body of the topic-list answers (206, 224).
type TopicList struct {
	TopicList  []string `json:"topicList"`
	BrokerAddr string   `json:"brokerAddr,omitempty"`
}

// KVTable is the answer to GET_KVLIST_BY_NAMESPACE (219).
type KVTable struct {
	Table map[string]string `json:"table"`
}
