package namesrv

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// TestMetricsEndpoint: /metrics parses with the Prometheus text parser and
// counts requests by code; /health is 200 while serving.
func TestMetricsEndpoint(t *testing.T) {
	port := testutil.FreePort(t)
	n := testServer(t, func(c *Config) { c.MetricsPort = port })
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

	c := testClient(t)
	req := remoting.NewRequest(remoting.RequestGetBrokerClusterInfo, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.InvokeSync(ctx, n.Addr().String(), req); err != nil {
		t.Fatal(err)
	}

	resp, err := hc.Get("http://" + n.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	var got float64
	for _, m := range mf["raftmq_namesrv_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" && l.GetValue() == "106" {
				got = m.GetCounter().GetValue()
			}
		}
	}
	if got != 1 {
		t.Fatalf("requests_total{code=106} = %v, want 1", got)
	}
	for _, name := range []string{"raftmq_namesrv_brokers", "raftmq_namesrv_topics", "raftmq_namesrv_request_duration_seconds"} {
		if _, ok := mf[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}

	resp, err = hc.Get("http://" + n.MetricsAddr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h nsHealth
	err = json.NewDecoder(resp.Body).Decode(&h)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || h.State != "serving" {
		t.Fatalf("/health: %d %+v %v", resp.StatusCode, h, err)
	}
	n.monState.Store(2)
	resp, err = hc.Get("http://" + n.MetricsAddr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/health while stopping: %d", resp.StatusCode)
	}
}
