package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// FuzzSendPullHeaders feeds arbitrary extFields to the send and pull
// header decoding and validation: they must never panic and must either
// accept the header or produce an error response with a remark.
func FuzzSendPullHeaders(f *testing.F) {
	f.Add("T1", "0", "0", "TAGS\x01a\x02", "G", "0", "32", "2")
	f.Add("", "-1", "x", "\x01\x02\x01", "", "-9", "99999999999", "y")
	f.Add(strings.Repeat("t", 200), "2147483648", "1", "DELAY\x01-3\x02", "%RETRY%g", "1", "0", "7")
	f.Fuzz(func(t *testing.T, topic, queueID, sysFlag, props, group, offset, maxNums, pullSys string) {
		for _, code := range []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2, remoting.RequestSendBatchMessage} {
			req := remoting.NewRequest(code, nil, nil)
			for k, v := range sendExt(topic, 0, props) {
				req.ExtFields[k] = v
			}
			req.ExtFields["queueId"], req.ExtFields["sysFlag"] = queueID, sysFlag
			if code != remoting.RequestSendMessage {
				req.ExtFields["b"], req.ExtFields["e"] = topic, queueID
			}
			h, err := decodeSendHeader(req)
			if err != nil {
				if r := headerError(req, err); r.Code != remoting.ResponseSystemError || r.Remark == "" {
					t.Fatalf("header error answer %d %q", r.Code, r.Remark)
				}
				continue
			}
			if r := checkTopic(h.Topic); r != nil && r.Remark == "" {
				t.Fatal("topic rejected without a remark")
			}
			_ = parseTagExpression(props)
		}
		req := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
		for k, v := range pullExt(group, topic, 0, 0, 0) {
			req.ExtFields[k] = v
		}
		req.ExtFields["queueOffset"], req.ExtFields["maxMsgNums"], req.ExtFields["sysFlag"] = offset, maxNums, pullSys
		var h wire.PullMessageRequestHeader
		if err := req.DecodeHeader(&h); err == nil {
			if r := checkGroup(h.ConsumerGroup); r != nil && r.Remark == "" {
				t.Fatal("group rejected without a remark")
			}
		}
	})
}
