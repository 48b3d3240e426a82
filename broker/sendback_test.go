package broker

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestSendBackIdempotentProducer: an idempotent producer numbers its sends
// per queue, so two messages of two queues carry the same sequence number.
// A consumer that fails both sends both back; each must reach the retry
// path (the schedule topic) or, past the retry limit, the DLQ, not be
// dropped as a duplicate of the other.
func TestSendBackIdempotentProducer(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.createTopicOnLeader("SB", 2)
	leader, g := pc.nodes[l].Addr(), pc.groups[l]
	props := wire.PropertyProducerID + "\x01p1\x02" + wire.PropertySequence + "\x011\x02"
	for q, body := range []string{"a", "b"} {
		if r := pc.call(leader, remoting.RequestSendMessage, sendExt("SB", q, props), []byte(body)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send %s: %d %s", body, r.Code, r.Remark)
		}
	}
	var phys []int64
	for q := int32(0); q < 2; q++ {
		res, err := g.Store().GetMessage("", "SB", q, 0, 1, nil)
		if err != nil || res.Status != store.Found {
			t.Fatalf("queue %d: %v %v", q, res.Status, err)
		}
		m, _, err := wire.DecodeMessage(res.Messages[0], false)
		if err != nil {
			t.Fatal(err)
		}
		phys = append(phys, m.PhysicalOffset)
	}
	sendBack := func(group string, off int64, level int) {
		t.Helper()
		r := pc.call(leader, remoting.RequestConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(off, 10), "group": group, "delayLevel": strconv.Itoa(level)}, nil)
		if r.Code != remoting.ResponseSuccess {
			t.Fatalf("send back %d for %s: %d %s", off, group, r.Code, r.Remark)
		}
	}
	for _, off := range phys {
		sendBack("GR", off, 0)
	}
	// Level 3 (the first retry) is queue 2 of the schedule topic.
	if n := g.Store().GetMaxOffsetInQueue(wire.TopicSchedule, 2); n != 2 {
		t.Errorf("the schedule topic holds %d of the 2 messages sent back", n)
	}
	for _, off := range phys {
		sendBack("GD", off, -1)
	}
	if n := g.Store().GetMaxOffsetInQueue(wire.DLQGroupTopicPrefix+"GD", 0); n != 2 {
		t.Errorf("the DLQ holds %d of the 2 messages sent to it", n)
	}
	// A client whose send-back failed sends the consumed message, its
	// properties copied, to the retry topic itself (past the limit: the DLQ).
	for _, body := range []string{"a", "b"} {
		ext := sendExt(wire.RetryGroupTopicPrefix+"GF", 0, props)
		ext["reconsumeTimes"], ext["maxReconsumeTimes"] = "1", "1"
		if r := pc.call(leader, remoting.RequestSendMessage, ext, []byte(body)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("retry-topic send %s: %d %s", body, r.Code, r.Remark)
		}
	}
	if n := g.Store().GetMaxOffsetInQueue(wire.DLQGroupTopicPrefix+"GF", 0); n != 2 {
		t.Errorf("the DLQ holds %d of the 2 messages sent to the retry topic", n)
	}
}

// TestSendBackMaxReconsumeTimes: maxReconsumeTimes is the retry limit of
// a group without a config of its own and the one an auto-created group
// gets, and UPDATE_BROKER_CONFIG may change it: after setting it to 2, a
// message consumed twice already goes to the DLQ when its group sends it
// back, whether the group is unknown to the broker or was created by its
// consumer's heartbeat.
func TestSendBackMaxReconsumeTimes(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.createTopicOnLeader("MRT", 1)
	leader, g := pc.nodes[l].Addr(), pc.groups[l]
	if r := pc.call(leader, remoting.RequestUpdateBrokerConfig, nil, []byte("maxReconsumeTimes=2\n")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("update: %d %s", r.Code, r.Remark)
	}
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@mrt", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "MRTH", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "MRT", SubString: "*", SubVersion: 1}},
	}}})
	if r := pc.call(leader, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	ext := sendExt("MRT", 0, "")
	ext["reconsumeTimes"] = "2"
	if r := pc.call(leader, remoting.RequestSendMessage, ext, []byte("m")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	res, err := g.Store().GetMessage("", "MRT", 0, 0, 1, nil)
	if err != nil || res.Status != store.Found {
		t.Fatalf("stored message: %v %v", res.Status, err)
	}
	m, _, err := wire.DecodeMessage(res.Messages[0], false)
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"MRTU", "MRTH"} {
		r := pc.call(leader, remoting.RequestConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(m.PhysicalOffset, 10), "group": group, "delayLevel": "0"}, nil)
		if r.Code != remoting.ResponseSuccess {
			t.Fatalf("send back for %s: %d %s", group, r.Code, r.Remark)
		}
		if n := g.Store().GetMaxOffsetInQueue(wire.DLQGroupTopicPrefix+group, 0); n != 1 {
			t.Errorf("group %s: the DLQ holds %d messages after a send-back of a message consumed twice with maxReconsumeTimes=2", group, n)
		}
	}
}

// TestSendBackRefusesUndelivered: CONSUMER_SEND_MSG_BACK names a message
// by its CommitLog offset; a message no consumer could have received (a
// half, undecided or rolled back, an op record, a delayed message not yet
// due, a message stored with the rollback sysFlag) is refused with a
// remark, not copied into the retry topic where it would be delivered.
func TestSendBackRefusesUndelivered(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.createTopicOnLeader("SBU", 1)
	leader, st := pc.nodes[l].Addr(), pc.groups[l].Store()
	undecided := sendHalf(t, pc, leader, "SBU", "undecided", "SBU1")
	rolledBack := sendHalf(t, pc, leader, "SBU", "rolled back", "SBU2")
	if r := pc.call(leader, remoting.RequestEndTransaction, endExt(rolledBack, wire.SysFlagTransRollback, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("rollback: %d %s", r.Code, r.Remark)
	}
	send := func(props string, sysFlag int32, body string) int64 {
		ext := sendExt("SBU", 0, props)
		ext["sysFlag"] = strconv.Itoa(int(sysFlag))
		return sentOffset(t, body, pc.call(leader, remoting.RequestSendMessage, ext, []byte(body)))
	}
	delayed := send(wire.EncodeProperties(map[string]string{wire.PropertyDelayTimeLevel: "18"}), 0, "delayed")
	// A send with the rollback sysFlag is refused now; one stored before
	// (by an older version) is put straight into the group.
	rb := sendExt("SBU", 0, "")
	rb["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransRollback))
	if r := pc.call(leader, remoting.RequestSendMessage, rb, []byte("x")); r.Code != remoting.ResponseMessageIllegal {
		t.Fatalf("send with the rollback sysFlag: %d %s; want MESSAGE_ILLEGAL", r.Code, r.Remark)
	}
	put, err := pc.groups[l].PutMessages(context.Background(), []*store.Message{{Topic: "SBU", Body: []byte("rollback sysFlag"),
		SysFlag: wire.SysFlagTransRollback, Properties: map[string]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	rollbackFlag := put[0].PhysicalOffset
	committedFlag := send("", wire.SysFlagTransCommit|wire.SysFlagMultiTags, "commit sysFlag")
	committed := sendHalf(t, pc, leader, "SBU", "committed", "SBU3")
	if r := pc.call(leader, remoting.RequestEndTransaction, endExt(committed, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	plain := send("", 0, "plain")
	var opRecord int64
	testutil.WaitFor(t, 10*time.Second, "every message applied", func() bool {
		res, err := st.GetMessage("", wire.TopicTransOpHalf, 0, 0, 1, nil)
		if err != nil || len(res.Messages) == 0 {
			return false
		}
		m, _, err := wire.DecodeMessage(res.Messages[0], false)
		if err != nil {
			t.Fatal(err)
		}
		opRecord = m.PhysicalOffset
		return st.DispatchedOffset() > plain
	})
	sendBack := func(off int64) *remoting.RemotingCommand {
		return pc.call(leader, remoting.RequestConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(off, 10), "group": "GU", "delayLevel": "1"}, nil)
	}
	for _, c := range []struct {
		name string
		off  int64
		want string
	}{
		{"an undecided half", undecided.phy, wire.TopicTransHalf},
		{"a rolled-back half", rolledBack.phy, wire.TopicTransHalf},
		{"an op record", opRecord, wire.TopicTransOpHalf},
		{"a delayed message not yet due", delayed, wire.TopicSchedule},
		{"a message with the rollback sysFlag", rollbackFlag, "never committed"},
	} {
		r := sendBack(c.off)
		if r.Code != remoting.ResponseNoPermission || !strings.Contains(r.Remark, c.want) || !strings.Contains(r.Remark, "not sent back") {
			t.Errorf("send back %s: %d %q, want NO_PERMISSION naming %q", c.name, r.Code, r.Remark, c.want)
		}
	}
	if n := st.GetMaxOffsetInQueue(wire.TopicSchedule, 0); n != 0 {
		t.Fatalf("the schedule topic's level-1 queue holds %d messages after refused send-backs", n)
	}
	// What consumers really send back is delivered: a plain message, one
	// whose sysFlag carries other bits and a committed transaction's.
	res, err := st.GetMessage("", "SBU", 0, 0, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	var committedCopy int64 = -1
	for _, b := range res.Messages {
		if m, _, err := wire.DecodeMessage(b, true); err == nil && string(m.Body) == "committed" {
			committedCopy = m.PhysicalOffset
		}
	}
	if committedCopy < 0 {
		t.Fatal("the committed transaction's message is not in its queue")
	}
	for name, off := range map[string]int64{"a plain message": plain, "a message with commit and multi-tag sysFlags": committedFlag,
		"a committed transaction's message": committedCopy} {
		if r := sendBack(off); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send back %s: %d %s", name, r.Code, r.Remark)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the three messages in the schedule topic", func() bool {
		return st.GetMaxOffsetInQueue(wire.TopicSchedule, 0) == 3
	})
}

// TestSendBackAnswersErrorUnlessStored: a consumer marks a message it
// failed consumed once CONSUMER_SEND_MSG_BACK answers SUCCESS, so the
// broker answers it only for a copy committed through Raft: a follower
// answers not-leader and stores nothing, an offset naming no message is
// refused, and a leader that lost its quorum answers an error, not
// SUCCESS, for the copy it cannot commit.
func TestSendBackAnswersErrorUnlessStored(t *testing.T) {
	t.Parallel()
	pc := startRealCluster(t, func(cfg *BrokerConfig) { cfg.ApplyTimeout = time.Second })
	l := pc.createTopicOnLeader("SBE", 1)
	leader := pc.nodes[l].Addr()
	off := sentOffset(t, "m", pc.call(leader, remoting.RequestSendMessage, sendExt("SBE", 0, ""), []byte("m")))
	sendBack := func(addr string, phys int64, level int) *remoting.RemotingCommand {
		t.Helper()
		return pc.call(addr, remoting.RequestConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(phys, 10), "group": "SBEG", "delayLevel": strconv.Itoa(level)}, nil)
	}
	// Level 3, the first retry, is queue 2 of the schedule topic.
	stored := func(i int) (retries, dead int64) {
		st := pc.groups[i].Store()
		return st.GetMaxOffsetInQueue(wire.TopicSchedule, 2), st.GetMaxOffsetInQueue(wire.DLQGroupTopicPrefix+"SBEG", 0)
	}
	f := (l + 1) % 3
	for _, level := range []int{0, -1} {
		if r := sendBack(pc.nodes[f].Addr(), off, level); r.Code != remoting.ResponseServiceNotAvailable || !wire.IsNotLeaderRemark(r.Remark) {
			t.Fatalf("follower's answer to a send-back (delay level %d): %d %s", level, r.Code, r.Remark)
		}
	}
	if r := sendBack(leader, off+1<<30, 0); r.Code == remoting.ResponseSuccess {
		t.Fatal("a send-back naming no message was answered SUCCESS")
	}
	// One of each that commits, which also creates the topics.
	for _, level := range []int{0, -1} {
		if r := sendBack(leader, off, level); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send-back (delay level %d): %d %s", level, r.Code, r.Remark)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "both copies on every member", func() bool {
		for i := range 3 {
			if r, d := stored(i); r != 1 || d != 1 {
				return false
			}
		}
		return true
	})
	for i := range 3 {
		if i != l {
			pc.stopNode(i)
		}
	}
	for _, level := range []int{0, -1} {
		if r := sendBack(leader, off, level); r.Code == remoting.ResponseSuccess {
			t.Fatalf("a leader without a quorum answered SUCCESS to a send-back (delay level %d)", level)
		}
	}
	if r, d := stored(l); r != 1 || d != 1 {
		t.Fatalf("without a quorum the leader applied %d retry and %d dead-letter copies, want 1 and 1", r, d)
	}
}
