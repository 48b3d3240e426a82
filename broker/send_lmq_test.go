package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestSendMultiDispatchRefused: a message asking to be dispatched to light
// message queues as well (INNER_MULTI_DISPATCH, RocketMQ's LMQ with
// enableMultiDispatch, which raftmq refuses to enable) is refused with
// MESSAGE_ILLEGAL naming the property, alone or in a batch, and nothing
// is stored: acknowledged, it would reach its topic and none of the queues
// it names. The next plain message on that queue gets offset 0.
func TestSendMultiDispatchRefused(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "LMQ", 4)
	lmq := "INNER_MULTI_DISPATCH\x01%LMQ%a,%LMQ%b\x02"
	for _, code := range []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2} {
		ext := sendExt("LMQ", 1, "KEYS\x01k\x02"+lmq)
		if code == remoting.RequestSendMessageV2 {
			ext = map[string]string{"a": "PG", "b": "LMQ", "c": wire.TopicAutoCreate, "d": "4", "e": "1", "f": "0",
				"g": "0", "h": "0", "i": lmq, "j": "0", "k": "false", "m": "false"}
		}
		resp := tc.call(addr, code, ext, []byte("m"))
		if resp.Code != remoting.ResponseMessageIllegal || !strings.Contains(resp.Remark, "INNER_MULTI_DISPATCH") {
			t.Fatalf("code %d: send with INNER_MULTI_DISPATCH answered %d %q; want MESSAGE_ILLEGAL naming it", code, resp.Code, resp.Remark)
		}
	}
	body, err := wire.EncodeBatch([]wire.BatchEntry{{Body: []byte("b1")}, {Body: []byte("b2"), Properties: lmq}})
	if err != nil {
		t.Fatal(err)
	}
	resp := tc.call(addr, remoting.RequestSendBatchMessage, sendExt("LMQ", 1, ""), body)
	if resp.Code != remoting.ResponseMessageIllegal || !strings.Contains(resp.Remark, "INNER_MULTI_DISPATCH") {
		t.Fatalf("batch with INNER_MULTI_DISPATCH answered %d %q; want MESSAGE_ILLEGAL naming it", resp.Code, resp.Remark)
	}
	resp = tc.call(addr, remoting.RequestSendMessage, sendExt("LMQ", 1, ""), []byte("plain"))
	if resp.Code != remoting.ResponseSuccess || resp.ExtFields["queueOffset"] != "0" {
		t.Fatalf("plain send after the refused ones: %d %q offset %q; want success at offset 0",
			resp.Code, resp.Remark, resp.ExtFields["queueOffset"])
	}
}
