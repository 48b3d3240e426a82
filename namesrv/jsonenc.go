package namesrv

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// JSON for routes and cluster info is written by hand because RocketMQ's
// fastjson default writes Map<Long,String> keys unquoted
// ({0:"127.0.0.1:10911"}), which encoding/json can neither produce nor read.
// Old clients (request version < V4_9_4) get exactly that legacy form; newer
// ones, or any request with acceptStandardJsonOnly=true, get standard JSON.
// Fields are written in alphabetical order, as fastjson does.

// legacyJSONVersionCutoff is MQVersion.Version.V4_9_4.ordinal(): requests at
// or above it get standard JSON (ClientRequestProcessor.getRouteInfoByTopic).
const legacyJSONVersionCutoff = 401

// EncodeTopicRouteData renders a route; standard selects quoted map keys.
func EncodeTopicRouteData(rd *TopicRouteData, standard bool) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"brokerDatas":[`...)
	for i := range rd.BrokerDatas {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendBrokerData(b, &rd.BrokerDatas[i], standard)
	}
	b = append(b, `],"filterServerTable":{`...)
	addrs := make([]string, 0, len(rd.FilterServerTable))
	for a := range rd.FilterServerTable {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for i, a := range addrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, a)
		b = append(b, ':')
		b = appendStrings(b, rd.FilterServerTable[a])
	}
	b = append(b, '}')
	if rd.OrderTopicConf != "" {
		b = append(b, `,"orderTopicConf":`...)
		b = appendString(b, rd.OrderTopicConf)
	}
	b = append(b, `,"queueDatas":[`...)
	for i, q := range rd.QueueDatas {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"brokerName":`...)
		b = appendString(b, q.BrokerName)
		b = append(b, `,"perm":`...)
		b = strconv.AppendInt(b, int64(q.Perm), 10)
		b = append(b, `,"readQueueNums":`...)
		b = strconv.AppendInt(b, int64(q.ReadQueueNums), 10)
		b = append(b, `,"topicSysFlag":`...)
		b = strconv.AppendInt(b, int64(q.TopicSysFlag), 10)
		b = append(b, `,"writeQueueNums":`...)
		b = strconv.AppendInt(b, int64(q.WriteQueueNums), 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// EncodeClusterInfo renders cluster info; standard selects quoted map keys.
func EncodeClusterInfo(ci *ClusterInfo, standard bool) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"brokerAddrTable":{`...)
	for i, name := range sortedKeys(ci.BrokerAddrTable) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, ':')
		bd := ci.BrokerAddrTable[name]
		b = appendBrokerData(b, &bd, standard)
	}
	b = append(b, `},"clusterAddrTable":{`...)
	for i, cluster := range sortedKeys(ci.ClusterAddrTable) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, cluster)
		b = append(b, ':')
		b = appendStrings(b, ci.ClusterAddrTable[cluster])
	}
	return append(b, "}}"...)
}

func appendBrokerData(b []byte, bd *BrokerData, standard bool) []byte {
	b = append(b, `{"brokerAddrs":{`...)
	ids := make([]int64, 0, len(bd.BrokerAddrs))
	for id := range bd.BrokerAddrs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		if standard {
			b = append(b, '"')
		}
		b = strconv.AppendInt(b, id, 10)
		if standard {
			b = append(b, '"')
		}
		b = append(b, ':')
		b = appendString(b, bd.BrokerAddrs[id])
	}
	b = append(b, `},"brokerName":`...)
	b = appendString(b, bd.BrokerName)
	b = append(b, `,"cluster":`...)
	b = appendString(b, bd.Cluster)
	b = append(b, `,"enableActingMaster":`...)
	b = strconv.AppendBool(b, bd.EnableActingMaster)
	if bd.ZoneName != "" {
		b = append(b, `,"zoneName":`...)
		b = appendString(b, bd.ZoneName)
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // marshalling a string cannot fail
	return append(b, q...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DecodeTopicRouteData parses a route in either the legacy (unquoted integer
// keys) or the standard form, for Go callers such as the admin CLI.
func DecodeTopicRouteData(b []byte) (*TopicRouteData, error) {
	var rd TopicRouteData
	if err := json.Unmarshal(QuoteLegacyKeys(b), &rd); err != nil {
		return nil, fmt.Errorf("%w: topic route: %v", ErrBadBody, err)
	}
	return &rd, nil
}

// DecodeClusterInfo parses cluster info in either JSON form.
func DecodeClusterInfo(b []byte) (*ClusterInfo, error) {
	var ci ClusterInfo
	if err := json.Unmarshal(QuoteLegacyKeys(b), &ci); err != nil {
		return nil, fmt.Errorf("%w: cluster info: %v", ErrBadBody, err)
	}
	return &ci, nil
}

// QuoteLegacyKeys rewrites fastjson's unquoted numeric object keys
// ({0:"a"}) as standard JSON ({"0":"a"}); standard input comes back
// unchanged. It tracks only what it must: whether it is inside a string and
// whether the next token in the current object is a key.
func QuoteLegacyKeys(in []byte) []byte {
	out := make([]byte, 0, len(in)+16)
	var stack []byte // '{' or '[' per open container
	expectKey := false
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '"':
			// Copy the whole string, honouring escapes.
			j := i + 1
			for j < len(in) && in[j] != '"' {
				if in[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(in) {
				return append(out, in[i:]...)
			}
			out = append(out, in[i:j+1]...)
			i = j
			expectKey = false
			continue
		case c == '{':
			stack = append(stack, c)
			expectKey = true
		case c == '[':
			stack = append(stack, c)
			expectKey = false
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case c == ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
		case c == ':':
			expectKey = false
		case expectKey && (c == '-' || (c >= '0' && c <= '9')):
			j := i + 1
			for j < len(in) && in[j] >= '0' && in[j] <= '9' {
				j++
			}
			out = append(out, '"')
			out = append(out, in[i:j]...)
			out = append(out, '"')
			i = j - 1
			expectKey = false
			continue
		}
		out = append(out, c)
	}
	return out
}
