package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// manyTopicsBody is a registration body with n topics whose names are
// RocketMQ's longest (127 characters), 8 queues each.
func manyTopicsBody(n int) *wire.RegisterBrokerBody {
	table := make(map[string]wire.TopicConfig, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("T%06d-", i)
		name += strings.Repeat("x", 127-len(name))
		table[name] = wire.TopicConfig{TopicName: name, ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicFilterType: "SINGLE_TAG"}
	}
	return &wire.RegisterBrokerBody{
		TopicConfigSerializeWrapper: wire.TopicConfigSerializeWrapper{TopicConfigTable: table,
			DataVersion: wire.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1}},
		FilterServerList: []string{},
	}
}

// TestRegistrationPastFrameLimit: 45k long-named topics make a JSON
// registration body larger than the 16 MiB frame limit; the broker sends
// it compressed (RocketMQ's zlib layout, compressed=true) and a name
// server routes every topic.
func TestRegistrationPastFrameLimit(t *testing.T) {
	const topics = 45_000
	body := manyTopicsBody(topics)
	plain, err := wire.EncodeRegisterBrokerBody(body, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) <= remoting.DefaultMaxFrameSize {
		t.Fatalf("plain body %d bytes: the test needs one past the %d-byte frame limit", len(plain), remoting.DefaultMaxFrameSize)
	}
	raw, compressed, err := encodeRegistration(body, false)
	if err != nil {
		t.Fatal(err)
	}
	if !compressed || len(raw) >= remoting.DefaultMaxFrameSize/4 {
		t.Fatalf("compressed=%v, %d bytes (plain %d)", compressed, len(raw), len(plain))
	}
	t.Logf("%d topics: JSON %d bytes, compressed %d bytes", topics, len(plain), len(raw))

	_, ns := startProcNameServer(t)
	rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer func() { _ = rc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := &wire.RegisterBrokerRequestHeader{BrokerName: "broker-big", BrokerAddr: "127.0.0.1:10911", ClusterName: "C",
		HAServerAddr: "127.0.0.1:10911", BrokerID: 0, BodyCrc32: int32(wire.BodyCRC32(raw)), Compressed: compressed}
	resp, err := rc.InvokeSync(ctx, ns, remoting.NewRequest(remoting.RequestRegisterBroker, h, raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := remoting.ResponseError(ns, resp); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, topics / 2, topics - 1} {
		name := fmt.Sprintf("T%06d-", i)
		name += strings.Repeat("x", 127-len(name))
		resp, err := rc.InvokeSync(ctx, ns, remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, &wire.GetRouteInfoRequestHeader{Topic: name}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := remoting.ResponseError(ns, resp); err != nil {
			t.Fatalf("route of topic %d: %v", i, err)
		}
		rd, err := wire.DecodeTopicRouteData(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].BrokerName != "broker-big" || len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != 8 {
			t.Fatalf("route of topic %d: %+v", i, rd)
		}
	}
}

// TestRegistrationCompressedOnlyWhenAskedOrLarge: a small table goes as
// JSON unless compressedRegister asks for zlib; both decode to the same.
func TestRegistrationCompressedOnlyWhenAskedOrLarge(t *testing.T) {
	body := manyTopicsBody(10)
	for _, always := range []bool{false, true} {
		raw, compressed, err := encodeRegistration(body, always)
		if err != nil {
			t.Fatal(err)
		}
		if compressed != always {
			t.Fatalf("compressedRegister=%v: compressed=%v", always, compressed)
		}
		got, err := wire.DecodeRegisterBrokerBody(raw, compressed)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.TopicConfigSerializeWrapper.TopicConfigTable) != 10 {
			t.Fatalf("compressedRegister=%v: %d topics back", always, len(got.TopicConfigSerializeWrapper.TopicConfigTable))
		}
	}
}
