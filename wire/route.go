package wire

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Permission bits of a topic's queues (RocketMQ PermName).
const (
	PermInherit = 1 << 0
	PermWrite   = 1 << 1
	PermRead    = 1 << 2
)

// MasterID is the brokerId of a group's master; in raftmq the Raft leader.
const MasterID int64 = 0

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

// Clone returns a deep copy, so a table's owner can hand out BrokerData
// without sharing its map.
func (b *BrokerData) Clone() BrokerData {
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

// EncodeTopicRouteData renders a route; standard selects quoted map keys
// (see fastjson.go for the two forms).
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
		b = appendJSONString(b, a)
		b = append(b, ':')
		b = appendJSONStrings(b, rd.FilterServerTable[a])
	}
	b = append(b, '}')
	if rd.OrderTopicConf != "" {
		b = append(b, `,"orderTopicConf":`...)
		b = appendJSONString(b, rd.OrderTopicConf)
	}
	b = append(b, `,"queueDatas":[`...)
	for i, q := range rd.QueueDatas {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"brokerName":`...)
		b = appendJSONString(b, q.BrokerName)
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

// MaxRouteQueues bounds the queues one topic route may list in all: a
// client builds an object per routed queue, so a route a few bytes long
// naming billions of queues must be refused rather than allocated. A broker
// routes at most 1024 queues of a topic, so a topic on 1024 broker groups
// still fits; RocketMQ sets no bound.
const MaxRouteQueues = 1 << 20

// DecodeTopicRouteData parses a route in either the legacy (unquoted integer
// keys) or the standard form. A route listing more than MaxRouteQueues
// queues is refused.
func DecodeTopicRouteData(b []byte) (*TopicRouteData, error) {
	var rd TopicRouteData
	if err := json.Unmarshal(QuoteLegacyKeys(b), &rd); err != nil {
		return nil, fmt.Errorf("%w: topic route: %v", ErrBadBody, err)
	}
	if n := rd.queueCount(); n > MaxRouteQueues {
		return nil, fmt.Errorf("%w: topic route lists more than %d queues (the most a client builds for one topic)", ErrBadBody, MaxRouteQueues)
	}
	return &rd, nil
}

// queueCount is how many queues a client builds from the route: per queue
// data the larger of its read and write counts, or the counts of the
// orderTopicConf ("brokerName:queueNums;...") that replaces them for
// sends. Each count is capped past MaxRouteQueues so the sum cannot wrap.
func (rd *TopicRouteData) queueCount() int {
	n := 0
	add := func(k int) { n += min(max(k, 0), MaxRouteQueues+1) }
	for _, q := range rd.QueueDatas {
		add(max(q.ReadQueueNums, q.WriteQueueNums))
	}
	for item := range strings.SplitSeq(rd.OrderTopicConf, ";") {
		if _, nums, ok := strings.Cut(item, ":"); ok {
			if k, err := strconv.Atoi(nums); err == nil {
				add(k)
			}
		}
	}
	return n
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
		b = appendJSONString(b, bd.BrokerAddrs[id])
	}
	b = append(b, `},"brokerName":`...)
	b = appendJSONString(b, bd.BrokerName)
	b = append(b, `,"cluster":`...)
	b = appendJSONString(b, bd.Cluster)
	b = append(b, `,"enableActingMaster":`...)
	b = strconv.AppendBool(b, bd.EnableActingMaster)
	if bd.ZoneName != "" {
		b = append(b, `,"zoneName":`...)
		b = appendJSONString(b, bd.ZoneName)
	}
	return append(b, '}')
}
