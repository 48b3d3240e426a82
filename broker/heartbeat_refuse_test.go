package broker

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestHeartbeatRefusesOnlyTheGroupWithTooLongASubscription: a heartbeat
// in which one consumer group subscribes with an expression longer than
// maxPullSubscriptionLength is answered SUBSCRIPTION_PARSE_FAILED naming
// the group and the bound, and that group alone is left out: the
// heartbeat's other consumer groups and its producer group are
// registered (RocketMQ registers every part of a heartbeat). The
// client's earlier registration in the refused group goes, so the group
// does not assign it queues its pulls cannot read.
func TestHeartbeatRefusesOnlyTheGroupWithTooLongASubscription(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "HR", 1)
	const id = "127.0.0.1@refused"
	consumer := func(group, expr string) wire.HeartbeatConsumerData {
		return wire.HeartbeatConsumerData{GroupName: group, ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
			ConsumeFromWhere:    "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "HR", SubString: expr, ExpressionType: wire.ExpressionTypeTag, SubVersion: 1}}}
	}
	heartbeat := func(cds ...wire.HeartbeatConsumerData) *remoting.RemotingCommand {
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: id, ConsumerDataSet: cds,
			ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "HRP"}}})
		return pc.call(addr, remoting.RequestHeartBeat, nil, hb)
	}
	if r := heartbeat(consumer("HRA", "*")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	clients := pc.nodes[0].clients
	if ids := clients.consumerIDs("HRA"); !slices.Equal(ids, []string{id}) {
		t.Fatalf("group HRA lists %v", ids)
	}

	long := strings.Repeat("t || ", maxPullSubscriptionLength/5+1) + "*"
	r := heartbeat(consumer("HRA", long), consumer("HRB", "*"))
	if r.Code != remoting.ResponseSubscriptionParseFailed || !strings.Contains(r.Remark, "HRA") ||
		!strings.Contains(r.Remark, strconv.Itoa(maxPullSubscriptionLength)) {
		t.Fatalf("heartbeat with a %d-byte subscription of HRA: code %d remark %q", len(long), r.Code, r.Remark)
	}
	if ids := clients.consumerIDs("HRB"); !slices.Equal(ids, []string{id}) {
		t.Fatalf("group HRB, subscribed within the bound in the refused heartbeat, lists %v", ids)
	}
	if _, ok := clients.producerChannels()["HRP"]; !ok {
		t.Fatal("the refused heartbeat's producer group HRP is not registered")
	}
	if ids := clients.consumerIDs("HRA"); len(ids) != 0 {
		t.Fatalf("group HRA still lists %v after the client's heartbeat was refused for it", ids)
	}
}
