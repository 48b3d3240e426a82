package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
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

// TestReadyzWaitsForRestartedFollowerLog: a follower restarted after the
// group committed many entries without it is not ready before its log
// reaches the leader's commit index. It knows its leader from the first
// heartbeat, and its own commit index only counts entries it holds, so
// ready on that alone would let a rolling restart stop the next member
// while this one still lags, and writes would wait for its catch-up.
func TestReadyzWaitsForRestartedFollowerLog(t *testing.T) {
	pc := startDiskCluster(t, func(c *BrokerConfig) { c.MetricsPort = testutil.FreePort(t) })
	l := pc.leader()
	lg := pc.groups[l]
	if err := lg.UpdateTopic(context.Background(), wire.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	f := (l + 1) % 3
	testutil.WaitFor(t, 30*time.Second, "the follower applies everything", func() bool {
		return pc.groups[f].FSMAppliedIndex() >= lg.FSMAppliedIndex()
	})
	mon := pc.nodes[f].MetricsAddr()
	pc.stopNode(f)
	// One entry per put, so the follower misses many entries.
	for i := range 3000 {
		if _, err := lg.PutMessages(context.Background(), []*store.Message{testMessage("T", 0, fmt.Sprintf("k%d", i), "p", int64(i), 16)}); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if pc.leader() != l {
		t.Skip("leadership moved while the follower was down")
	}
	commit := lg.Raft().CommitIndex()
	// Watch /readyz from before the restart on: the first 200 counts.
	first := make(chan readyBody, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Paced: an unpaced loop spins on refused connections while the
		// node starts, and each not-ready answer asks the leader for its
		// commit index, which slows the very catch-up being watched. A
		// premature 200 lasts (readiness is remembered), so a 5 ms poll
		// still sees it.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			resp, err := monClient.Get("http://" + mon + "/readyz")
			if err != nil {
				continue
			}
			var b readyBody
			err = json.NewDecoder(resp.Body).Decode(&b)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				first <- b
				return
			}
		}
	}()
	pc.startNode(f)
	select {
	case b := <-first:
		// Ready means the log held the leader's commit index give or take
		// a batch, and everything committed applied: another batch.
		slack := 2 * uint64(pc.cfgs[f].Raft.MaxAppendEntries)
		if b.AppliedIndex+slack < commit {
			t.Fatalf("restarted follower ready at applied index %d, the leader had committed %d before the restart (%+v)", b.AppliedIndex, commit, b)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("restarted follower never ready")
	}
}
