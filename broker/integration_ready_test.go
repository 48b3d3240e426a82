package broker

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// getJSON GETs path on the monitoring address and decodes the body.
func getJSON(t *testing.T, addr, path string, into any) int {
	t.Helper()
	resp, err := monClient.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s body %q: %v", path, b, err)
	}
	return resp.StatusCode
}

// TestReadyzAndHealthz: on a real group every member becomes ready (leader
// known, applied caught up with commit); /healthz stays 200 (liveness) even
// while a node is stopping, when /readyz turns 503.
func TestReadyzAndHealthz(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { c.MetricsPort = testutil.FreePort(t) })
	leader := pc.nodes[pc.leader()]
	for _, n := range pc.nodes {
		testutil.WaitFor(t, 10*time.Second, "member ready", func() bool {
			var b readyBody
			return getJSON(t, n.MetricsAddr(), "/readyz", &b) == http.StatusOK &&
				b.Leader == leader.Addr() && b.AppliedIndex >= b.CommitIndex && b.CommitIndex > 0 && b.FSMAppliedIndex > 0
		})
	}
	f := pc.nodes[(pc.leader()+1)%3]
	f.state.Store(stateStopping)
	defer f.state.Store(stateServing)
	var rb readyBody
	if code := getJSON(t, f.MetricsAddr(), "/readyz", &rb); code != http.StatusServiceUnavailable {
		t.Fatalf("stopping member /readyz: HTTP %d %+v", code, rb)
	}
	var hb healthBody
	if code := getJSON(t, f.MetricsAddr(), "/healthz", &hb); code != http.StatusOK || hb.State != "stopping" {
		t.Fatalf("stopping member /healthz: HTTP %d %+v", code, hb)
	}
}
