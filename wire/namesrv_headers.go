package wire

// Request and response headers of the name server's request codes, as
// `ext`-tagged structs for remoting's DecodeHeader/EncodeHeader. Field names
// are RocketMQ's (remoting/protocol/header/namesrv/*.java). The name server
// decodes requests and encodes answers with them; brokers, the SDK and admin
// tools build requests and read answers with the same structs.

// RegisterBrokerRequestHeader is REGISTER_BROKER's (103) header.
type RegisterBrokerRequestHeader struct {
	BrokerName   string `ext:"brokerName,required"`
	BrokerAddr   string `ext:"brokerAddr,required"`
	ClusterName  string `ext:"clusterName,required"`
	HAServerAddr string `ext:"haServerAddr"`
	BrokerID     int64  `ext:"brokerId,required"`
	// HeartbeatTimeoutMillis overrides the name server's expiry for this
	// broker when positive.
	HeartbeatTimeoutMillis int64 `ext:"heartbeatTimeoutMillis,omitempty"`
	// Compressed says the body is RegisterBrokerBody's zlib layout.
	Compressed bool `ext:"compressed"`
	// BodyCrc32 is UtilAll.crc32(body) (CRC-32 IEEE & 0x7FFFFFFF); 0 skips
	// the check.
	BodyCrc32 int32 `ext:"bodyCrc32"`
}

// RegisterBrokerResponseHeader is REGISTER_BROKER's answer: it tells a
// slave where its master is.
type RegisterBrokerResponseHeader struct {
	HAServerAddr string `ext:"haServerAddr,omitempty"`
	MasterAddr   string `ext:"masterAddr,omitempty"`
	// Ignored is raftmq's: the name server kept another address's newer
	// registration of the brokerId (RocketMQ answers SUCCESS and says
	// nothing). A raftmq broker registers again soon rather than a period
	// later; RocketMQ's brokers ignore the field.
	Ignored bool `ext:"raftmqRegistrationIgnored,omitempty"`
}

// UnregisterBrokerRequestHeader is UNREGISTER_BROKER's (104) header: one
// broker address to drop.
type UnregisterBrokerRequestHeader struct {
	Cluster    string `ext:"clusterName,required"`
	BrokerAddr string `ext:"brokerAddr,required"`
	BrokerName string `ext:"brokerName,required"`
	BrokerID   int64  `ext:"brokerId,required"`
}

// BrokerHeartbeatRequestHeader is BROKER_HEARTBEAT's (904) header.
type BrokerHeartbeatRequestHeader struct {
	ClusterName string `ext:"clusterName,required"`
	BrokerAddr  string `ext:"brokerAddr,required"`
	BrokerName  string `ext:"brokerName,required"`
	BrokerID    int64  `ext:"brokerId,omitempty"`
}

// QueryDataVersionRequestHeader is QUERY_DATA_VERSION's (322) header; the
// body is the broker's DataVersion JSON.
type QueryDataVersionRequestHeader struct {
	BrokerName  string `ext:"brokerName,required"`
	BrokerAddr  string `ext:"brokerAddr,required"`
	ClusterName string `ext:"clusterName,required"`
	BrokerID    int64  `ext:"brokerId,required"`
}

// QueryDataVersionResponseHeader is QUERY_DATA_VERSION's answer: whether
// the broker's data version differs from the registered one.
type QueryDataVersionResponseHeader struct {
	Changed bool `ext:"changed"`
}

// GetRouteInfoRequestHeader is GET_ROUTEINFO_BY_TOPIC's (105) header.
type GetRouteInfoRequestHeader struct {
	Topic string `ext:"topic,required"`
	// AcceptStandardJsonOnly asks for quoted map keys whatever the version.
	AcceptStandardJsonOnly bool `ext:"acceptStandardJsonOnly,omitempty"`
}

// BrokerNameRequestHeader is the header of WIPE_WRITE_PERM_OF_BROKER (205)
// and ADD_WRITE_PERM_OF_BROKER (327).
type BrokerNameRequestHeader struct {
	BrokerName string `ext:"brokerName,required"`
}

// WipeWritePermResponseHeader is WIPE_WRITE_PERM_OF_BROKER's answer.
type WipeWritePermResponseHeader struct {
	WipeTopicCount int `ext:"wipeTopicCount"`
}

// AddWritePermResponseHeader is ADD_WRITE_PERM_OF_BROKER's answer.
type AddWritePermResponseHeader struct {
	AddTopicCount int `ext:"addTopicCount"`
}

// GetTopicsByClusterRequestHeader is GET_TOPICS_BY_CLUSTER's (224) header.
type GetTopicsByClusterRequestHeader struct {
	Cluster string `ext:"cluster,required"`
}

// DeleteTopicFromNamesrvRequestHeader is DELETE_TOPIC_IN_NAMESRV's (216)
// header; an empty ClusterName deletes the topic everywhere.
type DeleteTopicFromNamesrvRequestHeader struct {
	Topic       string `ext:"topic,required"`
	ClusterName string `ext:"clusterName,omitempty"`
}

// RegisterTopicRequestHeader is REGISTER_TOPIC_IN_NAMESRV's (217) header;
// the body is a TopicRouteData whose queueDatas are registered.
type RegisterTopicRequestHeader struct {
	Topic string `ext:"topic,required"`
}

// KVConfigRequestHeader is the header of GET_KV_CONFIG (101) and
// DELETE_KV_CONFIG (102).
type KVConfigRequestHeader struct {
	Namespace string `ext:"namespace,required"`
	Key       string `ext:"key,required"`
}

// PutKVConfigRequestHeader is the header of PUT_KV_CONFIG (100). The value
// is required, as RocketMQ's (@CFNotNull): a put that names none is
// refused, not stored as "". An empty value sent as such is stored.
type PutKVConfigRequestHeader struct {
	Namespace string `ext:"namespace,required"`
	Key       string `ext:"key,required"`
	Value     string `ext:"value,required"`
}

// GetKVConfigResponseHeader is GET_KV_CONFIG's answer.
type GetKVConfigResponseHeader struct {
	Value string `ext:"value"`
}

// GetKVListByNamespaceRequestHeader is GET_KVLIST_BY_NAMESPACE's (219) header.
type GetKVListByNamespaceRequestHeader struct {
	Namespace string `ext:"namespace,required"`
}
