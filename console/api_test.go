package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/console"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
)

// TestAPI drives the JSON API as curl would against a live group: the
// cluster map, a topic's queues with rates, a group's lag, message
// lookups by key and both ids, and the Raft actions with and without the
// admin account.
func TestAPI(t *testing.T) {
	e := startEnv(t, adminAK, adminSK)
	admin := adminAK + ":" + adminSK

	var cv console.ClusterView
	testutil.WaitFor(t, 15*time.Second, "every member answering RAFT_STATUS", func() bool {
		e.get(t, "/api/cluster", "", &cv)
		if len(cv.Clusters) != 1 || len(cv.Clusters[0].Groups) != 1 || len(cv.Clusters[0].Groups[0].Members) != 3 {
			return false
		}
		for _, m := range cv.Clusters[0].Groups[0].Members {
			if m.Error != "" || m.Lag < 0 {
				return false
			}
		}
		return true
	})
	if len(cv.Clusters) != 1 || cv.Clusters[0].Name != "DefaultCluster" || len(cv.Clusters[0].Groups) != 1 {
		t.Fatalf("clusters: %+v", cv.Clusters)
	}
	g := cv.Clusters[0].Groups[0]
	if g.BrokerName != "broker-a" || g.LeaderID == "" || g.Term == 0 || len(g.Members) != 3 || g.RoutedLeader != g.LeaderAddr {
		t.Fatalf("group: %+v", g)
	}
	for _, m := range g.Members {
		if m.State != "Leader" && m.State != "Follower" || m.Lag < 0 || m.Error != "" {
			t.Errorf("member %+v", m)
		}
	}
	// The tests run without gossip: its sub-second failure detection
	// declares members of a loaded test machine dead.
	if cv.Gossip.Enabled || g.Members[0].Gossip != "" {
		t.Errorf("gossip: %+v, member %+v", cv.Gossip, g.Members[0])
	}
	if !cv.Actions.Enabled {
		t.Errorf("actions: %+v", cv.Actions)
	}

	last := e.send(t, 10, "order-42")
	var td console.TopicDetail
	testutil.WaitFor(t, 15*time.Second, "the topic's rate after two collections", func() bool {
		e.get(t, "/api/topics?topic="+testTopic, "", &td)
		return td.MaxOffset == 10 && td.Rate >= 0
	})
	if len(td.QueueList) != 4 || td.Queues != 4 || td.System || td.Messages != 10 {
		t.Fatalf("topic detail: %+v", td)
	}
	var tv console.TopicsView
	e.get(t, "/api/topics", "", &tv)
	if !containsTopic(tv, testTopic) || !containsSystem(tv) {
		t.Errorf("topics list lacks %s or the system topics: %+v", testTopic, tv.Topics)
	}

	var committed int64
	for _, q := range td.QueueList {
		e.commit(t, q.QueueID, 1)
		committed++
	}
	var gd console.GroupDetail
	testutil.WaitFor(t, 15*time.Second, "the group's committed offsets", func() bool {
		code, _ := e.call(t, http.MethodGet, "/api/groups?group="+testGroup, "", "", "")
		if code != http.StatusOK {
			return false
		}
		e.get(t, "/api/groups?group="+testGroup, "", &gd)
		return len(gd.QueueList) == 4 && gd.Lag == 10-committed
	})
	for _, q := range gd.QueueList {
		if q.Topic != testTopic || q.ConsumerOffset != 1 || q.Lag != q.BrokerOffset-1 {
			t.Errorf("group queue %+v", q)
		}
	}

	// Message bodies need the admin account once one is configured.
	if code, b := e.call(t, http.MethodGet, "/api/message?topic="+testTopic+"&key=order-42", "", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("lookup without credentials: %d %s", code, b)
	}
	var mv console.MessagesView
	e.get(t, "/api/message?topic="+testTopic+"&key=order-42", admin, &mv)
	if len(mv.Messages) != 10 || mv.Messages[0].Keys[0] != "order-42" || !strings.HasPrefix(mv.Messages[0].Body, "hello console") {
		t.Fatalf("by key: %+v", mv)
	}
	e.get(t, "/api/message?topic="+testTopic+"&id="+last.MsgID, admin, &mv)
	if len(mv.Messages) != 1 || mv.Messages[0].MsgID != last.MsgID || mv.Messages[0].Body != "hello console 9" {
		t.Fatalf("by client msgId: %+v", mv)
	}
	e.get(t, "/api/message?id="+last.OffsetMsgID, admin, &mv)
	if len(mv.Messages) != 1 || mv.Messages[0].OffsetMsgID != last.OffsetMsgID {
		t.Fatalf("by offset msgId: %+v", mv)
	}
	if code, b := e.call(t, http.MethodGet, "/api/message?topic="+testTopic+"&key=no-such-key", admin, "", ""); code != http.StatusNotFound {
		t.Errorf("missing key: %d %s", code, b)
	}

	// Actions: refused without the account, with a wrong one, without a
	// JSON body or from another origin; performed with it.
	body := `{"brokerName":"broker-a"}`
	for _, tc := range []struct {
		auth, ct string
		want     int
	}{
		{"", "application/json", http.StatusUnauthorized},
		{adminAK + ":wrong", "application/json", http.StatusUnauthorized},
		{admin, "text/plain", http.StatusUnsupportedMediaType},
	} {
		if code, b := e.call(t, http.MethodPost, "/api/raft/transfer", tc.auth, tc.ct, body); code != tc.want {
			t.Errorf("transfer auth=%q ct=%s: %d %s, want %d", tc.auth, tc.ct, code, b, tc.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/api/raft/transfer", strings.NewReader(body))
	req.SetBasicAuth(adminAK, adminSK)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin transfer: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, b := e.call(t, http.MethodPost, "/api/raft/transfer", admin, "application/json", `{"brokerName":"broker-a","x":1}`); code != http.StatusBadRequest {
		t.Errorf("unknown field: %d %s", code, b)
	}
	var tr console.TransferResult
	code, b := e.call(t, http.MethodPost, "/api/raft/transfer", admin, "application/json", body)
	if code != http.StatusOK {
		t.Fatalf("transfer: %d %s", code, b)
	}
	mustJSON(t, b, &tr)
	if tr.FromID != g.LeaderID || tr.NewLeaderID == g.LeaderID || !tr.Registered {
		t.Fatalf("transfer result %+v (old leader %s)", tr, g.LeaderID)
	}
	testutil.WaitFor(t, 15*time.Second, "the cluster map's new leader", func() bool {
		e.get(t, "/api/cluster", "", &cv)
		return cv.Clusters[0].Groups[0].LeaderID == tr.NewLeaderID
	})
	var br console.BalanceResult
	code, b = e.call(t, http.MethodPost, "/api/raft/balance", admin, "application/json", `{"dryRun":true}`)
	if code != http.StatusOK {
		t.Fatalf("balance: %d %s", code, b)
	}
	mustJSON(t, b, &br)
	for _, m := range br.Moves {
		if m.Result != "planned" && m.Result != "skipped" {
			t.Errorf("dry-run move %+v", m)
		}
	}

	// A console without an account shows the cluster and refuses every
	// action, saying why.
	ro, err := console.New(e.c.Namesrv(), console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	srv := httptest.NewServer(ro.Handler())
	defer srv.Close()
	roEnv := &env{url: srv.URL}
	roEnv.get(t, "/api/cluster", "", &cv)
	if cv.Actions.Enabled || !strings.Contains(cv.Actions.Reason, "consoleAccessKey") || len(cv.Clusters) != 1 {
		t.Errorf("read-only console: %+v", cv)
	}
	if code, b := roEnv.call(t, http.MethodPost, "/api/raft/transfer", admin, "application/json", body); code != http.StatusForbidden ||
		!strings.Contains(string(b), "actions are disabled") {
		t.Errorf("read-only transfer: %d %s", code, b)
	}
}

// TestMount serves the console on a name server's own HTTP port next to
// /metrics.
func TestMount(t *testing.T) {
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.MetricsPort = testutil.FreePort(t)
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	ns, err := namesrv.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	con, err := console.New(ns, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	if err := con.Mount(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + ns.MetricsAddr()
	for path, want := range map[string]string{"/console/": "<title>raftmq console</title>", "/": "<title>raftmq console</title>",
		"/console/console.js": "fetch", "/metrics": "raftmq_namesrv_brokers", "/api/cluster": `"clusters": []`} {
		e := &env{url: base}
		code, b := e.call(t, http.MethodGet, path, "", "", "")
		if code != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, want %q in %.300s", path, code, want, b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = ctx
	if _, err := console.New(ns, console.Options{AccessKey: "only-the-key"}); err == nil {
		t.Error("an access key without a secret key was accepted")
	}
}

func containsTopic(v console.TopicsView, topic string) bool {
	for _, s := range v.Topics {
		if s.Topic == topic {
			return !s.System
		}
	}
	return false
}

func containsSystem(v console.TopicsView) bool {
	for _, s := range v.Topics {
		if s.Topic == "TBW102" || s.System {
			return true
		}
	}
	return false
}
