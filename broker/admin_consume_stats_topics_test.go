package broker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestConsumeStatsTopicsAsRocketMQ: GET_CONSUME_STATS (208) and
// GET_BROKER_CONSUME_STATS (317) pick a group's topics as RocketMQ's
// broker does. Offsets the group left on a topic its online consumers no
// longer subscribe are not reported (reported, they are a lag that only
// grows in consumerProgress, the dashboard and rocketmq-exporter), and
// 208's topicList header names exactly the topics to report, not every
// topic the group ever committed on.
func TestConsumeStatsTopicsAsRocketMQ(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	for _, topic := range []string{"OLDT", "NEWT"} {
		tc.createTopic(addr, topic, 1)
		tc.sendAt(addr, topic, []byte("m"))
	}
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"MOVED"}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	for _, topic := range []string{"OLDT", "NEWT"} {
		if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
			"consumerGroup": "MOVED", "topic": topic, "queueId": "0", "commitOffset": "0"}, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit on %s: %d %s", topic, r.Code, r.Remark)
		}
	}
	// topics reads the topics of a ConsumeStats body's offsetTable.
	topics := func(body []byte) map[string]bool {
		t.Helper()
		entries, err := wire.DecodeQueueTable(body, "offsetTable")
		if err != nil {
			t.Fatalf("ConsumeStats %s: %v", body, err)
		}
		got := map[string]bool{}
		for _, e := range entries {
			got[e.Queue.Topic] = true
		}
		return got
	}
	stats := func(ext map[string]string) map[string]bool {
		t.Helper()
		r := tc.call(addr, remoting.RequestGetConsumeStats, ext, nil)
		if r.Code != remoting.ResponseSuccess {
			t.Fatalf("GET_CONSUME_STATS %v: %d %s", ext, r.Code, r.Remark)
		}
		return topics(r.Body)
	}

	// Offline, every topic with the group's offsets is its progress.
	if got := stats(map[string]string{"consumerGroup": "MOVED"}); !got["OLDT"] || !got["NEWT"] {
		t.Fatalf("offline group's topics: %v; want OLDT and NEWT", got)
	}
	// The group comes back subscribed to NEWT only.
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@moved", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "MOVED", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "NEWT", SubString: "*", SubVersion: 1}},
	}}})
	if r := tc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	if got := stats(map[string]string{"consumerGroup": "MOVED"}); got["OLDT"] || !got["NEWT"] {
		t.Errorf("online group subscribed to NEWT only, without a topic: %v; want NEWT only", got)
	}
	if got := stats(map[string]string{"consumerGroup": "MOVED", "topic": "OLDT"}); len(got) != 0 {
		t.Errorf("online group subscribed to NEWT only, topic OLDT: %v; want nothing", got)
	}
	// topicList is taken as given, subscribed or not.
	if got := stats(map[string]string{"consumerGroup": "MOVED", "topicList": "OLDT;"}); !got["OLDT"] || got["NEWT"] {
		t.Errorf("topicList OLDT: %v; want OLDT only", got)
	}
	if got := stats(map[string]string{"consumerGroup": "MOVED", "topic": "NEWT", "topicList": "OLDT;NEWT;"}); !got["OLDT"] || !got["NEWT"] {
		t.Errorf("topicList OLDT;NEWT: %v; want both", got)
	}

	r := tc.call(addr, remoting.RequestGetBrokerConsumeStats, map[string]string{"isOrder": "false"}, nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("GET_BROKER_CONSUME_STATS: %d %s", r.Code, r.Remark)
	}
	// MOVED is the only group with offsets here, so every queue of the
	// body is one of its.
	if body := string(r.Body); strings.Contains(body, `"topic":"OLDT"`) || !strings.Contains(body, `"topic":"NEWT"`) {
		t.Errorf("GET_BROKER_CONSUME_STATS of MOVED: %s; want NEWT's queue only", body)
	}
}

// TestBrokerConsumeStatsConfiguredGroups: GET_BROKER_CONSUME_STATS (317)
// lists the configured groups, as RocketMQ's broker does: a group deleted
// without cleanOffset keeps its offsets (deleteSubGroup's default), and
// those were listed as a lag nobody would ever consume, in
// brokerConsumeStats' lines and its totalDiff; a configured group that
// has committed nothing yet is listed with no stats.
func TestBrokerConsumeStatsConfiguredGroups(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "BCT", 1)
	tc.sendAt(addr, "BCT", []byte("m"))
	for _, g := range []string{"GONE", "IDLE"} {
		if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("create group %s: %d %s", g, r.Code, r.Remark)
		}
	}
	if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "GONE", "topic": "BCT", "queueId": "0", "commitOffset": "0"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "GONE"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	// The offsets stay, as in RocketMQ.
	if q := tc.call(addr, remoting.RequestQueryConsumerOffset, map[string]string{"consumerGroup": "GONE", "topic": "BCT", "queueId": "0"}, nil); q.Code != remoting.ResponseSuccess {
		t.Fatalf("GONE's offset after deleting its config: %d %s; want kept", q.Code, q.Remark)
	}
	r := tc.call(addr, remoting.RequestGetBrokerConsumeStats, map[string]string{"isOrder": "false"}, nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("GET_BROKER_CONSUME_STATS: %d %s", r.Code, r.Remark)
	}
	body := string(r.Body)
	if strings.Contains(body, `"GONE"`) || !strings.Contains(body, `{"IDLE":[]}`) || !strings.Contains(body, `"totalDiff":0`) {
		t.Errorf("GET_BROKER_CONSUME_STATS: %s; want IDLE with no stats, no GONE, totalDiff 0", body)
	}
}

// TestStatsDuringStoreCloseFail: the store closes before the listener
// stops taking requests, and a closed store holds no queues. Topic and
// consume stats read in that window must fail, not report every queue
// empty: rocketmq-exporter and the dashboard would chart a backlog that
// is still there as gone (lag 0, max offset 0). The same goes for the
// broker's own consumer-lag metric.
func TestStatsDuringStoreCloseFail(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	c := tc.nodes[0]
	addr := c.Addr()
	tc.createTopic(addr, "SCT", 1)
	tc.sendAt(addr, "SCT", []byte("m"))
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"SCG"}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "SCG", "topic": "SCT", "queueId": "0", "commitOffset": "0"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	requests := []struct {
		code int16
		ext  map[string]string
	}{
		{remoting.RequestGetTopicStatsInfo, map[string]string{"topic": "SCT"}},
		{remoting.RequestGetConsumeStats, map[string]string{"consumerGroup": "SCG", "topic": "SCT"}},
		{remoting.RequestGetBrokerConsumeStats, map[string]string{"isOrder": "false"}},
	}
	for _, q := range requests {
		if r := tc.call(addr, q.code, q.ext, nil); r.Code != remoting.ResponseSuccess || !strings.Contains(string(r.Body), `"SCT"`) {
			t.Fatalf("request %d, store open: %d %s %s", q.code, r.Code, r.Remark, r.Body)
		}
	}
	lagSeries := func() int {
		ch := make(chan prometheus.Metric, 64)
		(&storeCollector{c: c, m: c.metrics}).Collect(ch)
		close(ch)
		n := 0
		for m := range ch {
			if m.Desc() == consumerLagDesc {
				n++
			}
		}
		return n
	}
	// The commit reaches the replicated offsets the metric reads once
	// the coalescer flushes it.
	testutil.WaitFor(t, 10*time.Second, "a consumer lag series for SCG on SCT", func() bool { return lagSeries() == 1 })
	if err := c.st.Close(); err != nil {
		t.Fatal(err)
	}
	if n := lagSeries(); n != 0 {
		t.Errorf("consumer lag series, store closed: %d; want none (each would read 0)", n)
	}
	for _, q := range requests {
		if r := tc.call(addr, q.code, q.ext, nil); r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "closed") {
			t.Errorf("request %d, store closed: code %d remark %q body %s; want SYSTEM_ERROR naming the closed store", q.code, r.Code, r.Remark, r.Body)
		}
	}
}
