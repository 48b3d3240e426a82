package broker

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Request checks a RocketMQ 4.9 broker makes and raftmq must make too:
// what RocketMQ refuses, a client must not see served.

// TestSendToForbiddenSystemTopic: RocketMQ refuses a send to any topic of
// TopicValidator's not-allowed-send set with NO_PERMISSION, even when the
// topic exists: TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC and
// OFFSET_MOVED_EVENT are the broker's own, like the schedule and half
// topics.
func TestSendToForbiddenSystemTopic(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	for _, topic := range []string{wire.TopicTransCheckMaxTime, wire.TopicSelfTest, wire.TopicOffsetMovedEvent} {
		if r := tc.tryCreateTopic(addr, topic, 1); r.Code != remoting.ResponseSuccess {
			t.Fatalf("updateTopic %s: %d %s", topic, r.Code, r.Remark)
		}
		r := tc.call(addr, remoting.RequestSendMessage, sendExt(topic, 0, ""), []byte("m"))
		if r.Code != remoting.ResponseNoPermission || !strings.Contains(r.Remark, topic) {
			t.Errorf("send to %s answered %d %q; want NO_PERMISSION naming the topic", topic, r.Code, r.Remark)
		}
	}
}

// TestSendBackUnknownGroupWithoutAutoCreate: with
// autoCreateSubscriptionGroup false, RocketMQ refuses a send-back for a
// group nobody created, and a send to its %RETRY% topic (the clients'
// fallback when the send-back fails), with SUBSCRIPTION_GROUP_NOT_EXIST:
// a mistyped group gets no retry or dead-letter topic. Once the group is
// created both are taken.
func TestSendBackUnknownGroupWithoutAutoCreate(t *testing.T) {
	tc, rep := startFakeProc(t, func(c *BrokerConfig) { c.AutoCreateSubscriptionGroup = false })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "SBG", 1)
	off := sentOffset(t, "m", tc.call(addr, remoting.RequestSendMessage, sendExt("SBG", 0, ""), []byte("m")))
	sendBack := func() *remoting.RemotingCommand {
		return tc.call(addr, remoting.RequestConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(off, 10), "group": "TYPO", "delayLevel": "0"}, nil)
	}
	retrySend := func() *remoting.RemotingCommand {
		ext := sendExt(wire.RetryTopic("TYPO"), 0, "")
		ext["reconsumeTimes"] = "1"
		return tc.call(addr, remoting.RequestSendMessage, ext, []byte("m"))
	}
	for what, call := range map[string]func() *remoting.RemotingCommand{"send-back": sendBack, "send to the retry topic": retrySend} {
		r := call()
		if r.Code != remoting.ResponseSubscriptionGroupNotExist || !strings.Contains(r.Remark, "TYPO") ||
			!strings.Contains(r.Remark, "autoCreateSubscriptionGroup") {
			t.Errorf("%s of an uncreated group with auto-creation off answered %d %q; "+
				"want SUBSCRIPTION_GROUP_NOT_EXIST naming the group and the key", what, r.Code, r.Remark)
		}
	}
	for _, topic := range []string{wire.RetryTopic("TYPO"), wire.DLQGroupTopicPrefix + "TYPO"} {
		if _, ok := rep.State().Topic(topic); ok {
			t.Errorf("refused requests created %s", topic)
		}
	}
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("TYPO"))
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup: %d %s", r.Code, r.Remark)
	}
	for what, call := range map[string]func() *remoting.RemotingCommand{"send-back": sendBack, "send to the retry topic": retrySend} {
		if r := call(); r.Code != remoting.ResponseSuccess {
			t.Errorf("%s of the created group: %d %q", what, r.Code, r.Remark)
		}
	}
}

// TestSendBackRetryTopicNotWritable: RocketMQ refuses a send-back with
// NO_PERMISSION when the group's %RETRY% topic has no write permission
// (updateTopicPerm), as it refuses a send to such a topic; the message
// must not be redelivered or dead-lettered behind the operator's back.
func TestSendBackRetryTopicNotWritable(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "SBW", 1)
	off := sentOffset(t, "m", tc.call(addr, remoting.RequestSendMessage, sendExt("SBW", 0, ""), []byte("m")))
	retry := wire.RetryTopic("GW")
	if r := tc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{
		"topic": retry, "readQueueNums": "1", "writeQueueNums": "1", "perm": "4", "topicFilterType": "SINGLE_TAG",
	}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateTopic %s -p 4: %d %s", retry, r.Code, r.Remark)
	}
	for _, level := range []string{"0", "-1"} {
		r := tc.call(addr, remoting.RequestConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(off, 10), "group": "GW", "delayLevel": level}, nil)
		if r.Code != remoting.ResponseNoPermission || !strings.Contains(r.Remark, retry) {
			t.Errorf("send-back (delay level %s) with %s read-only answered %d %q; want NO_PERMISSION naming the topic",
				level, retry, r.Code, r.Remark)
		}
	}
	if _, ok := rep.State().Topic(wire.DLQGroupTopicPrefix + "GW"); ok {
		t.Error("a refused send-back created the dead-letter topic")
	}
}

// TestPullQueueBeyondReadQueues: RocketMQ serves pulls only of queues below
// readQueueNums (SYSTEM_ERROR naming the queueId otherwise), even when the
// topic has more write queues: an operator shrinking a topic lowers
// readQueueNums to stop consumption of the queues beyond it.
func TestPullQueueBeyondReadQueues(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	if r := tc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{
		"topic": "RW", "readQueueNums": "1", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateTopic -r 1 -w 2: %d %s", r.Code, r.Remark)
	}
	for q := range 2 {
		if r := tc.call(addr, remoting.RequestSendMessage, sendExt("RW", q, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send to queue %d: %d %s", q, r.Code, r.Remark)
		}
	}
	if r := tc.call(addr, remoting.RequestPullMessage, pullExt("G", "RW", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull of read queue 0: %d %q", r.Code, r.Remark)
	}
	r := tc.call(addr, remoting.RequestPullMessage, pullExt("G", "RW", 1, 0, 0), nil)
	if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "queueId[1]") {
		t.Fatalf("pull of queue 1 of a topic with 1 read queue answered %d %q (%d body bytes); want SYSTEM_ERROR naming the queueId",
			r.Code, r.Remark, len(r.Body))
	}
}

// TestPullSubscriptionNotLatest: a pull that does not post its
// subscription is filtered by the one the group's heartbeats registered;
// when the pull's subVersion is newer (the consumer changed its
// subscription, or a Java consumer's rebalance bumped it, and the
// heartbeat saying so has not arrived), RocketMQ answers
// SUBSCRIPTION_NOT_LATEST instead of filtering by the stale expression,
// which would skip messages the consumer now wants and move its offset
// past them. As in RocketMQ the group keeps the newest subscription its
// clients announced, so a second client heartbeating an older one does not
// make the first one's pulls stale.
func TestPullSubscriptionNotLatest(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "SV", 1)
	tagged := func(tag string) string { return wire.EncodeProperties(map[string]string{wire.PropertyTags: tag}) }
	for _, tag := range []string{"A", "B"} {
		if r := tc.call(addr, remoting.RequestSendMessage, sendExt("SV", 0, tagged(tag)), []byte(tag)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send %s: %d %s", tag, r.Code, r.Remark)
		}
	}
	heartbeat := func(client, expr string, version int64) {
		t.Helper()
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: client, ConsumerDataSet: []wire.HeartbeatConsumerData{{
			GroupName: "NL", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "SV", SubString: expr, TagsSet: []string{expr}, SubVersion: version}},
		}}})
		if r := tc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
			t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
		}
	}
	pull := func(version int64) *remoting.RemotingCommand {
		ext := pullExt("NL", "SV", 0, 0, 0)
		ext["subVersion"] = strconv.FormatInt(version, 10)
		return tc.call(addr, remoting.RequestPullMessage, ext, nil)
	}
	bodies := func(r *remoting.RemotingCommand) []string {
		t.Helper()
		var out []string
		for len(r.Body) > 0 {
			m, n, err := wire.DecodeMessage(r.Body, true)
			if err != nil {
				t.Fatal(err)
			}
			out, r.Body = append(out, string(m.Body)), r.Body[n:]
		}
		return out
	}
	heartbeat("127.0.0.1@a", "A", 100)
	if r := pull(200); r.Code != remoting.ResponseSubscriptionNotLatest {
		t.Fatalf("pull with subVersion 200 after a heartbeat of subVersion 100 answered %d %q with %v; want SUBSCRIPTION_NOT_LATEST",
			r.Code, r.Remark, bodies(r))
	}
	heartbeat("127.0.0.1@a", "B", 200)
	heartbeat("127.0.0.1@b", "A", 100)
	r := pull(200)
	if got := bodies(r); r.Code != remoting.ResponseSuccess || len(got) != 1 || got[0] != "B" {
		t.Fatalf("pull with the latest subscription (B) answered %d %q with %v; want SUCCESS with B", r.Code, r.Remark, got)
	}
	if r := pull(0); r.Code != remoting.ResponseSuccess { // the official Go client's tag pulls carry 0
		t.Fatalf("pull with subVersion 0: %d %q", r.Code, r.Remark)
	}
}

// TestEndTransactionWrongTranStateTableOffset: END_TRANSACTION names the
// half by its CommitLog offset and its half-queue offset
// (tranStateTableOffset, the send's queueOffset); RocketMQ's
// checkPrepareMessage refuses a request whose queue offset is not the
// half's (SYSTEM_ERROR) and leaves the half to the check-back, rather than
// deciding it and writing an op record naming another half.
func TestEndTransactionWrongTranStateTableOffset(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.createTopicOnLeader("ETO", 1)
	leader, g := pc.nodes[l].Addr(), pc.groups[l]
	a := sendHalf(t, pc, leader, "ETO", "a", "ETO1")
	b := sendHalf(t, pc, leader, "ETO", "b", "ETO2")
	wrong := a
	wrong.queueOffset = b.queueOffset
	r := pc.call(leader, remoting.RequestEndTransaction, endExt(wrong, wire.SysFlagTransCommit, false), nil)
	if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "tranStateTableOffset") {
		t.Fatalf("commit with the other half's tranStateTableOffset answered %d %q; want SYSTEM_ERROR naming tranStateTableOffset",
			r.Code, r.Remark)
	}
	if g.TxnDecided(a.phy) {
		t.Fatal("the refused END_TRANSACTION decided the half")
	}
	if got := topicBodies(t, pc, l, "ETO", 1); len(got) != 0 {
		t.Fatalf("the refused commit delivered %v", got)
	}
	if r := pc.call(leader, remoting.RequestEndTransaction, endExt(a, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit with the right offsets: %d %s", r.Code, r.Remark)
	}
}

// TestMaxReconsumeTimesZero: a consumer that sends maxReconsumeTimes 0
// (MaxReconsumeTimes(0): no redelivery) gets its failed message
// dead-lettered at once by RocketMQ, through a send-back or through its
// own send to the %RETRY% topic; only a request without the field falls
// back to the group's retryMaxTimes.
func TestMaxReconsumeTimesZero(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "MR0", 1)
	off := sentOffset(t, "m", tc.call(addr, remoting.RequestSendMessage, sendExt("MR0", 0, ""), []byte("m")))
	dead := func(group string) int64 { return rep.Store().GetMaxOffsetInQueue(wire.DLQGroupTopicPrefix+group, 0) }
	sendBack := func(group string, ext map[string]string) {
		t.Helper()
		ext["offset"], ext["group"], ext["delayLevel"] = strconv.FormatInt(off, 10), group, "0"
		if r := tc.call(addr, remoting.RequestConsumerSendMsgBack, ext, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send-back for %s: %d %s", group, r.Code, r.Remark)
		}
	}
	retrySend := func(group string, maxTimes string) {
		t.Helper()
		ext := sendExt(wire.RetryTopic(group), 0, "")
		if maxTimes != "" {
			ext["maxReconsumeTimes"] = maxTimes
		}
		if r := tc.call(addr, remoting.RequestSendMessage, ext, []byte("m")); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send to %s: %d %s", wire.RetryTopic(group), r.Code, r.Remark)
		}
	}
	sendBack("SB0", map[string]string{"maxReconsumeTimes": "0"})
	retrySend("RS0", "0")
	for _, group := range []string{"SB0", "RS0"} {
		if n := dead(group); n != 1 {
			t.Errorf("group %s: %d messages in the DLQ after a failure with maxReconsumeTimes 0; want 1", group, n)
		}
	}
	sendBack("SBU", map[string]string{})
	retrySend("RSU", "")
	for _, group := range []string{"SBU", "RSU"} {
		if n := dead(group); n != 0 {
			t.Errorf("group %s: %d messages in the DLQ after a first failure without maxReconsumeTimes; want 0", group, n)
		}
	}
}

// TestBatchHeaderDelayOrTransactionType: RocketMQ refuses a
// SEND_BATCH_MESSAGE whose header asks for a delay level (DELAY in the
// header's properties) or carries any transaction type in its sysFlag
// (MESSAGE_ILLEGAL: batches are neither delayed nor transactional); the
// messages must not be stored undelayed, or with a rollback type that
// hides them from consumers while the send succeeds.
func TestBatchHeaderDelayOrTransactionType(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "BH", 1)
	body, err := wire.EncodeBatch([]wire.BatchEntry{{Body: []byte("a")}, {Body: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(props string, sysFlag int32) *remoting.RemotingCommand {
		ext := sendExt("BH", 0, props)
		ext["batch"], ext["sysFlag"] = "true", strconv.Itoa(int(sysFlag))
		return tc.call(addr, remoting.RequestSendBatchMessage, ext, body)
	}
	for name, r := range map[string]*remoting.RemotingCommand{
		"DELAY=3 in the header": batch(wire.EncodeProperties(map[string]string{wire.PropertyDelayTimeLevel: "3"}), 0),
		"the commit sysFlag":    batch("", wire.SysFlagTransCommit),
		"the rollback sysFlag":  batch("", wire.SysFlagTransRollback),
	} {
		if r.Code != remoting.ResponseMessageIllegal {
			t.Errorf("batch with %s answered %d %q; want MESSAGE_ILLEGAL", name, r.Code, r.Remark)
		}
	}
	if n := rep.Store().GetMaxOffsetInQueue("BH", 0); n != 0 {
		t.Fatalf("refused batches stored %d messages", n)
	}
	if r := batch("", 0); r.Code != remoting.ResponseSuccess {
		t.Fatalf("plain batch: %d %s", r.Code, r.Remark)
	}
}
