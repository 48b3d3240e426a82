package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestPullGroupConsumeDisabled: a subscription group whose consumeEnable
// is false (mqadmin updateSubGroup -s false) may not pull; RocketMQ
// answers NO_PERMISSION naming the group. The update's SUCCESS must not
// leave the group consuming.
func TestPullGroupConsumeDisabled(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "CE", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("CE", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	sg := wire.DefaultSubscriptionGroupConfig("OFF")
	sg.ConsumeEnable = false
	body, _ := json.Marshal(sg)
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup -s false: %d %s", r.Code, r.Remark)
	}
	r := tc.call(addr, remoting.RequestPullMessage, pullExt("OFF", "CE", 0, 0, 0), nil)
	if r.Code != remoting.ResponseNoPermission || !strings.Contains(r.Remark, "OFF") {
		t.Fatalf("pull of a group with consumeEnable=false answered %d %q (%d body bytes); want NO_PERMISSION naming the group",
			r.Code, r.Remark, len(r.Body))
	}
	// Enabled again, it pulls.
	sg.ConsumeEnable = true
	body, _ = json.Marshal(sg)
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup -s true: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestPullMessage, pullExt("OFF", "CE", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull of the re-enabled group: %d %q", r.Code, r.Remark)
	}
}

// TestSubscriptionGroupDefaults: a subscription group body that leaves
// fields out gets RocketMQ's defaults for them (the Java broker decodes
// onto a new SubscriptionGroupConfig), not Go's zero values: 0 retries
// would dead-letter a message at its first failure and consumeEnable
// false would stop the group.
func TestSubscriptionGroupDefaults(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"PART","retryQueueNums":2}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup with a partial body: %d %s", r.Code, r.Remark)
	}
	got, ok := rep.State().SubscriptionGroup("PART")
	want := wire.DefaultSubscriptionGroupConfig("PART")
	want.RetryQueueNums = 2
	if !ok || got != want {
		t.Fatalf("stored group %+v (found %v); want %+v", got, ok, want)
	}
}

// TestPullTopicNotReadable: a topic without the read permission
// (updateTopic -p 2) may not be pulled; RocketMQ answers NO_PERMISSION.
// Clients drop unreadable queues from their route, but only at their next
// route refresh (30 s); until then the broker is what stops them.
func TestPullTopicNotReadable(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	if r := tc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{
		"topic": "WO", "readQueueNums": "1", "writeQueueNums": "1", "perm": "2", "topicFilterType": "SINGLE_TAG",
	}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateTopic -p 2: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("WO", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send to a write-only topic: %d %s", r.Code, r.Remark)
	}
	r := tc.call(addr, remoting.RequestPullMessage, pullExt("G", "WO", 0, 0, 0), nil)
	if r.Code != remoting.ResponseNoPermission || !strings.Contains(r.Remark, "WO") {
		t.Fatalf("pull of a topic without read permission answered %d %q (%d body bytes); want NO_PERMISSION naming the topic",
			r.Code, r.Remark, len(r.Body))
	}
}

// TestPullBroadcastDisabled: a group whose consumeBroadcastEnable is false
// (mqadmin updateSubGroup -d false) may not be consumed in broadcasting
// mode; RocketMQ answers its broadcasting consumers' pulls NO_PERMISSION.
func TestPullBroadcastDisabled(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "BC", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("BC", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	sg := wire.DefaultSubscriptionGroupConfig("NOBC")
	sg.ConsumeBroadcastEnable = false
	body, _ := json.Marshal(sg)
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup -d false: %d %s", r.Code, r.Remark)
	}
	heartbeat := func(model string) {
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@bc", ConsumerDataSet: []wire.HeartbeatConsumerData{{
			GroupName: "NOBC", ConsumeType: wire.ConsumeTypePush, MessageModel: model, ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "BC", SubString: "*", SubVersion: 1}},
		}}})
		if r := tc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
			t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
		}
	}
	heartbeat("BROADCASTING")
	r := tc.call(addr, remoting.RequestPullMessage, pullExt("NOBC", "BC", 0, 0, 0), nil)
	if r.Code != remoting.ResponseNoPermission || !strings.Contains(r.Remark, "broadcast") {
		t.Fatalf("broadcasting pull of a group with consumeBroadcastEnable=false answered %d %q (%d body bytes); want NO_PERMISSION",
			r.Code, r.Remark, len(r.Body))
	}
	heartbeat("CLUSTERING")
	if r := tc.call(addr, remoting.RequestPullMessage, pullExt("NOBC", "BC", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("clustering pull of the group: %d %q", r.Code, r.Remark)
	}
}

// TestPullUnknownGroupWithoutAutoCreate: with autoCreateSubscriptionGroup
// false, RocketMQ refuses a pull of a group nobody created
// (SUBSCRIPTION_GROUP_NOT_EXIST naming it), even one whose consumers
// heartbeat: an operator who turned auto-creation off wants a mistyped
// group refused at its first pull, not consuming. Its built-in groups
// (TOOLS_CONSUMER, which mqadmin pulls with, and CID_RMQ_SYS_*) still
// pull, and a group created with updateSubGroup does.
func TestPullUnknownGroupWithoutAutoCreate(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) { c.AutoCreateSubscriptionGroup = false })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "AC", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("AC", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	heartbeatSub(t, tc, "TYPO", "AC", "", "*")
	r := tc.call(addr, remoting.RequestPullMessage, pullExt("TYPO", "AC", 0, 0, 0), nil)
	if r.Code != remoting.ResponseSubscriptionGroupNotExist || !strings.Contains(r.Remark, "TYPO") ||
		!strings.Contains(r.Remark, "autoCreateSubscriptionGroup") {
		t.Fatalf("pull of an uncreated group with auto-creation off answered %d %q (%d body bytes); "+
			"want SUBSCRIPTION_GROUP_NOT_EXIST naming the group and the key", r.Code, r.Remark, len(r.Body))
	}
	for _, g := range []string{"TOOLS_CONSUMER", "CID_RMQ_SYS_X"} {
		if r := tc.call(addr, remoting.RequestPullMessage, pullExt(g, "AC", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("pull of built-in group %s: %d %q", g, r.Code, r.Remark)
		}
	}
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("TYPO"))
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestPullMessage, pullExt("TYPO", "AC", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull of the created group: %d %q", r.Code, r.Remark)
	}
}
