package broker

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// monClient keeps no idle connections (no client goroutines left for
// goleak).
var monClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// scrape GETs /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := monClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mf
}

// metricValue is the value of the family's sample whose labels include
// the given pairs (counter, gauge or untyped); ok=false if none matches.
func metricValue(mf map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := mf[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// getHealth GETs /health.
func getHealth(t *testing.T, addr string) (int, healthBody) {
	t.Helper()
	resp, err := monClient.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h healthBody
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("/health body %q: %v", b, err)
	}
	return resp.StatusCode, h
}

// TestMetricsAndHealth: a real 3-node group with metrics on; sends and
// pulls show up in the request, put and pull counters; Raft gauges and
// /health name the leader; /debug/pprof answers.
func TestMetricsAndHealth(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { c.MetricsPort, c.PprofEnable = testutil.FreePort(t), true })
	l := pc.leader()
	leader := pc.nodes[l]
	pc.createTopic(leader.Addr(), "MT", 2)
	const n = 10
	for i := 0; i < n; i++ {
		if r := pc.call(leader.Addr(), remoting.RequestSendMessage, sendExt("MT", 0, ""), []byte("0123456789")); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	if r := pc.call(leader.Addr(), remoting.RequestPullMessage, pullExt("G", "MT", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull: %d %s", r.Code, r.Remark)
	}

	mf := scrape(t, leader.MetricsAddr())
	checks := []struct {
		name   string
		labels []string
		min    float64
	}{
		{"raftmq_broker_requests_total", []string{"code", "10"}, n},
		{"raftmq_broker_request_duration_seconds", []string{"code", "10"}, n},
		{"raftmq_broker_requests_total", []string{"code", "11"}, 1},
		{"raftmq_broker_put_messages_total", nil, n},
		{"raftmq_broker_put_bytes_total", nil, 10 * n},
		{"raftmq_broker_pull_messages_total", nil, n},
		{"raftmq_broker_raft_term", nil, 1},
		{"raftmq_broker_raft_commit_index", nil, n},
		{"raftmq_broker_raft_applied_index", nil, n},
		{"raftmq_broker_raft_state", []string{"state", "Leader"}, 1},
		{"raftmq_broker_leader", nil, 1},
	}
	for _, c := range checks {
		if v, ok := metricValue(mf, c.name, c.labels...); !ok || v < c.min {
			t.Errorf("%s%v = %v (present %v), want ≥ %v", c.name, c.labels, v, ok, c.min)
		}
	}
	for _, name := range []string{"raftmq_broker_long_polls_held", "raftmq_broker_disk_full", "raftmq_broker_raft_last_contact_seconds"} {
		if _, ok := metricValue(mf, name); !ok {
			t.Errorf("%s missing", name)
		}
	}

	code, h := getHealth(t, leader.MetricsAddr())
	if code != http.StatusOK || h.Role != "leader" || h.Term == 0 || h.Leader != leader.Addr() || h.State != "serving" {
		t.Fatalf("leader /health: %d %+v", code, h)
	}
	f := (l + 1) % 3
	testutil.WaitFor(t, 10*time.Second, "follower /health names the leader", func() bool {
		code, h := getHealth(t, pc.nodes[f].MetricsAddr())
		return code == http.StatusOK && h.Role == "follower" && h.Leader == leader.Addr() && h.Term > 0
	})
	if v, _ := metricValue(scrape(t, pc.nodes[f].MetricsAddr()), "raftmq_broker_raft_state", "state", "Follower"); v != 1 {
		t.Errorf("follower raft_state{Follower} = %v", v)
	}

	checkNewMetrics(t, pc, l, n)

	resp, err := monClient.Get("http://" + leader.MetricsAddr() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pprof: HTTP %d", resp.StatusCode)
	}
}

// TestHealthStates: /health is 503 until Start finished and once Shutdown
// began.
func TestHealthStates(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) { c.MetricsPort = testutil.FreePort(t) })
	c := tc.nodes[0]
	if code, h := getHealth(t, c.MetricsAddr()); code != http.StatusOK || h.State != "serving" {
		t.Fatalf("started: %d %+v", code, h)
	}
	// The states Start and Shutdown pass through (too short-lived to catch
	// from outside).
	for _, st := range []struct {
		state int32
		name  string
	}{{stateStarting, "starting"}, {stateStopping, "stopping"}} {
		c.state.Store(st.state)
		if code, h := getHealth(t, c.MetricsAddr()); code != http.StatusServiceUnavailable || h.State != st.name {
			t.Fatalf("%s: %d %+v", st.name, code, h)
		}
	}
	c.state.Store(stateServing)
}

// checkNewMetrics checks the flush, disk, consumer-lag, follower-lag and
// role-change series on a group whose leader l took sent messages to MT
// queue 0.
func checkNewMetrics(t *testing.T, pc *procCluster, l int, sent int) {
	t.Helper()
	leader := pc.nodes[l]
	mf := scrape(t, leader.MetricsAddr())
	if v, ok := metricValue(mf, "raftmq_broker_raft_log_flush_seconds"); !ok || v < 1 {
		t.Errorf("raft_log_flush_seconds count = %v (present %v), want ≥ 1 after sends", v, ok)
	}
	if f := mf["raftmq_broker_raft_log_flush_bytes"]; f == nil || f.GetMetric()[0].GetHistogram().GetSampleSum() < float64(10*sent) {
		t.Errorf("raft_log_flush_bytes sum below the %d body bytes sent: %v", 10*sent, f)
	}
	if v, ok := metricValue(mf, "raftmq_broker_disk_used_ratio"); !ok || v <= 0 || v > 1 {
		t.Errorf("disk_used_ratio = %v (present %v), want in (0, 1]", v, ok)
	}
	minOff, ok1 := metricValue(mf, "raftmq_broker_commitlog_min_offset_bytes")
	maxOff, ok2 := metricValue(mf, "raftmq_broker_commitlog_max_offset_bytes")
	if !ok1 || !ok2 || maxOff <= minOff {
		t.Errorf("commitlog offsets min %v (present %v) max %v (present %v), want max > min", minOff, ok1, maxOff, ok2)
	}

	// Consumer lag: commit 4 of the sent messages on queue 0.
	const committed = 4
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("LG")) // offsets are kept for known groups only
	if r := pc.call(leader.Addr(), remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group LG: %d %s", r.Code, r.Remark)
	}
	ext := map[string]string{"consumerGroup": "LG", "topic": "MT", "queueId": "0", "commitOffset": strconv.Itoa(committed)}
	if r := pc.call(leader.Addr(), remoting.RequestUpdateConsumerOffset, ext, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit offset: %d %s", r.Code, r.Remark)
	}
	testutil.WaitFor(t, 10*time.Second, "consumer lag of LG on MT = sent - committed", func() bool {
		v, ok := metricValue(scrape(t, leader.MetricsAddr()), "raftmq_broker_consumer_lag_messages", "group", "LG", "topic", "MT")
		return ok && v == float64(sent-committed)
	})
	// The offset commit is the last entry and holds no message: once it is
	// applied nothing stored is waiting for dispatch.
	testutil.WaitFor(t, 10*time.Second, "dispatchBehindBytes 0 after the offset commit", func() bool {
		r := pc.call(leader.Addr(), remoting.RequestGetBrokerRuntimeInfo, nil, nil)
		var kv wire.KVTable
		return r.Code == remoting.ResponseSuccess && json.Unmarshal(r.Body, &kv) == nil && kv.Table["dispatchBehindBytes"] == "0"
	})

	// Follower lag: the leader reports both followers; followers report none.
	waitFollowerLag(t, pc, l)
	for i := range pc.nodes {
		if i == l {
			continue
		}
		if f := scrape(t, pc.nodes[i].MetricsAddr())["raftmq_broker_raft_follower_lag_entries"]; f != nil {
			t.Errorf("follower %d exports raft_follower_lag_entries: %v", i, f)
		}
	}

	// Leader changes: after a transfer the new leader counts an election
	// won and the old leader a role change; the new leader polls its
	// followers, the old one stops reporting.
	if err := pc.groups[l].TransferLeadership(""); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	nl := -1
	testutil.WaitFor(t, 10*time.Second, "a new serving leader", func() bool {
		for i, g := range pc.groups {
			if i != l && g.IsLeader() {
				nl = i
				return true
			}
		}
		return false
	})
	testutil.WaitFor(t, 10*time.Second, "role-change counters", func() bool {
		won, _ := metricValue(scrape(t, pc.nodes[nl].MetricsAddr()), "raftmq_broker_elections_won_total")
		changed, _ := metricValue(scrape(t, pc.nodes[l].MetricsAddr()), "raftmq_broker_role_changes_total")
		return won >= 1 && changed >= 1
	})
	waitFollowerLag(t, pc, nl)
	if f := scrape(t, pc.nodes[l].MetricsAddr())["raftmq_broker_raft_follower_lag_entries"]; f != nil {
		t.Errorf("old leader %d still exports raft_follower_lag_entries: %v", l, f)
	}
}

// waitFollowerLag waits until leader l reports every other member's lag
// (caught up: 0 once idle) from a recent RAFT_STATUS.
func waitFollowerLag(t *testing.T, pc *procCluster, l int) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, "leader reports each follower's lag", func() bool {
		mf := scrape(t, pc.nodes[l].MetricsAddr())
		for i, g := range pc.groups {
			if i == l {
				continue
			}
			id := g.SelfID()
			lag, ok := metricValue(mf, "raftmq_broker_raft_follower_lag_entries", "follower", id)
			age, ok2 := metricValue(mf, "raftmq_broker_raft_follower_last_status_seconds", "follower", id)
			if !ok || !ok2 || lag != 0 || age < 0 || age > 5 {
				return false
			}
		}
		return true
	})
}

// TestTimedLogStoreInterfaces: the flush-timing decorator Raft gets keeps
// exactly the optional interfaces raft checks on raftlog's store.
func TestTimedLogStoreInterfaces(t *testing.T) {
	var inner any = (*raftlog.LogStore)(nil)
	var outer any = (*timedLogStore)(nil)
	checks := map[string]func(any) bool{
		"MonotonicLogStore":      func(x any) bool { _, ok := x.(raft.MonotonicLogStore); return ok },
		"CommitTrackingLogStore": func(x any) bool { _, ok := x.(raft.CommitTrackingLogStore); return ok },
		"ParallelLogStore":       func(x any) bool { _, ok := x.(raft.ParallelLogStore); return ok },
	}
	for name, has := range checks {
		if has(inner) != has(outer) {
			t.Errorf("%s: raftlog.LogStore %v, timedLogStore %v", name, has(inner), has(outer))
		}
	}
	if (&timedLogStore{}).IsMonotonic() != (&raftlog.LogStore{}).IsMonotonic() {
		t.Error("IsMonotonic differs")
	}
}

// fakeOffsets is a StateReader with only consumer offsets and topics.
type fakeOffsets struct {
	StateReader
	table  map[string]map[int32]int64
	topics map[string]wire.TopicConfig
}

func (f fakeOffsets) ConsumerOffsets() map[string]map[int32]int64 { return f.table }

func (f fakeOffsets) Topic(name string) (wire.TopicConfig, bool) {
	tc, ok := f.topics[name]
	return tc, ok
}

// TestConsumerLagCap: lag sums queues, ignores commits past the max,
// counts a queue of the topic without a commit from 0 (as RocketMQ's
// consumeStats), and the series cap keeps the first pairs in order and
// counts the rest.
func TestConsumerLagCap(t *testing.T) {
	st := fakeOffsets{table: map[string]map[int32]int64{
		"T1@G": {0: 3, 1: 10, 2: 50}, // max 10 each: 7 + 0 + 0 (past max) + 10 (queue 3, no commit)
		"T2@G": {0: 0},
		"T3@G": {0: 1},
		"bad":  {0: 1},
	}, topics: map[string]wire.TopicConfig{"T1": {TopicName: "T1", ReadQueueNums: 4, WriteQueueNums: 4}}}
	maxOff := func(string, int32) int64 { return 10 }
	got, dropped := consumerLag(st, maxOff, 2)
	want := []groupTopicLag{{"G", "T1", 17}, {"G", "T2", 10}}
	if !slices.Equal(got, want) || dropped != 1 {
		t.Fatalf("consumerLag = %v dropped %d, want %v dropped 1", got, dropped, want)
	}
}
