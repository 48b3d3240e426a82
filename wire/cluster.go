package wire

import (
	"encoding/json"
	"fmt"
)

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

// EncodeClusterInfo renders cluster info; standard selects quoted map keys
// (see fastjson.go for the two forms).
func EncodeClusterInfo(ci *ClusterInfo, standard bool) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"brokerAddrTable":{`...)
	for i, name := range sortedStringKeys(ci.BrokerAddrTable) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, ':')
		bd := ci.BrokerAddrTable[name]
		b = appendBrokerData(b, &bd, standard)
	}
	b = append(b, `},"clusterAddrTable":{`...)
	for i, cluster := range sortedStringKeys(ci.ClusterAddrTable) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, cluster)
		b = append(b, ':')
		b = appendJSONStrings(b, ci.ClusterAddrTable[cluster])
	}
	return append(b, "}}"...)
}

// DecodeClusterInfo parses cluster info in either JSON form.
func DecodeClusterInfo(b []byte) (*ClusterInfo, error) {
	var ci ClusterInfo
	if err := json.Unmarshal(QuoteLegacyKeys(b), &ci); err != nil {
		return nil, fmt.Errorf("%w: cluster info: %v", ErrBadBody, err)
	}
	return &ci, nil
}
