package client

import (
	"bytes"
	"compress/zlib"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// FuzzDecodePushedReply feeds arbitrary header values and bodies to the
// PUSH_REPLY_MESSAGE_TO_CLIENT decoder: it must never panic, must refuse
// what it cannot read, and what it accepts must carry the header's topic
// and properties, the arrival time added.
func FuzzDecodePushedReply(f *testing.F) {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write([]byte("compressed reply"))
	_ = zw.Close()
	f.Add("DefaultCluster_REPLY_TOPIC", "0", "0", "CORRELATION_ID\x01c1\x02REPLY_TO_CLIENT\x01a@b\x02", "1:2", []byte("re:q"))
	f.Add("T", "1", strconv.Itoa(int(wire.SysFlagCompressed)), "TAGS\x01t\x02KEYS\x01k1 k2\x02", "[::1]:9", z.Bytes())
	f.Add("T", "x", "y", "\x01\x02\x02", "", []byte{})
	f.Fuzz(func(t *testing.T, topic, queueID, sysFlag, props, host string, body []byte) {
		req := remoting.NewRequest(remoting.RequestPushReplyMessageToClient, nil, body)
		req.ExtFields = map[string]string{
			"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": queueID, "sysFlag": sysFlag, "bornTimestamp": "1", "flag": "0", "properties": props,
			"bornHost": host, "storeHost": host, "storeTimestamp": "2",
		}
		m, err := decodePushedReply(req, time.UnixMilli(42))
		if err != nil {
			return
		}
		if m.Topic != topic || m.Properties[wire.PropertyReplyArriveTime] != "42" {
			t.Fatalf("decoded %+v from topic %q", m, topic)
		}
		if m.SysFlag&wire.SysFlagCompressed != 0 && len(body) > 0 {
			t.Fatal("compressed flag kept on an inflated body")
		}
	})
}
