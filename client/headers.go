package client

import (
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/remoting"
)

// Wire headers of the requests the producer sends, as `ext`-tagged structs
// for remoting's EncodeHeader/DecodeHeader.

// ExtLeaderAddr is the extFields key in which a raftmq broker that is not
// its group's Raft leader names the leader's address ("ip:port"), on a
// SERVICE_NOT_AVAILABLE (14) or NOT_LEADER_FOR_QUEUE (501) answer to a
// send. The producer retries at that address at once and refreshes the
// route, instead of waiting for the name servers to learn of the new
// leader. This is the one definition of the key; brokers must use it.
const ExtLeaderAddr = "leaderAddr"

// sendMessageHeaderV2 is SendMessageRequestHeaderV2, SEND_MESSAGE_V2's
// (310) and SEND_BATCH_MESSAGE's (320) header: SendMessageRequestHeader
// with one-letter field names to keep every request small.
type sendMessageHeaderV2 struct {
	ProducerGroup         string `ext:"a"`
	Topic                 string `ext:"b"`
	DefaultTopic          string `ext:"c"`
	DefaultTopicQueueNums int    `ext:"d"`
	QueueID               int    `ext:"e"`
	SysFlag               int32  `ext:"f"`
	BornTimestamp         int64  `ext:"g"`
	Flag                  int32  `ext:"h"`
	Properties            string `ext:"i"`
	ReconsumeTimes        int    `ext:"j"`
	UnitMode              bool   `ext:"k"`
	// MaxReconsumeTimes is a nullable Integer in Java: sent only when set.
	MaxReconsumeTimes int    `ext:"l,omitempty"`
	Batch             bool   `ext:"m"`
	BrokerName        string `ext:"n,omitempty"`

	// propsRaw, when non-nil, is sent as field i instead of Properties:
	// the send path builds the properties in a reused buffer and skips
	// the string conversion. Not part of the reflection view.
	propsRaw []byte
}

// AppendExt writes the header straight into the request frame, fields
// a..n in order (remoting.ExtAppender): the send path's header costs no
// map, no number strings and no key sort. It writes what extFields
// renders (the tests compare the two).
func (h *sendMessageHeaderV2) AppendExt(w *remoting.ExtWriter) {
	w.String("a", h.ProducerGroup)
	w.String("b", h.Topic)
	w.String("c", h.DefaultTopic)
	w.Int("d", int64(h.DefaultTopicQueueNums))
	w.Int("e", int64(h.QueueID))
	w.Int("f", int64(h.SysFlag))
	w.Int("g", h.BornTimestamp)
	w.Int("h", int64(h.Flag))
	if h.propsRaw != nil {
		w.Bytes("i", h.propsRaw)
	} else {
		w.String("i", h.Properties)
	}
	w.Int("j", int64(h.ReconsumeTimes))
	w.Bool("k", h.UnitMode)
	if h.MaxReconsumeTimes != 0 {
		w.Int("l", int64(h.MaxReconsumeTimes))
	}
	w.Bool("m", h.Batch)
	if h.BrokerName != "" {
		w.String("n", h.BrokerName)
	}
}

// sendMessageResponseHeader is SendMessageResponseHeader plus the two
// extFields the official Go client reads from a send response.
type sendMessageResponseHeader struct {
	MsgID         string `ext:"msgId"`
	QueueID       int    `ext:"queueId"`
	QueueOffset   int64  `ext:"queueOffset"`
	TransactionID string `ext:"transactionId"`
	BatchUniqID   string `ext:"batchUniqId"`
	MsgRegion     string `ext:"MSG_REGION"`
	TraceOn       string `ext:"TRACE_ON"`
}

// decodeSendResponse reads a send response's header without reflection
// or a map (it is on every send's path; the send asks for the answer's
// extFields raw, remoting.RemotingCommand.LazyResponseExt), as remoting's
// DecodeHeader would: absent fields stay zero, a malformed number is a
// *remoting.HeaderError (the tests compare the two).
func decodeSendResponse(resp *remoting.RemotingCommand) (sendMessageResponseHeader, error) {
	var h sendMessageResponseHeader
	var queueID, queueOffset string
	var hasQueueID, hasQueueOffset bool
	resp.RangeExt(func(k, v string) bool {
		switch k {
		case "msgId":
			h.MsgID = v
		case "transactionId":
			h.TransactionID = v
		case "batchUniqId":
			h.BatchUniqID = v
		case "MSG_REGION":
			h.MsgRegion = v
		case "TRACE_ON":
			h.TraceOn = v
		case "queueId":
			queueID, hasQueueID = v, true
		case "queueOffset":
			queueOffset, hasQueueOffset = v, true
		}
		return true
	})
	if hasQueueID {
		n, err := strconv.ParseInt(strings.TrimSpace(queueID), 10, 0)
		if err != nil {
			return h, &remoting.HeaderError{Field: "queueId", Value: queueID, Reason: "not an int"}
		}
		h.QueueID = int(n)
	}
	if hasQueueOffset {
		n, err := strconv.ParseInt(strings.TrimSpace(queueOffset), 10, 64)
		if err != nil {
			return h, &remoting.HeaderError{Field: "queueOffset", Value: queueOffset, Reason: "not an int64"}
		}
		h.QueueOffset = n
	}
	return h, nil
}
