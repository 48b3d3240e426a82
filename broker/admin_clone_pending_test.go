package broker

import (
	"context"
	"encoding/json"
	"strconv"
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
	tc, rep := startFakeProc(t, nil)
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
	// The group's own offset, not a QUERY_CONSUMER_OFFSET answer: that
	// answers 0 for a group with none on a queue starting recently.
	dstOffset := func() string {
		off, ok := rep.State().ConsumerOffset("ODST", "OT", 0)
		if !ok {
			return "none"
		}
		return strconv.FormatInt(off, 10)
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

// TestCloneGroupOffsetNoTopicConfig: as RocketMQ's
// AdminBrokerProcessor.cloneGroupOffset, a topic the broker has no config
// for is not cloned, offline or not: offsets that outlived their topic
// (a commit accepted while the topic was being deleted) are not copied to
// the destination group, and a named topic the broker does not have
// clones nothing. The answer is still a success, whose remark names the
// skipped topics.
func TestCloneGroupOffsetNoTopicConfig(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	c := tc.nodes[0]
	addr := c.Addr()
	tc.createTopic(addr, "KT", 1)
	for _, g := range []string{"KSRC", "KDST"} {
		if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("create group %s: %d %s", g, r.Code, r.Remark)
		}
	}
	if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "KSRC", "topic": "KT", "queueId": "0", "commitOffset": "1"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	// The broker refuses commits on a topic it has no config for, so the
	// stale offsets go straight into the replicated state.
	if err := rep.CommitOffsets(context.Background(), []OffsetCommit{{Group: "KSRC", Topic: "KGONE", QueueID: 0, Offset: 7}}); err != nil {
		t.Fatal(err)
	}

	r := tc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{"srcGroup": "KSRC", "destGroup": "KDST", "offline": "true"}, nil)
	if r.Code != remoting.ResponseSuccess || !strings.Contains(r.Remark, "on KGONE not cloned") || !strings.Contains(r.Remark, "no topic config") {
		t.Fatalf("clone of every topic, one without config: %d %q; want success with a remark naming KGONE", r.Code, r.Remark)
	}
	dst := c.groupOffsets("KDST")
	if _, ok := dst["KGONE"]; ok || dst["KT"][0] != 1 {
		t.Fatalf("KDST's offsets after the clone: %v; want KT's (queue 0 at 1) and none on KGONE", dst)
	}

	r = tc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{"srcGroup": "KSRC", "destGroup": "KDST", "topic": "KNONE", "offline": "true"}, nil)
	if r.Code != remoting.ResponseSuccess || !strings.Contains(r.Remark, "KNONE") {
		t.Fatalf("clone of a topic the broker does not have: %d %q; want success with a remark naming KNONE", r.Code, r.Remark)
	}
}
