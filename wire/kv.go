package wire

// NamespaceOrderTopicConfig is the KV namespace whose keys are topics and
// whose values are "brokerName:queueNums;..." order configurations
// (RocketMQ NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG).
const NamespaceOrderTopicConfig = "ORDER_TOPIC_CONFIG"

// KVTable is the answer to GET_KVLIST_BY_NAMESPACE (219) and to the
// broker's GET_BROKER_RUNTIME_INFO (28).
type KVTable struct {
	Table map[string]string `json:"table"`
}
