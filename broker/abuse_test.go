package broker

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestAbuseLimits runs each client-driven growth the limits bound
// (limits.go) against a real 3-node group: every abusive request is
// refused with a code and a remark naming the limit, the state it aimed
// at does not grow, the refusal is counted, and a well-behaved request
// still works afterwards.
func TestAbuseLimits(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	addr, c, g := pc.nodes[l].Addr(), pc.nodes[l], pc.groups[l]
	pc.createTopic(addr, "T1", 4)
	refusals := func(limit string) float64 {
		var m dto.Metric
		if err := c.metrics.limitRefusals.WithLabelValues(limit).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	expect := func(t *testing.T, resp *remoting.RemotingCommand, code int16, remark string) {
		t.Helper()
		if resp.Code != code || !strings.Contains(resp.Remark, remark) {
			t.Fatalf("got code %d remark %q; want code %d with remark containing %q", resp.Code, resp.Remark, code, remark)
		}
	}
	heartbeat := func(t *testing.T, group string) {
		t.Helper()
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@" + group, ConsumerDataSet: []wire.HeartbeatConsumerData{{
			GroupName: group, ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "T1", SubString: "*", SubVersion: time.Now().UnixNano()}},
		}}})
		expect(t, pc.call(addr, remoting.RequestHeartBeat, nil, hb), remoting.ResponseSuccess, "")
	}

	t.Run("retry queue bomb", func(t *testing.T) {
		before := refusals("maxQueueNums")
		sg := wire.DefaultSubscriptionGroupConfig("evil")
		sg.RetryQueueNums = math.MaxInt32
		body, _ := json.Marshal(sg)
		expect(t, pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body),
			remoting.ResponseInvalidParameter, "retryQueueNums 2147483647 of group evil out of 1..1024")
		if _, ok := c.rep.State().SubscriptionGroup("evil"); ok {
			t.Fatal("the refused group was stored")
		}
		resp := pc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{"topic": "BIG", "readQueueNums": "2147483647",
			"writeQueueNums": "8", "perm": "6"}, nil)
		expect(t, resp, remoting.ResponseInvalidParameter, "queue numbers must be 1..1024")
		if got := refusals("maxQueueNums") - before; got != 2 {
			t.Fatalf("maxQueueNums refusals = %v, want 2", got)
		}

		// State written before the check (an older version): the group
		// as stored, and a topic claiming 2^31 queues.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.UpdateSubscriptionGroup(ctx, sg); err != nil {
			t.Fatal(err)
		}
		if err := g.UpdateTopic(ctx, wire.TopicConfig{TopicName: "OLDBIG", ReadQueueNums: math.MaxInt32, WriteQueueNums: math.MaxInt32,
			Perm: wire.PermRead | wire.PermWrite, TopicFilterType: "SINGLE_TAG"}); err != nil {
			t.Fatal(err)
		}
		// Routed with 1024 queues: clients allocate one object per queue.
		testutil.WaitFor(t, 10*time.Second, "OLDBIG routed with 1024 queues", func() bool {
			rd := pc.ns.Routes().PickupTopicRouteData("OLDBIG")
			return rd != nil && len(rd.QueueDatas) > 0 &&
				rd.QueueDatas[0].ReadQueueNums == maxQueueNums && rd.QueueDatas[0].WriteQueueNums == maxQueueNums
		})
		// The group's first heartbeat creates its retry topic, clamped.
		heartbeat(t, "evil")
		retry, ok := c.rep.State().Topic(wire.RetryGroupTopicPrefix + "evil")
		if !ok || retry.ReadQueueNums != maxQueueNums || retry.WriteQueueNums != maxQueueNums {
			t.Fatalf("retry topic of evil: %+v %v, want %d queues", retry, ok, maxQueueNums)
		}
		// topicStatus of the 2^31-queue topic (an 8 GiB allocation before)
		// lists the first 1024 queues.
		for _, topic := range []string{"OLDBIG", wire.RetryGroupTopicPrefix + "evil"} {
			resp := pc.call(addr, remoting.RequestGetTopicStatsInfo, map[string]string{"topic": topic}, nil)
			expect(t, resp, remoting.ResponseSuccess, "")
			if n := strings.Count(string(resp.Body), `"queueId"`); n != maxQueueNums {
				t.Fatalf("topicStatus %s lists %d queues, want %d", topic, n, maxQueueNums)
			}
		}
	})

	t.Run("offset key flood", func(t *testing.T) {
		heartbeat(t, "GOOD")
		commit := func(group, topic string, queue int) *remoting.RemotingCommand {
			return pc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
				"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queue), "commitOffset": "7"}, nil)
		}
		keysBefore := len(c.rep.State().ConsumerOffsets())
		before := refusals("offsetCommit")
		cases := []struct {
			name, group, topic string
			queue              int
			code               int16
			remark             string
		}{
			{"unknown topic", "GOOD", "NOPE", 0, remoting.ResponseTopicNotExist, "topic NOPE does not exist"},
			{"long topic", "GOOD", strings.Repeat("t", 1<<20), 0, remoting.ResponseInvalidParameter, "longer than 127"},
			{"long group", strings.Repeat("g", 1<<20), "T1", 0, remoting.ResponseInvalidParameter, "longer than 255"},
			{"illegal group", "bad group!", "T1", 0, remoting.ResponseInvalidParameter, "illegal characters"},
			{"unknown group", "NOBODY", "T1", 0, remoting.ResponseSubscriptionGroupNotExist, "NOBODY is neither configured nor connected"},
			{"queue out of range", "GOOD", "T1", 4, remoting.ResponseInvalidParameter, "queueId 4 out of 0..3"},
			{"negative queue", "GOOD", "T1", -1, remoting.ResponseInvalidParameter, "queueId -1"},
		}
		for _, tc := range cases {
			resp := commit(tc.group, tc.topic, tc.queue)
			if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.remark) || !strings.Contains(resp.Remark, "offset commit refused") {
				t.Errorf("%s: code %d remark %.200q; want %d containing %q", tc.name, resp.Code, resp.Remark, tc.code, tc.remark)
			}
		}
		for i := range 200 {
			expect(t, commit("GOOD", "FLOOD"+strconv.Itoa(i), 0), remoting.ResponseTopicNotExist, "offset commit refused")
		}
		if got := refusals("offsetCommit") - before; got != float64(len(cases)+200) {
			t.Fatalf("offsetCommit refusals = %v, want %d", got, len(cases)+200)
		}
		c.offsets.mu.Lock()
		pending := len(c.offsets.pending)
		c.offsets.mu.Unlock()
		if pending != 0 {
			t.Fatalf("%d refused commits are pending replication", pending)
		}
		// A consumer's commit still lands, and it is the only new key.
		expect(t, commit("GOOD", "T1", 3), remoting.ResponseSuccess, "")
		waitOffset(t, c, "GOOD", "T1", 3, 7)
		if got := len(c.rep.State().ConsumerOffsets()); got != keysBefore+1 {
			t.Fatalf("offset keys grew from %d to %d, want one new key", keysBefore, got)
		}
	})

	t.Run("lock table flood", func(t *testing.T) {
		heartbeat(t, "ORDERLY")
		lock := func(group string, mqs ...wire.MessageQueue) *remoting.RemotingCommand {
			b, _ := json.Marshal(wire.LockBatchBody{ConsumerGroup: group, ClientID: "127.0.0.1@" + group, MQSet: mqs})
			return pc.call(addr, remoting.RequestLockBatchMQ, nil, b)
		}
		bn := c.cfg.BrokerName
		before := refusals("lockBatch")
		for i := range 100 {
			s := strconv.Itoa(i)
			expect(t, lock("ORDERLY", wire.MessageQueue{Topic: "FLOOD" + s, BrokerName: bn}, wire.MessageQueue{Topic: "T1", BrokerName: bn, QueueID: int32(4 + i)},
				wire.MessageQueue{Topic: "T1", BrokerName: "elsewhere" + s}), remoting.ResponseSuccess, "3 of 3 queues not locked")
			expect(t, lock("NOBODY"+s, wire.MessageQueue{Topic: "T1", BrokerName: bn}), remoting.ResponseSubscriptionGroupNotExist, "lock refused")
		}
		if got := refusals("lockBatch") - before; got != 200 {
			t.Fatalf("lockBatch refusals = %v, want 200", got)
		}
		if g, n := lockTableSize(c.locks); g != 0 || n != 0 {
			t.Fatalf("the flood left %d groups, %d lock entries", g, n)
		}
		q := wire.MessageQueue{Topic: "T1", BrokerName: bn, QueueID: 3}
		resp := lock("ORDERLY", q)
		var r wire.LockBatchResponse
		if err := json.Unmarshal(resp.Body, &r); err != nil || resp.Code != remoting.ResponseSuccess || len(r.LockOKMQSet) != 1 || r.LockOKMQSet[0] != q {
			t.Fatalf("a consumer's lock answered %d %q %s", resp.Code, resp.Remark, resp.Body)
		}
	})

	t.Run("batch count", func(t *testing.T) {
		entries := make([]wire.BatchEntry, c.cfg.MaxBatchMessages+1)
		for i := range entries {
			entries[i] = wire.BatchEntry{Body: []byte{'x'}}
		}
		body, err := wire.EncodeBatch(entries)
		if err != nil {
			t.Fatal(err)
		}
		before := refusals("maxBatchMessages")
		ext := sendExt("T1", 2, "")
		ext["batch"] = "true"
		expect(t, pc.call(addr, remoting.RequestSendBatchMessage, ext, body), remoting.ResponseMessageIllegal,
			"the batch holds 4097 messages, above maxBatchMessages 4096")
		if got := refusals("maxBatchMessages") - before; got != 1 {
			t.Fatalf("maxBatchMessages refusals = %v, want 1", got)
		}
		if n := c.st.GetMaxOffsetInQueue("T1", 2); n != 0 {
			t.Fatalf("queue T1/2 holds %d messages after the refused batch", n)
		}
		body, _ = wire.EncodeBatch(entries[:2])
		expect(t, pc.call(addr, remoting.RequestSendBatchMessage, ext, body), remoting.ResponseSuccess, "")
		if n := c.st.GetMaxOffsetInQueue("T1", 2); n != 2 {
			t.Fatalf("queue T1/2 holds %d messages after a batch of 2", n)
		}
	})

	t.Run("unknown request codes", func(t *testing.T) {
		for code := int16(20000); code < 20100; code++ {
			expect(t, pc.call(addr, code, nil, nil), remoting.ResponseRequestCodeNotSupported, strconv.Itoa(int(code)))
		}
		mfs, err := c.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var other float64
		for _, mf := range mfs {
			if mf.GetName() != metricsNamespace+"_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() != "code" {
						continue
					}
					if lp.GetValue() == "other" {
						other = m.GetCounter().GetValue()
					} else if n, err := strconv.Atoi(lp.GetValue()); err != nil || n >= 20000 {
						t.Errorf("series for code label %q", lp.GetValue())
					}
				}
			}
		}
		if other < 100 {
			t.Fatalf(`requests_total{code="other"} = %v, want >= 100`, other)
		}
	})

	// Still up: a plain send works.
	expect(t, pc.call(addr, remoting.RequestSendMessage, sendExt("T1", 1, ""), []byte("ok")), remoting.ResponseSuccess, "")
}

// waitOffset waits until group's committed offset of topic/queue is want
// in the replicated state.
func waitOffset(t *testing.T, c *Controller, group, topic string, queue int32, want int64) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, "the committed offset replicated", func() bool {
		off, ok := c.rep.State().ConsumerOffset(group, topic, queue)
		return ok && off == want
	})
}
