package client

import (
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// decodeSendResponse reads a send response's header without reflection
// or a map (it is on every send's path; the send asks for the answer's
// extFields raw, remoting.RemotingCommand.LazyResponseExt), as remoting's
// DecodeHeader would: absent fields stay zero, a malformed number is a
// *remoting.HeaderError (the tests compare the two).
func decodeSendResponse(resp *remoting.RemotingCommand) (wire.SendMessageResponseHeader, error) {
	var h wire.SendMessageResponseHeader
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
		n, err := strconv.ParseInt(strings.TrimSpace(queueID), 10, 32)
		if err != nil {
			return h, &remoting.HeaderError{Field: "queueId", Value: queueID, Reason: "not an int32"}
		}
		h.QueueID = int32(n)
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
