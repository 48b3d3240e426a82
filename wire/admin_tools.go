package wire

import "encoding/json"

// Headers and bodies of the requests RocketMQ's operator tools send
// (mqadmin, rocketmq-dashboard, rocketmq-exporter): broker stats, producer
// connections, consumer running info, consume-queue inspection, group
// offset cloning. Field names are those of RocketMQ's classes (named in
// each comment), because the tools decode them by name.

// Stats names of VIEW_BROKER_STATS_DATA (BrokerStatsManager): the key is
// a topic, "topic@group" or the cluster name, as noted.
const (
	StatsTopicPutNums  = "TOPIC_PUT_NUMS"  // key: topic
	StatsTopicPutSize  = "TOPIC_PUT_SIZE"  // key: topic
	StatsGroupGetNums  = "GROUP_GET_NUMS"  // key: topic@group
	StatsGroupGetSize  = "GROUP_GET_SIZE"  // key: topic@group
	StatsSndbckPutNums = "SNDBCK_PUT_NUMS" // key: topic@group
	StatsBrokerPutNums = "BROKER_PUT_NUMS" // key: cluster name
	StatsBrokerGetNums = "BROKER_GET_NUMS" // key: cluster name
)

// ViewBrokerStatsDataRequestHeader is VIEW_BROKER_STATS_DATA's (315)
// header (ViewBrokerStatsDataRequestHeader).
type ViewBrokerStatsDataRequestHeader struct {
	StatsName string `ext:"statsName,required"`
	StatsKey  string `ext:"statsKey,required"`
}

// BrokerStatsItem is one window of BrokerStatsData: the count in the
// window, its rate per second and the average count per sample.
type BrokerStatsItem struct {
	Sum   int64   `json:"sum"`
	Tps   float64 `json:"tps"`
	Avgpt float64 `json:"avgpt"`
}

// BrokerStatsData is VIEW_BROKER_STATS_DATA's answer (BrokerStatsData):
// the last minute, hour and day of one stats item.
type BrokerStatsData struct {
	StatsMinute BrokerStatsItem `json:"statsMinute"`
	StatsHour   BrokerStatsItem `json:"statsHour"`
	StatsDay    BrokerStatsItem `json:"statsDay"`
}

// GetConsumeStatsInBrokerHeader is GET_BROKER_CONSUME_STATS's (317)
// header (GetConsumeStatsInBrokerHeader): only ordered topics when IsOrder.
type GetConsumeStatsInBrokerHeader struct {
	IsOrder bool `ext:"isOrder,required"`
}

// GetProducerConnectionListRequestHeader is GET_PRODUCER_CONNECTION_LIST's
// (204) header.
type GetProducerConnectionListRequestHeader struct {
	ProducerGroup string `ext:"producerGroup,required"`
}

// ProducerConnection is GET_PRODUCER_CONNECTION_LIST's answer
// (ProducerConnection).
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}

// ProducerInfo is one producer of GET_ALL_PRODUCER_INFO's answer
// (ProducerInfo).
type ProducerInfo struct {
	ClientID            string `json:"clientId"`
	RemoteIP            string `json:"remoteIP"`
	Language            string `json:"language"`
	Version             int    `json:"version"`
	LastUpdateTimestamp int64  `json:"lastUpdateTimestamp"`
}

// ProducerTableInfo is GET_ALL_PRODUCER_INFO's (328) answer
// (ProducerTableInfo): producers by group.
type ProducerTableInfo struct {
	Data map[string][]ProducerInfo `json:"data"`
}

// GetConsumerRunningInfoRequestHeader is GET_CONSUMER_RUNNING_INFO's (307)
// header; the broker forwards the request to the named client.
type GetConsumerRunningInfoRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	ClientID      string `ext:"clientId,required"`
	JstackEnable  bool   `ext:"jstackEnable"`
}

// Property names of ConsumerRunningInfo.properties (ConsumerRunningInfo).
const (
	PropNamesrvAddr            = "PROP_NAMESERVER_ADDR"
	PropThreadPoolCoreSize     = "PROP_THREADPOOL_CORE_SIZE"
	PropConsumeOrderly         = "PROP_CONSUMEORDERLY"
	PropConsumeType            = "PROP_CONSUME_TYPE"
	PropClientVersion          = "PROP_CLIENT_VERSION"
	PropConsumerStartTimestamp = "PROP_CONSUMER_START_TIMESTAMP"
)

// ConsumeStatus is one topic's rates in ConsumerRunningInfo.statusTable
// (ConsumeStatus): RT in ms, TPS per second.
type ConsumeStatus struct {
	PullRT            float64 `json:"pullRT"`
	PullTPS           float64 `json:"pullTPS"`
	ConsumeRT         float64 `json:"consumeRT"`
	ConsumeOKTPS      float64 `json:"consumeOKTPS"`
	ConsumeFailedTPS  float64 `json:"consumeFailedTPS"`
	ConsumeFailedMsgs int64   `json:"consumeFailedMsgs"`
}

// ProcessQueueInfo is one queue's state in ConsumerRunningInfo.mqTable
// (ProcessQueueInfo).
type ProcessQueueInfo struct {
	CommitOffset            int64 `json:"commitOffset"`
	CachedMsgMinOffset      int64 `json:"cachedMsgMinOffset"`
	CachedMsgMaxOffset      int64 `json:"cachedMsgMaxOffset"`
	CachedMsgCount          int   `json:"cachedMsgCount"`
	CachedMsgSizeInMiB      int   `json:"cachedMsgSizeInMiB"`
	TransactionMsgMinOffset int64 `json:"transactionMsgMinOffset"`
	TransactionMsgMaxOffset int64 `json:"transactionMsgMaxOffset"`
	TransactionMsgCount     int   `json:"transactionMsgCount"`
	Locked                  bool  `json:"locked"`
	TryUnlockTimes          int64 `json:"tryUnlockTimes"`
	LastLockTimestamp       int64 `json:"lastLockTimestamp"`
	Droped                  bool  `json:"droped"`
	LastPullTimestamp       int64 `json:"lastPullTimestamp"`
	LastConsumeTimestamp    int64 `json:"lastConsumeTimestamp"`
}

// ConsumerRunningInfo is the client's answer to GET_CONSUMER_RUNNING_INFO
// (ConsumerRunningInfo). MqTable is keyed by MessageQueue objects in
// fastjson's form, so it is carried as QueueEntry values and written by
// EncodeConsumerRunningInfo.
type ConsumerRunningInfo struct {
	Properties      map[string]string        `json:"properties"`
	SubscriptionSet []SubscriptionData       `json:"subscriptionSet"`
	MqTable         []QueueEntry             `json:"-"`
	StatusTable     map[string]ConsumeStatus `json:"statusTable"`
	Jstack          string                   `json:"jstack,omitempty"`
}

// GroupList is QUERY_TOPIC_CONSUME_BY_WHO's (300) answer (GroupList).
type GroupList struct {
	GroupList []string `json:"groupList"`
}

// QueryConsumeQueueRequestHeader is QUERY_CONSUME_QUEUE's (321) header:
// Count units of a queue from Index.
type QueryConsumeQueueRequestHeader struct {
	Topic         string `ext:"topic,required"`
	QueueID       int32  `ext:"queueId,required"`
	Index         int64  `ext:"index,required"`
	Count         int32  `ext:"count,required"`
	ConsumerGroup string `ext:"consumerGroup"`
}

// ConsumeQueueData is one consume-queue unit of QUERY_CONSUME_QUEUE's
// answer (ConsumeQueueData).
type ConsumeQueueData struct {
	PhysicOffset   int64  `json:"physicOffset"`
	PhysicSize     int32  `json:"physicSize"`
	TagsCode       int64  `json:"tagsCode"`
	ExtendDataJSON string `json:"extendDataJson,omitempty"`
	BitMap         string `json:"bitMap,omitempty"`
	Eval           bool   `json:"eval"`
	Msg            string `json:"msg,omitempty"`
}

// QueryConsumeQueueResponseBody is QUERY_CONSUME_QUEUE's answer
// (QueryConsumeQueueResponseBody).
type QueryConsumeQueueResponseBody struct {
	SubscriptionData *SubscriptionData  `json:"subscriptionData,omitempty"`
	FilterData       string             `json:"filterData,omitempty"`
	QueueData        []ConsumeQueueData `json:"queueData"`
	MaxQueueIndex    int64              `json:"maxQueueIndex"`
	MinQueueIndex    int64              `json:"minQueueIndex"`
}

// CloneGroupOffsetRequestHeader is CLONE_GROUP_OFFSET's (314) header: copy
// SrcGroup's offsets on Topic (every topic when empty) to DestGroup.
type CloneGroupOffsetRequestHeader struct {
	SrcGroup  string `ext:"srcGroup,required"`
	DestGroup string `ext:"destGroup,required"`
	Topic     string `ext:"topic"`
	Offline   bool   `ext:"offline"`
}

// GetTopicConfigRequestHeader is GET_TOPIC_CONFIG's (351) header.
type GetTopicConfigRequestHeader struct {
	Topic string `ext:"topic,required"`
}

// GetSubscriptionGroupConfigRequestHeader is GET_SUBSCRIPTIONGROUP_CONFIG's
// (352) header.
type GetSubscriptionGroupConfigRequestHeader struct {
	Group string `ext:"group,required"`
}

// QueryTopicConsumeByWhoRequestHeader is QUERY_TOPIC_CONSUME_BY_WHO's
// (300) header.
type QueryTopicConsumeByWhoRequestHeader struct {
	Topic string `ext:"topic,required"`
}

// EncodeConsumerRunningInfo writes ri as RocketMQ's client does: plain
// JSON with mqTable keyed by MessageQueue objects (fastjson's form).
func EncodeConsumerRunningInfo(ri *ConsumerRunningInfo) []byte {
	if ri.SubscriptionSet == nil {
		ri.SubscriptionSet = []SubscriptionData{}
	}
	b, _ := json.Marshal(ri)
	t := []byte(`,"mqTable":{`)
	for i, e := range ri.MqTable {
		if i > 0 {
			t = append(t, ',')
		}
		t = AppendQueueEntry(t, e.Queue, e.Value)
	}
	t = append(t, '}')
	// b ends with '}': splice the table in before it.
	return append(append(b[:len(b)-1], t...), '}')
}

// DecodeConsumerRunningInfo reads a ConsumerRunningInfo body, its
// mqTable in fastjson's object-key form.
func DecodeConsumerRunningInfo(b []byte) (*ConsumerRunningInfo, error) {
	var ri ConsumerRunningInfo
	plain, err := QuoteObjectKeys(b)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(plain, &ri); err != nil {
		return nil, &DecodeError{Reason: "consumer running info: " + err.Error()}
	}
	if ri.MqTable, err = DecodeQueueTable(b, "mqTable"); err != nil {
		return nil, err
	}
	return &ri, nil
}

// QuoteObjectKeys rewrites fastjson's object map keys ({{"topic":..}:v})
// as JSON strings holding the key's text ({"{\"topic\":..}":v}), so that
// encoding/json reads any RocketMQ body; keys decode with json.Unmarshal
// of the string. Other input passes through unchanged; malformed input
// fails here or in the JSON decoder that reads the result.
func QuoteObjectKeys(b []byte) ([]byte, error) {
	type frame struct{ obj, wantKey bool }
	var stack []frame
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		ch := b[i]
		top := len(stack) - 1
		switch {
		case ch == '"':
			j, err := stringEnd(b, i)
			if err != nil {
				return nil, err
			}
			out = append(out, b[i:j]...)
			if top >= 0 && stack[top].obj {
				stack[top].wantKey = false
			}
			i = j
			continue
		case ch == '{' && top >= 0 && stack[top].obj && stack[top].wantKey:
			j, err := valueEnd(b, i)
			if err != nil {
				return nil, err
			}
			q, _ := json.Marshal(string(b[i:j]))
			out = append(out, q...)
			stack[top].wantKey = false
			i = j
			continue
		case ch == '{':
			stack = append(stack, frame{obj: true, wantKey: true})
		case ch == '[':
			stack = append(stack, frame{})
		case ch == '}' || ch == ']':
			if top < 0 {
				return nil, &DecodeError{Offset: i, Reason: "unbalanced " + string(ch)}
			}
			stack = stack[:top]
		case ch == ',':
			if top >= 0 && stack[top].obj {
				stack[top].wantKey = true
			}
		}
		out = append(out, ch)
		i++
	}
	if len(stack) > 0 {
		return nil, &DecodeError{Offset: len(b), Reason: "unterminated object or array"}
	}
	return out, nil
}

// stringEnd returns the index just past the JSON string starting at i.
func stringEnd(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, &DecodeError{Offset: i, Reason: "unterminated string"}
}

// valueEnd returns the index just past the object or array starting at i.
func valueEnd(b []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			e, err := stringEnd(b, j)
			if err != nil {
				return 0, err
			}
			j = e - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, &DecodeError{Offset: i, Reason: "unterminated object"}
}

// ConsumeStats is one group's consume stats on a topic as decoded from
// QuoteObjectKeys output: OffsetTable's keys are MessageQueue JSON texts
// (ParseQueueKey reads them).
type ConsumeStats struct {
	OffsetTable map[string]OffsetWrapper `json:"offsetTable"`
	ConsumeTps  float64                  `json:"consumeTps"`
}

// ConsumeStatsList is GET_BROKER_CONSUME_STATS's (317) answer
// (ConsumeStatsList): per group, its ConsumeStats per topic.
type ConsumeStatsList struct {
	ConsumeStatsList  []map[string][]ConsumeStats `json:"consumeStatsList"`
	BrokerAddr        string                      `json:"brokerAddr"`
	TotalDiff         int64                       `json:"totalDiff"`
	TotalInflightDiff int64                       `json:"totalInflightDiff"`
}

// DecodeConsumeStatsList reads GET_BROKER_CONSUME_STATS's answer.
func DecodeConsumeStatsList(b []byte) (*ConsumeStatsList, error) {
	plain, err := QuoteObjectKeys(b)
	if err != nil {
		return nil, err
	}
	var l ConsumeStatsList
	if err := json.Unmarshal(plain, &l); err != nil {
		return nil, &DecodeError{Reason: "consume stats list: " + err.Error()}
	}
	return &l, nil
}

// ParseQueueKey reads a MessageQueue map key that QuoteObjectKeys quoted.
func ParseQueueKey(k string) (MessageQueue, error) {
	var mq MessageQueue
	if err := json.Unmarshal([]byte(k), &mq); err != nil {
		return mq, &DecodeError{Reason: "message queue key " + k + ": " + err.Error()}
	}
	return mq, nil
}

// ConsumeMessageDirectlyResultRequestHeader is CONSUME_MESSAGE_DIRECTLY's
// (309) header: the tool names the group, the client and the offset msgId;
// the broker adds its name and the message as the body, then relays it to
// the client.
type ConsumeMessageDirectlyResultRequestHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
	ClientID      string `ext:"clientId"`
	MsgID         string `ext:"msgId"`
	BrokerName    string `ext:"brokerName"`
	Topic         string `ext:"topic"`
}

// Consume results of ConsumeMessageDirectlyResult (CMResult).
const (
	CMResultSuccess        = "CR_SUCCESS"
	CMResultLater          = "CR_LATER"
	CMResultThrowException = "CR_THROW_EXCEPTION"
)

// ConsumeMessageDirectlyResult is the client's answer to
// CONSUME_MESSAGE_DIRECTLY (ConsumeMessageDirectlyResult).
type ConsumeMessageDirectlyResult struct {
	Order          bool   `json:"order"`
	AutoCommit     bool   `json:"autoCommit"`
	ConsumeResult  string `json:"consumeResult"`
	Remark         string `json:"remark,omitempty"`
	SpentTimeMills int64  `json:"spentTimeMills"`
}
