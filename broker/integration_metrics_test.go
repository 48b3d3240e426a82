package broker

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
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
	pc := startRealCluster(t, func(c *BrokerConfig) { c.MetricsPort = testutil.FreePort(t) })
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
