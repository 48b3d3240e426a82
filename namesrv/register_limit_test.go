package namesrv

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// A compressed REGISTER_BROKER body inflates a thousandfold; one carrying
// more topics than any broker registers is refused with SYSTEM_ERROR and a
// remark, before its table is built, and the routes are left alone.
func TestRegisterCompressedTopicTableBounded(t *testing.T) {
	n := testServer(t, nil)
	c := testClient(t)
	table := make(map[string]wire.TopicConfig, wire.MaxRegisterTopics+1)
	for i := 0; i <= wire.MaxRegisterTopics; i++ {
		name := fmt.Sprintf("t%07d", i)
		table[name] = wire.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, TopicFilterType: "SINGLE_TAG"}
	}
	body, err := wire.EncodeRegisterBrokerBody(&wire.RegisterBrokerBody{
		TopicConfigSerializeWrapper: wire.TopicConfigSerializeWrapper{TopicConfigTable: table}, FilterServerList: []string{}}, true)
	if err != nil {
		t.Fatal(err)
	}
	h := &wire.RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "127.0.0.1:1", ClusterName: "c",
		HAServerAddr: "127.0.0.1:2", Compressed: true, BodyCrc32: int32(wire.BodyCRC32(body))}
	resp := call(t, c, n.Addr().String(), remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "topic count") {
		t.Fatalf("%d-byte body of %d topics: code %d %q, want SYSTEM_ERROR naming the topic count",
			len(body), len(table), resp.Code, resp.Remark)
	}
	if got := len(n.Routes().AllTopics()); got != 0 {
		t.Fatalf("%d topics routed after the refused registration", got)
	}
}

// A compressed REGISTER_BROKER body whose topic config is one long word is
// refused with a remark that says what is wrong in a few hundred bytes,
// not one that quotes the whole item back (4 bytes per byte it cannot
// print, past what a client accepts in a frame).
func TestRegisterCompressedBadTopicRemarkBounded(t *testing.T) {
	n := testServer(t, nil)
	c := testClient(t)
	var raw []byte
	item := func(b []byte) {
		raw = binary.BigEndian.AppendUint32(raw, uint32(len(b)))
		raw = append(raw, b...)
	}
	item([]byte(`{"counter":1,"timestamp":1}`))
	raw = binary.BigEndian.AppendUint32(raw, 1)
	item(make([]byte, 1<<20)) // 1 MiB of NUL bytes: one field, %q writes \x00 for each
	item([]byte("[]"))
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	body := buf.Bytes()
	h := &wire.RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "127.0.0.1:1", ClusterName: "c",
		HAServerAddr: "127.0.0.1:2", Compressed: true, BodyCrc32: int32(wire.BodyCRC32(body))}
	resp := call(t, c, n.Addr().String(), remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "topic config") || len(resp.Remark) > 512 {
		t.Fatalf("%d-byte body with a 1 MiB topic config: code %d, %d-byte remark %.200q…, want SYSTEM_ERROR naming the topic config in at most 512 bytes",
			len(body), resp.Code, len(resp.Remark), resp.Remark)
	}
}

// A plain JSON REGISTER_BROKER body is held to the compressed layout's
// topic bound: a frame of short entries names millions of topics.
func TestRegisterJSONTopicTableBounded(t *testing.T) {
	n := testServer(t, nil)
	c := testClient(t)
	body := []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{`)
	for i := 0; i <= wire.MaxRegisterTopics; i++ {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `"t%x":{}`, i)
	}
	body = append(body, `}},"filterServerList":[]}`...)
	h := &wire.RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "127.0.0.1:1", ClusterName: "c",
		HAServerAddr: "127.0.0.1:2", BodyCrc32: int32(wire.BodyCRC32(body))}
	resp := call(t, c, n.Addr().String(), remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "topic count") {
		t.Fatalf("%d-byte JSON body of %d topics: code %d %q, want SYSTEM_ERROR naming the topic count",
			len(body), wire.MaxRegisterTopics+1, resp.Code, resp.Remark)
	}
	if got := len(n.Routes().AllTopics()); got != 0 {
		t.Fatalf("%d topics routed after the refused registration", got)
	}
}

// A broker older than 3.0.11 sends the bare topic config wrapper; it is
// held to the same topic bound.
func TestRegisterLegacyTopicTableBounded(t *testing.T) {
	n := testServer(t, nil)
	c := testClient(t)
	body := []byte(`{"topicConfigTable":{`)
	for i := 0; i <= wire.MaxRegisterTopics; i++ {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `"t%x":{}`, i)
	}
	body = append(body, `}}`...)
	h := &wire.RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "127.0.0.1:1", ClusterName: "c", HAServerAddr: "127.0.0.1:2"}
	req := remoting.NewRequest(remoting.RequestRegisterBroker, h, body)
	req.Version = 36 // V3_0_10
	resp := call(t, c, n.Addr().String(), req)
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "topic count") {
		t.Fatalf("%d-byte legacy body of %d topics: code %d %q, want SYSTEM_ERROR naming the topic count",
			len(body), wire.MaxRegisterTopics+1, resp.Code, resp.Remark)
	}
	if got := len(n.Routes().AllTopics()); got != 0 {
		t.Fatalf("%d topics routed after the refused registration", got)
	}
	req = remoting.NewRequest(remoting.RequestRegisterBroker, h,
		[]byte(`{"topicConfigTable":{"Old":{"topicName":"Old","readQueueNums":2,"writeQueueNums":2,"perm":6}}}`))
	req.Version = 36
	if resp := call(t, c, n.Addr().String(), req); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("legacy body of one topic: code %d %q", resp.Code, resp.Remark)
	}
	if rd := n.Routes().PickupTopicRouteData("Old"); rd == nil || len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != 2 {
		t.Fatalf("legacy topic's route: %+v", rd)
	}
}
