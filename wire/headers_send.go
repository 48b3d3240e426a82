package wire

import "github.com/raftmq/raftmq/remoting"

// SendMessageRequestHeader is SEND_MESSAGE's (10) header with RocketMQ's
// long field names (SendMessageRequestHeader); the required set is
// RocketMQ's @CFNotNull set. SEND_BATCH_MESSAGE (320) may come with it too
// (the official Go client sends 320 with long names).
type SendMessageRequestHeader struct {
	ProducerGroup         string `ext:"producerGroup,required"`
	Topic                 string `ext:"topic,required"`
	DefaultTopic          string `ext:"defaultTopic,required"`
	DefaultTopicQueueNums int32  `ext:"defaultTopicQueueNums,required"`
	// QueueID is the target queue; negative lets the broker pick one.
	QueueID int32 `ext:"queueId,required"`
	// SysFlag holds the message's SysFlag* bits.
	SysFlag       int32 `ext:"sysFlag,required"`
	BornTimestamp int64 `ext:"bornTimestamp,required"`
	Flag          int32 `ext:"flag,required"`
	// Properties is the message's properties string (EncodeProperties).
	Properties        string `ext:"properties"`
	ReconsumeTimes    int32  `ext:"reconsumeTimes"`
	UnitMode          bool   `ext:"unitMode"`
	MaxReconsumeTimes int32  `ext:"maxReconsumeTimes"`
	// Batch marks a body holding several messages (EncodeBatch).
	Batch      bool   `ext:"batch"`
	BrokerName string `ext:"bname"`
}

// SendMessageRequestHeaderV2 is SEND_MESSAGE_V2's (310) and
// SEND_BATCH_MESSAGE's (320) header (SendMessageRequestHeaderV2):
// SendMessageRequestHeader with one-letter field names a…n to keep every
// request small.
type SendMessageRequestHeaderV2 struct {
	ProducerGroup         string `ext:"a,required"`
	Topic                 string `ext:"b,required"`
	DefaultTopic          string `ext:"c,required"`
	DefaultTopicQueueNums int32  `ext:"d,required"`
	QueueID               int32  `ext:"e,required"`
	SysFlag               int32  `ext:"f,required"`
	BornTimestamp         int64  `ext:"g,required"`
	Flag                  int32  `ext:"h,required"`
	Properties            string `ext:"i"`
	ReconsumeTimes        int32  `ext:"j"`
	UnitMode              bool   `ext:"k"`
	// MaxReconsumeTimes is a nullable Integer in Java: sent only when set
	// (non-zero, or MaxReconsumeTimesSet: a consumer's limit of 0 means
	// no redelivery, not the group's limit).
	MaxReconsumeTimes int32  `ext:"l,omitempty"`
	Batch             bool   `ext:"m"`
	BrokerName        string `ext:"n,omitempty"`

	// MaxReconsumeTimesSet makes AppendExt send MaxReconsumeTimes even
	// when it is 0. EncodeHeader ignores it.
	MaxReconsumeTimesSet bool

	// PropertiesRaw, when non-nil, is what AppendExt sends as field i
	// instead of Properties: a sender building the properties in a reused
	// buffer skips the string conversion. EncodeHeader ignores it.
	PropertiesRaw []byte
}

// AppendExt writes the header straight into the request frame, fields
// a..n in order (remoting.ExtAppender): a send's header then costs no
// map, no number strings and no key sort. It writes what EncodeHeader
// renders.
func (h *SendMessageRequestHeaderV2) AppendExt(w *remoting.ExtWriter) {
	w.String("a", h.ProducerGroup)
	w.String("b", h.Topic)
	w.String("c", h.DefaultTopic)
	w.Int("d", int64(h.DefaultTopicQueueNums))
	w.Int("e", int64(h.QueueID))
	w.Int("f", int64(h.SysFlag))
	w.Int("g", h.BornTimestamp)
	w.Int("h", int64(h.Flag))
	if h.PropertiesRaw != nil {
		w.Bytes("i", h.PropertiesRaw)
	} else {
		w.String("i", h.Properties)
	}
	w.Int("j", int64(h.ReconsumeTimes))
	w.Bool("k", h.UnitMode)
	if h.MaxReconsumeTimes != 0 || h.MaxReconsumeTimesSet {
		w.Int("l", int64(h.MaxReconsumeTimes))
	}
	w.Bool("m", h.Batch)
	if h.BrokerName != "" {
		w.String("n", h.BrokerName)
	}
}

// V1 returns the header with its long-named twin's fields.
func (h *SendMessageRequestHeaderV2) V1() SendMessageRequestHeader {
	return SendMessageRequestHeader{ProducerGroup: h.ProducerGroup, Topic: h.Topic, DefaultTopic: h.DefaultTopic,
		DefaultTopicQueueNums: h.DefaultTopicQueueNums, QueueID: h.QueueID, SysFlag: h.SysFlag,
		BornTimestamp: h.BornTimestamp, Flag: h.Flag, Properties: h.Properties, ReconsumeTimes: h.ReconsumeTimes,
		UnitMode: h.UnitMode, MaxReconsumeTimes: h.MaxReconsumeTimes, Batch: h.Batch, BrokerName: h.BrokerName}
}

// SendMessageResponseHeader is a send answer's header
// (SendMessageResponseHeader) plus the two extFields the official Go
// client reads from it.
type SendMessageResponseHeader struct {
	// MsgID is the stored message's offset msgId; comma-joined for a batch.
	MsgID string `ext:"msgId"`
	// QueueID and QueueOffset locate the (first) message.
	QueueID       int32  `ext:"queueId"`
	QueueOffset   int64  `ext:"queueOffset"`
	TransactionID string `ext:"transactionId"`
	BatchUniqID   string `ext:"batchUniqId"`
	MsgRegion     string `ext:"MSG_REGION"`
	TraceOn       string `ext:"TRACE_ON"`
}

// ExtLeaderAddr is the extFields key in which a raftmq broker that is not
// its group's Raft leader names the leader's address ("ip:port"), on a
// SERVICE_NOT_AVAILABLE (14) or NOT_LEADER_FOR_QUEUE (501) answer. A
// producer retries at that address at once instead of waiting for the
// name servers to learn of the new leader.
const ExtLeaderAddr = "leaderAddr"

// ExtLeaderOf is the extFields key of the NOTIFY_CONSUMER_IDS_CHANGED (40)
// a raftmq broker sends each connected consumer when it becomes its
// group's leader: the brokerName it now leads (ExtLeaderAddr names its
// address). A consumer moves its long polls there at once; a RocketMQ
// client ignores the key and just rebalances.
const ExtLeaderOf = "leaderOf"
