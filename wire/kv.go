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

// Keys raftmq adds to GET_BROKER_RUNTIME_INFO's table (RocketMQ tools
// ignore keys they do not know). A load generator reads them before and
// after a run to charge each broker process its CPU per message.
const (
	// RuntimeProcessCPUMicros is the broker process's user+system CPU
	// time so far, in microseconds.
	RuntimeProcessCPUMicros = "processCpuMicros"
	// RuntimeProcessInstance names the OS process serving the member
	// (host, PID and start time): members of one `raftmq dev` process
	// answer the same value, so their CPU is counted once.
	RuntimeProcessInstance = "processInstance"
)
