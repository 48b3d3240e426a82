package wire

// DataVersion identifies one state of a broker's topic configuration. Brokers
// bump it on every topic change; the name server rebuilds a broker's queue
// data only when it changes (RocketMQ DataVersion, compared field by field).
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// TopicConfig is one topic as a broker reports it when registering, and as
// the topic-config admin answers carry it.
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
