package broker

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestTopicGroupMetricsLive: on a live group, sends to two topics and a
// group's pulls show up in the per-topic and per-group series, and every
// name in MetricNames is in the leader's /metrics once there is traffic,
// a committed offset and a follower poll (the names the Grafana dashboard
// may query; deploy's test checks the dashboard against MetricNames).
func TestTopicGroupMetricsLive(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { c.MetricsPort = testutil.FreePort(t) })
	l := pc.leader()
	leader := pc.nodes[l]
	pc.createTopic(leader.Addr(), "TA", 1)
	pc.createTopic(leader.Addr(), "TB", 1)
	send := func(topic string, n int, body string) {
		for range n {
			if r := pc.call(leader.Addr(), remoting.RequestSendMessage, sendExt(topic, 0, ""), []byte(body)); r.Code != remoting.ResponseSuccess {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
		}
	}
	send("TA", 3, "0123456789")
	send("TB", 2, "abc")
	if r := pc.call(leader.Addr(), remoting.RequestPullMessage, pullExt("GA", "TA", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull: %d %s", r.Code, r.Remark)
	}
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("GA"))
	if r := pc.call(leader.Addr(), remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	ext := map[string]string{"consumerGroup": "GA", "topic": "TA", "queueId": "0", "commitOffset": "1"}
	if r := pc.call(leader.Addr(), remoting.RequestUpdateConsumerOffset, ext, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	waitFollowerLag(t, pc, l)
	testutil.WaitFor(t, 10*time.Second, "consumer lag of GA on TA", func() bool {
		v, ok := metricValue(scrape(t, leader.MetricsAddr()), "raftmq_broker_consumer_lag_messages", "group", "GA", "topic", "TA")
		return ok && v == 2
	})
	mf := scrape(t, leader.MetricsAddr())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"raftmq_broker_topic_put_messages_total", []string{"topic", "TA"}, 3},
		{"raftmq_broker_topic_put_bytes_total", []string{"topic", "TA"}, 30},
		{"raftmq_broker_topic_put_messages_total", []string{"topic", "TB"}, 2},
		{"raftmq_broker_topic_put_bytes_total", []string{"topic", "TB"}, 6},
		{"raftmq_broker_group_get_messages_total", []string{"group", "GA", "topic", "TA"}, 3},
		{"raftmq_broker_traffic_series_overflow_total", []string{"table", "topic"}, 0},
	} {
		if v, ok := metricValue(mf, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if v, ok := metricValue(mf, "raftmq_broker_group_get_bytes_total", "group", "GA", "topic", "TA"); !ok || v < 30 {
		t.Errorf("group_get_bytes_total = %v (present %v), want ≥ 30 (stored bytes)", v, ok)
	}

	var missing []string
	for _, name := range MetricNames {
		if _, ok := mf[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		var have []string
		for name := range mf {
			if strings.HasPrefix(name, metricsNamespace) {
				have = append(have, name)
			}
		}
		sort.Strings(have)
		t.Fatalf("MetricNames not in /metrics: %v\nscrape has: %s", missing, strconv.Quote(strings.Join(have, " ")))
	}
}
