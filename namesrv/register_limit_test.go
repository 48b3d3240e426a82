package namesrv

import (
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
