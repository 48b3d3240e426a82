package broker

import (
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestDecodeSendHeaderV1Equiv: the reflection-free decode of SEND_MESSAGE's
// long-name header gives the same header, or the same
// *remoting.HeaderError, as DecodeHeader.
func TestDecodeSendHeaderV1Equiv(t *testing.T) {
	full := map[string]string{"producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "3", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "KEYS\x01k\x02",
		"reconsumeTimes": "1", "unitMode": "false", "maxReconsumeTimes": "16", "batch": "TRUE", "bname": "broker-a"}
	with := func(k, v string) map[string]string { return extWith(full, k, v) }
	cases := []map[string]string{full, with("queueId", " 7 "), with("queueId", "2147483648"), with("bornTimestamp", "-5"),
		with("unitMode", "yes"), with("batch", "1"), with("batch", "False"), with("reconsumeTimes", "1.5"),
		with("maxReconsumeTimes", ""), with("producerGroup", "")}
	for k := range full {
		cases = append(cases, with(k, "\x00"), with(k, "bad value"))
	}
	for i, ext := range cases {
		for _, code := range []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2, remoting.RequestSendBatchMessage} {
			req := &remoting.RemotingCommand{Code: code, ExtFields: ext}
			var want wire.SendMessageRequestHeader
			wantErr := req.DecodeHeader(&want)
			got, gotErr := decodeSendHeader(req)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Fatalf("case %d %v: error %v, want %v", i, ext, gotErr, wantErr)
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("case %d: got %+v, want %+v", i, got, want)
			}
			var he *remoting.HeaderError
			if gotErr != nil && !reflect.TypeOf(gotErr).AssignableTo(reflect.TypeOf(he)) {
				t.Fatalf("case %d: error type %T", i, gotErr)
			}
		}
	}
}
