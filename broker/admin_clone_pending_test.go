package broker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestCloneGroupOffsetTakesPendingCommits: cloneGroupOffset copies the
// source group's offsets as every read answers them, an acknowledged
// commit still waiting for the coalescer's flush included. Copying the
// replicated offsets only answered success and cloned nothing for a
// group whose commits had not been flushed yet.
func TestCloneGroupOffsetTakesPendingCommits(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "CT", 1)
	for range 2 {
		if r := tc.call(addr, remoting.RequestSendMessage, sendExt("CT", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	for _, g := range []string{"SRC", "DST"} {
		if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("create group %s: %d %s", g, r.Code, r.Remark)
		}
	}
	if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "SRC", "topic": "CT", "queueId": "0", "commitOffset": "2"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{"srcGroup": "SRC", "destGroup": "DST", "topic": "CT", "offline": "false"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("clone: %d %s", r.Code, r.Remark)
	}
	q := tc.call(addr, remoting.RequestQueryConsumerOffset, map[string]string{"consumerGroup": "DST", "topic": "CT", "queueId": "0"}, nil)
	if q.Code != remoting.ResponseSuccess || q.ExtFields["offset"] != "2" {
		t.Fatalf("DST's offset after cloning SRC (at 2, not flushed yet): %d %v %s; want 2", q.Code, q.ExtFields, q.Remark)
	}
}

// TestCloneGroupOffsetOffline: CLONE_GROUP_OFFSET's offline header, as
// RocketMQ's AdminBrokerProcessor.cloneGroupOffset reads it: unless the
// request says the source group is offline, a topic the group's online
// consumers do not subscribe to is not cloned (its offsets there are not
// the group's current progress); with offline=true it is. The skip is
// named in the answer's remark, which RocketMQ clients ignore on success.
func TestCloneGroupOffsetOffline(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "OT", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("OT", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	for _, g := range []string{"OSRC", "ODST"} {
		if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("create group %s: %d %s", g, r.Code, r.Remark)
		}
	}
	if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "OSRC", "topic": "OT", "queueId": "0", "commitOffset": "1"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	// OSRC comes online subscribed to another topic only.
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@osrc", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "OSRC", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "ELSEWHERE", SubString: "*", SubVersion: 1}},
	}}})
	if r := tc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	dstOffset := func() string {
		q := tc.call(addr, remoting.RequestQueryConsumerOffset, map[string]string{"consumerGroup": "ODST", "topic": "OT", "queueId": "0"}, nil)
		if q.Code != remoting.ResponseSuccess {
			return "none"
		}
		return q.ExtFields["offset"]
	}

	r := tc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{"srcGroup": "OSRC", "destGroup": "ODST", "topic": "OT", "offline": "false"}, nil)
	if r.Code != remoting.ResponseSuccess || !strings.Contains(r.Remark, "OT") {
		t.Fatalf("clone of an online group's unsubscribed topic: %d %q; want success with a remark naming OT", r.Code, r.Remark)
	}
	if got := dstOffset(); got != "none" {
		t.Fatalf("ODST's offset after cloning OSRC (online, not subscribed to OT) without offline: %s; want none", got)
	}
	r = tc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{"srcGroup": "OSRC", "destGroup": "ODST", "topic": "OT", "offline": "true"}, nil)
	if r.Code != remoting.ResponseSuccess || r.Remark != "" {
		t.Fatalf("clone with offline=true: %d %q", r.Code, r.Remark)
	}
	if got := dstOffset(); got != "1" {
		t.Fatalf("ODST's offset after cloning OSRC with offline=true: %s; want 1", got)
	}
}
