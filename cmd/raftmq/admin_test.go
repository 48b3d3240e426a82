package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// adminCluster is a real name server and a real 3-node Raft group
// (broker-a of DefaultCluster) whose members run on in-memory parts; the
// admin commands reach them over loopback TCP.
type adminCluster struct {
	*devcluster.Cluster
	nsAddr string
}

// startAdminCluster builds the cluster. Every member configures
// preferredLeaderId n2 but checks it only hourly, so balanceLeaders (not
// the group itself) is what moves leadership there.
func startAdminCluster(t *testing.T) *adminCluster {
	t.Helper()
	c := devcluster.MustStart(t, devcluster.Options{SegmentBytes: 8 << 20, ConsumeQueueEntries: 10_000, InMemory: true,
		Configure: func(_, _ int, cfg *broker.BrokerConfig) {
			cfg.TopicChangeCheckInterval = 50 * time.Millisecond
			cfg.SendMessageThreadPoolNums, cfg.PullMessageThreadPoolNums = 2, 2
			cfg.Store.MaxMessageSize = 1 << 20
			cfg.RaftBatchMaxBytes = 1 << 20
			cfg.Raft.PreferredLeaderID = "n2"
			cfg.PreferredLeaderCheckInterval = time.Hour
		}})
	return &adminCluster{Cluster: c, nsAddr: c.NamesrvAddr()}
}

// addrOf is the remoting address of Raft member id.
func (c *adminCluster) addrOf(id string) string {
	for _, m := range c.Members(0) {
		if m.ID() == id {
			return m.Addr()
		}
	}
	return ""
}

// routedLeader is the address the name server routes as brokerId 0.
func (c *adminCluster) routedLeader() string { return c.RoutedLeader(0) }

// runAdmin runs `raftmq admin args...` in process and returns stdout.
func runAdmin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"admin"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// mustAdmin runs a command that must succeed.
func mustAdmin(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runAdmin(t, args...)
	if err != nil {
		t.Fatalf("raftmq admin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// adminJSON runs a command with --json and decodes its output into v.
func adminJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := mustAdmin(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("raftmq admin %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// wantLines fails unless out contains every want.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestAdminCommands runs every admin command against one live cluster and
// checks both the table and the --json output.
func TestAdminCommands(t *testing.T) {
	c := startAdminCluster(t)
	n := []string{"-n", c.nsAddr}
	leader := c.routedLeader()

	t.Run("clusterList", func(t *testing.T) {
		wantLines(t, mustAdmin(t, append(n, "clusterList")...), "#Cluster Name", "DefaultCluster  broker-a", leader, "LEADER", "FOLLOWER")
		var rows []clusterMember
		adminJSON(t, &rows, append(n, "clusterList", "-c", "DefaultCluster")...)
		if len(rows) != 3 || rows[0].BrokerID != 0 || rows[0].Addr != leader || rows[0].Role != "LEADER" {
			t.Fatalf("clusterList rows %+v, want 3 with the leader %s as BID 0 first", rows, leader)
		}
	})

	t.Run("topics", func(t *testing.T) {
		wantLines(t, mustAdmin(t, append(n, "updateTopic", "-c", "DefaultCluster", "-t", "AdminT", "-r", "4", "-w", "4")...),
			"create topic to "+leader+" success.", "readQueueNums=4, writeQueueNums=4, perm=6")
		var upd struct {
			Brokers []string `json:"brokers"`
		}
		adminJSON(t, &upd, append(n, "updateTopic", "-b", leader, "-t", "AdminT2", "-r", "2", "-w", "2", "-o", "true")...)
		if len(upd.Brokers) != 1 || upd.Brokers[0] != leader {
			t.Fatalf("updateTopic -b answered %+v", upd)
		}
		// The name server learns topics from the leader's next registration.
		testutil.WaitFor(t, 10*time.Second, "topics routed", func() bool {
			out, err := runAdmin(t, append(n, "topicList")...)
			return err == nil && strings.Contains(out, "AdminT\n") && strings.Contains(out, "AdminT2\n")
		})
		var tl struct {
			Rows []topicClusterRow `json:"clusterModel"`
		}
		adminJSON(t, &tl, append(n, "topicList", "-c")...)
		if !slices.ContainsFunc(tl.Rows, func(r topicClusterRow) bool { return r.Topic == "AdminT2" && r.Cluster == "DefaultCluster" }) {
			t.Fatalf("topicList -c: %+v", tl.Rows)
		}
		// mqadmin prints the route as JSON, which scripts parse.
		var plain wire.TopicRouteData
		if err := json.Unmarshal([]byte(mustAdmin(t, append(n, "topicRoute", "-t", "AdminT")...)), &plain); err != nil ||
			len(plain.QueueDatas) != 1 || plain.QueueDatas[0].ReadQueueNums != 4 || plain.QueueDatas[0].BrokerName != "broker-a" {
			t.Fatalf("topicRoute AdminT: %+v, %v", plain, err)
		}
		var rd wire.TopicRouteData
		adminJSON(t, &rd, append(n, "topicRoute", "-t", "AdminT2")...)
		if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != 2 || len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].BrokerAddrs[0] != leader {
			t.Fatalf("topicRoute AdminT2: %+v", rd)
		}
	})

	var offsetID string
	t.Run("sendAndQuery", func(t *testing.T) {
		var sr struct {
			SendStatus  string `json:"sendStatus"`
			OffsetMsgID string `json:"offsetMsgId"`
			BrokerName  string `json:"brokerName"`
		}
		adminJSON(t, &sr, append(n, "sendMessage", "-t", "AdminT", "-p", "hello admin", "-k", "key1", "-c", "tagA")...)
		if sr.SendStatus != "SEND_OK" || sr.OffsetMsgID == "" || sr.BrokerName != "broker-a" {
			t.Fatalf("sendMessage: %+v", sr)
		}
		offsetID = sr.OffsetMsgID
		for i := 0; i < 2; i++ {
			wantLines(t, mustAdmin(t, append(n, "sendMessage", "-t", "AdminT", "-p", "more")...), "#Send Result", "SEND_OK", "broker-a")
		}
		var qs []struct {
			MaxOffset int64 `json:"maxOffset"`
		}
		adminJSON(t, &qs, append(n, "topicStatus", "-t", "AdminT")...)
		var total int64
		for _, q := range qs {
			total += q.MaxOffset
		}
		if len(qs) != 4 || total != 3 {
			t.Fatalf("topicStatus: %d queues, %d messages; want 4 and 3", len(qs), total)
		}
		wantLines(t, mustAdmin(t, append(n, "topicStatus", "-t", "AdminT")...), "#Min Offset", "#Max Offset")

		var mv messageView
		adminJSON(t, &mv, append(n, "queryMsgById", "-i", offsetID)...)
		if mv.Body != "hello admin" || mv.Topic != "AdminT" || mv.Tags != "tagA" || mv.OffsetMsgID != offsetID {
			t.Fatalf("queryMsgById: %+v", mv)
		}
		wantLines(t, mustAdmin(t, append(n, "queryMsgById", "-i", offsetID)...), "Body:", "hello admin", "Keys:", "[key1]")

		var found []messageView
		adminJSON(t, &found, append(n, "queryMsgByKey", "-t", "AdminT", "-k", "key1")...)
		if len(found) != 1 || found[0].OffsetMsgID != offsetID {
			t.Fatalf("queryMsgByKey: %+v", found)
		}
		wantLines(t, mustAdmin(t, append(n, "queryMsgByKey", "-t", "AdminT", "-k", "key1")...), "#Offset Message ID", offsetID)
		if _, err := runAdmin(t, append(n, "queryMsgByKey", "-t", "AdminT", "-k", "nope")...); !errors.Is(err, errNotFound) {
			t.Fatalf("queryMsgByKey of a missing key: %v, want errNotFound", err)
		}
	})

	t.Run("groupsAndOffsets", func(t *testing.T) {
		var sg struct {
			GroupName     string `json:"groupName"`
			RetryMaxTimes int    `json:"retryMaxTimes"`
		}
		adminJSON(t, &sg, append(n, "updateSubGroup", "-c", "DefaultCluster", "-g", "AdminG", "-r", "3")...)
		if sg.GroupName != "AdminG" || sg.RetryMaxTimes != 3 {
			t.Fatalf("updateSubGroup: %+v", sg)
		}
		wantLines(t, mustAdmin(t, append(n, "updateSubGroup", "-b", leader, "-g", "AdminG2")...), "success")

		// Reset to the beginning: every queue of the group points at 0,
		// so consumerProgress shows the 3 messages as lag.
		var ro []struct {
			QueueID int   `json:"queueId"`
			Offset  int64 `json:"offset"`
		}
		adminJSON(t, &ro, append(n, "resetOffsetByTime", "-g", "AdminG", "-t", "AdminT", "-s", "0")...)
		if len(ro) != 4 {
			t.Fatalf("resetOffsetByTime: %+v, want 4 queues", ro)
		}
		wantLines(t, mustAdmin(t, append(n, "resetOffsetByTime", "-g", "AdminG", "-t", "AdminT", "-s", "2000-01-01#00:00:00:000")...), "#brokerName", "broker-a")
		if _, err := runAdmin(t, append(n, "resetOffsetByTime", "-g", "AdminG", "-t", "AdminT", "-s", "yesterday")...); !errors.Is(err, errAdminUsage) {
			t.Fatalf("bad -s: %v", err)
		}
		var cp struct {
			DiffTotal int64 `json:"diffTotal"`
			Queues    []struct {
				BrokerOffset, ConsumerOffset int64
			} `json:"queues"`
		}
		testutil.WaitFor(t, 5*time.Second, "consumerProgress shows the reset offsets", func() bool {
			out, err := runAdmin(t, append(n, "consumerProgress", "-g", "AdminG", "-t", "AdminT", "--json")...)
			return err == nil && json.Unmarshal([]byte(out), &cp) == nil && len(cp.Queues) == 4
		})
		if cp.DiffTotal != 3 {
			t.Fatalf("consumerProgress after reset to 0: diff total %d, want 3 (%+v)", cp.DiffTotal, cp)
		}
		wantLines(t, mustAdmin(t, append(n, "consumerProgress", "-g", "AdminG", "-t", "AdminT")...), "#Consumer Offset", "Diff Total: 3")
	})

	t.Run("brokerConfigAndStatus", func(t *testing.T) {
		var kv map[string]string
		adminJSON(t, &kv, append(n, "brokerStatus", "-b", leader)...)
		if kv["raftLeader"] != "true" || kv["brokerName"] != "broker-a" {
			t.Fatalf("brokerStatus of the leader: %v", kv)
		}
		wantLines(t, mustAdmin(t, append(n, "brokerStatus", "-b", leader)...), "raftLeader:", "commitLogMaxOffset:")
		adminJSON(t, &kv, append(n, "getBrokerConfig", "-b", leader)...)
		if kv["brokerName"] != "broker-a" || kv["brokerClusterName"] != "DefaultCluster" {
			t.Fatalf("getBrokerConfig: brokerName %q cluster %q", kv["brokerName"], kv["brokerClusterName"])
		}
		wantLines(t, mustAdmin(t, append(n, "getBrokerConfig", "-b", leader)...), "============"+leader, "brokerName", "broker-a")
		// Keys that cannot change at runtime are refused; the refusal must
		// reach the user as an error.
		if _, err := runAdmin(t, append(n, "updateBrokerConfig", "-b", leader, "-k", "flushDiskType", "-v", "ASYNC_FLUSH")...); err == nil ||
			!strings.Contains(err.Error(), "broker.conf") {
			t.Fatalf("updateBrokerConfig: %v, want the broker's refusal", err)
		}
		if _, err := runAdmin(t, append(n, "updateBrokerConfig", "-k", "a", "-v", "b")...); !errors.Is(err, errAdminUsage) {
			t.Fatalf("updateBrokerConfig without -b/-c: %v", err)
		}
	})

	t.Run("deleteTopic", func(t *testing.T) {
		wantLines(t, mustAdmin(t, append(n, "deleteTopic", "-t", "AdminT2", "-c", "DefaultCluster")...), "delete topic [AdminT2]")
		out := mustAdmin(t, append(n, "topicList")...)
		if strings.Contains(out, "AdminT2") {
			t.Fatalf("AdminT2 still listed after deleteTopic:\n%s", out)
		}
	})

	t.Run("raft", func(t *testing.T) { testAdminRaft(t, c) })
}

// testAdminRaft covers raftStatus, leadershipTransfer and balanceLeaders.
func testAdminRaft(t *testing.T, c *adminCluster) {
	n := []string{"-n", c.nsAddr}
	status := func() *client.RaftGroup {
		t.Helper()
		var gs []*client.RaftGroup
		adminJSON(t, &gs, append(n, "raftStatus", "-b", "broker-a")...)
		if len(gs) != 1 || len(gs[0].Members) != 3 {
			t.Fatalf("raftStatus: %+v", gs)
		}
		return gs[0]
	}
	g := status()
	leaders := 0
	for _, m := range g.Members {
		if m.State == "Leader" {
			leaders++
			if m.ID != g.LeaderID || m.RemotingAddr != c.routedLeader() || m.LastContactMillis != 0 {
				t.Fatalf("leader row %+v disagrees with group %+v / route %s", m, g, c.routedLeader())
			}
		}
		if m.Term == 0 || m.AppliedIndex == 0 || m.Lag < 0 || m.RaftAddr == "" || m.Suffrage != "Voter" {
			t.Fatalf("member row incomplete: %+v", m)
		}
	}
	if leaders != 1 || g.PreferredLeaderID != "n2" {
		t.Fatalf("raftStatus: %d leaders, preferred %q", leaders, g.PreferredLeaderID)
	}
	wantLines(t, mustAdmin(t, append(n, "raftStatus")...), "#Last Contact", "#Lag", "#Acks", "after fsync", "Leader", "Follower", "preferred leader")

	// Named target: pick a follower other than n2 so balanceLeaders has
	// work afterwards.
	target := "n0"
	if g.LeaderID == "n0" {
		target = "n1"
	}
	var tr client.LeadershipTransfer
	adminJSON(t, &tr, append(n, "leadershipTransfer", "-b", "broker-a", "-t", target)...)
	if tr.NewLeaderID != target || tr.NewLeaderAddr != c.addrOf(target) || !tr.Registered || tr.FromID != g.LeaderID {
		t.Fatalf("leadershipTransfer to %s: %+v", target, tr)
	}
	t.Logf("transfer %s -> %s took %d ms (answered once the new leader announced itself)", tr.FromID, tr.NewLeaderID, tr.TookMillis)
	if c.routedLeader() != c.addrOf(target) {
		t.Fatalf("name server routes %s as brokerId 0, want %s", c.routedLeader(), c.addrOf(target))
	}
	if g2 := status(); g2.LeaderID != target || g2.Term <= g.Term {
		t.Fatalf("raftStatus after the transfer: leader %s term %d (was %d)", g2.LeaderID, g2.Term, g.Term)
	}
	// Writes continue on the new leader.
	wantLines(t, mustAdmin(t, append(n, "sendMessage", "-t", "AdminT", "-p", "after transfer")...), "SEND_OK")

	// Refusals: the leader itself, an unknown member, an unknown group.
	if _, err := runAdmin(t, append(n, "leadershipTransfer", "-b", "broker-a", "-t", target)...); !errors.Is(err, errAdminUsage) {
		t.Fatalf("transfer to the current leader: %v", err)
	}
	if _, err := runAdmin(t, append(n, "leadershipTransfer", "-b", "broker-a", "-t", "n9")...); !errors.Is(err, errNotFound) {
		t.Fatalf("transfer to an unknown member: %v", err)
	}
	if _, err := runAdmin(t, append(n, "raftStatus", "-b", "broker-z")...); !errors.Is(err, errNotFound) {
		t.Fatalf("raftStatus of an unknown group: %v", err)
	}

	// No target: the most caught-up follower takes over.
	out := mustAdmin(t, append(n, "leadershipTransfer", "-b", "broker-a")...)
	wantLines(t, out, "#New Leader", "true")
	g3 := status()
	if g3.LeaderID == target || g3.LeaderID == "" {
		t.Fatalf("leadershipTransfer without -t left leader %q", g3.LeaderID)
	}
	if g3.LeaderID == "n2" { // balanceLeaders needs a leader other than the preferred one
		adminJSON(t, &tr, append(n, "leadershipTransfer", "-b", "broker-a", "-t", "n0")...)
	}

	// balanceLeaders moves leadership to preferredLeaderId n2.
	var dry []client.LeaderMove
	adminJSON(t, &dry, append(n, "balanceLeaders", "--dry-run")...)
	if len(dry) != 1 || dry[0].To != "n2" || dry[0].Result != "planned" {
		t.Fatalf("balanceLeaders --dry-run: %+v", dry)
	}
	var moves []client.LeaderMove
	adminJSON(t, &moves, append(n, "balanceLeaders", "-c", "DefaultCluster")...)
	if len(moves) != 1 || moves[0].To != "n2" || moves[0].Reason != "preferredLeaderId" || !strings.HasPrefix(moves[0].Result, "moved") {
		t.Fatalf("balanceLeaders: %+v", moves)
	}
	if g4 := status(); g4.LeaderID != "n2" {
		t.Fatalf("after balanceLeaders the leader is %s, want n2", g4.LeaderID)
	}
	wantLines(t, mustAdmin(t, append(n, "balanceLeaders")...), "leaders already balanced")
}

// TestAdminUnreachable checks the errors a user sees when nothing answers,
// in process (sentinels, named addresses) and through the real binary
// entry point (stderr and exit code 1).
func TestAdminUnreachable(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	_, err := runAdmin(t, "clusterList", "-n", dead, "--timeout", "500ms")
	if !errors.Is(err, errUnreachable) || !strings.Contains(err.Error(), "cannot reach name server "+dead) || !strings.Contains(err.Error(), "-n") {
		t.Fatalf("clusterList against a dead name server: %v", err)
	}
	_, err = runAdmin(t, "brokerStatus", "-n", dead, "-b", dead, "--timeout", "500ms")
	if !errors.Is(err, errUnreachable) || !strings.Contains(err.Error(), "broker "+dead) {
		t.Fatalf("brokerStatus against a dead broker: %v", err)
	}
	if _, err := runAdmin(t, "topicList"); !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), "-n NAMESRV") {
		t.Fatalf("topicList without -n: %v", err)
	}
	if _, err := runAdmin(t, "updateTopic", "-n", dead, "-t", "T"); !errors.Is(err, errAdminUsage) {
		t.Fatalf("updateTopic without -b/-c: %v", err)
	}

	cmd := exec.Command(os.Args[0])
	cmd.Env = mainEnv("admin", "raftStatus", "-n", dead, "--timeout", "500ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("raftmq admin raftStatus against a dead name server: %v, want exit code 1", err)
	}
	if !strings.Contains(stderr.String(), "cannot reach name server "+dead) {
		t.Fatalf("stderr does not name the name server:\n%s", stderr.String())
	}
}

// TestAdminTransferWriteGap sends continuously from 4 producers while
// `leadershipTransfer` (no target) runs 5 times, and reports the longest
// gap between two acknowledged sends around each transfer. Every transfer
// must end with the new leader routed as brokerId 0 and no send may fail.
func TestAdminTransferWriteGap(t *testing.T) {
	c := startAdminCluster(t)
	n := []string{"-n", c.nsAddr}
	mustAdmin(t, append(n, "updateTopic", "-c", "DefaultCluster", "-t", "GapT", "-r", "4", "-w", "4")...)
	testutil.WaitFor(t, 10*time.Second, "GapT routed", func() bool {
		_, err := runAdmin(t, append(n, "topicRoute", "-t", "GapT")...)
		return err == nil
	})
	p, err := client.NewProducer(client.NameServers(c.nsAddr), client.ProducerGroup("gap"), client.SendTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()

	var mu sync.Mutex
	var acks []time.Time
	var sendErrs []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				_, err := p.SendSync(ctx, &client.Message{Topic: "GapT", Body: []byte("gap")})
				cancel()
				mu.Lock()
				if err != nil {
					sendErrs = append(sendErrs, err)
				} else {
					acks = append(acks, time.Now())
				}
				mu.Unlock()
			}
		}()
	}
	ackCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}
	testutil.WaitFor(t, 10*time.Second, "sends flowing", func() bool { return ackCount() > 50 })
	type window struct{ from, to time.Time }
	var windows []window
	for i := 0; i < 5; i++ {
		before := ackCount()
		start := time.Now()
		var tr client.LeadershipTransfer
		adminJSON(t, &tr, append(n, "leadershipTransfer", "-b", "broker-a")...)
		if !tr.Registered || c.routedLeader() != c.addrOf(tr.NewLeaderID) {
			t.Fatalf("transfer %d: %+v, route %s", i, tr, c.routedLeader())
		}
		testutil.WaitFor(t, 10*time.Second, "writes continue after the transfer", func() bool { return ackCount() > before+50 })
		windows = append(windows, window{start, time.Now()})
	}
	close(stop)
	wg.Wait()
	if len(sendErrs) > 0 {
		t.Fatalf("%d sends failed during transfers, first: %v", len(sendErrs), sendErrs[0])
	}
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []time.Duration
	for _, w := range windows {
		var gap time.Duration
		for i := 1; i < len(acks); i++ {
			if acks[i].After(w.from) && acks[i-1].Before(w.to) {
				gap = max(gap, acks[i].Sub(acks[i-1]))
			}
		}
		gaps = append(gaps, gap)
	}
	t.Logf("write gap per transfer (longest pause between two acks): %v; %d acks", gaps, len(acks))
	for _, g := range gaps {
		if g > 2*time.Second {
			t.Fatalf("a transfer paused writes for %v", g)
		}
	}
}

// TestAdminTable checks the command table itself: every row is complete
// and distinct; its required flags are enforced by name and its
// exactly-one, true/false and time flags are checked as usage errors, all
// before any request is sent; and a row that fails prints nothing.
func TestAdminTable(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	names := map[string]bool{}
	for _, e := range adminCommands {
		sp := e.spec()
		t.Run(sp.name, func(t *testing.T) {
			if !sp.complete {
				t.Fatal("row lacks a short description, a run function or a table renderer")
			}
			if lower := strings.ToLower(sp.name); names[lower] {
				t.Fatalf("two commands named %q ignoring case", sp.name)
			} else {
				names[lower] = true
			}
			kinds := map[string]flagKind{}
			shorts := map[string]bool{"n": true, "h": true} // -n and -h belong to every command
			for _, f := range sp.flags {
				if _, dup := kinds[f.name]; dup || (f.short != "" && shorts[f.short]) {
					t.Fatalf("flag --%s -%s declared twice", f.name, f.short)
				}
				kinds[f.name], shorts[f.short] = f.kind, f.short != ""
			}
			for _, n := range sp.oneOf {
				if k, ok := kinds[n]; !ok || k != kindString {
					t.Fatalf("oneOf names %q, not a text flag of the row", n)
				}
			}

			// valid gives a value each flag accepts; args are the required
			// flags plus the first of oneOf, so the row passes every check.
			valid := func(f flagSpec) string {
				switch f.kind {
				case kindTime:
					return "now"
				case kindInt, kindInt64:
					return "1"
				}
				return "x"
			}
			args := func(skip string) []string {
				a := []string{sp.name, "-n", dead, "--timeout", "200ms"}
				for _, f := range sp.flags {
					if f.name != skip && f.kind != kindSwitch && (f.required || len(sp.oneOf) > 0 && f.name == sp.oneOf[0]) {
						a = append(a, "--"+f.name, valid(f))
					}
				}
				return a
			}
			for _, f := range sp.flags {
				if !f.required {
					continue
				}
				_, err := runAdmin(t, args(f.name)...)
				if err == nil || !strings.Contains(err.Error(), `required flag(s) "`+f.name+`" not set`) {
					t.Errorf("without --%s: %v, want cobra's required-flag error naming it", f.name, err)
				}
			}
			if len(sp.oneOf) > 0 {
				_, err := runAdmin(t, args(sp.oneOf[0])...)
				if !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), "needs exactly one of") {
					t.Errorf("without any of %v: %v, want a usage error", sp.oneOf, err)
				}
				_, err = runAdmin(t, append(args(""), "--"+sp.oneOf[1], "y")...)
				if !errors.Is(err, errAdminUsage) {
					t.Errorf("with all of %v: %v, want a usage error", sp.oneOf, err)
				}
			}
			// A failed command prints nothing on stdout: no half table.
			if out, err := runAdmin(t, args("")...); err == nil || out != "" {
				t.Errorf("against a dead name server: %v, stdout %q; want an error and no output", err, out)
			}
			for _, f := range sp.flags {
				if f.kind != kindYesNo && f.kind != kindTime {
					continue
				}
				_, err := runAdmin(t, append(args(f.name), "--"+f.name, "maybe")...)
				if !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), `-`+f.short+` "maybe"`) {
					t.Errorf("--%s maybe: %v, want a usage error naming -%s", f.name, err, f.short)
				}
			}
		})
	}
}

// TestAdminCommandNames checks name matching: mqadmin ignores case; an
// unknown name is a usage error suggesting close names, exit status 1.
func TestAdminCommandNames(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	// Reaching the name server proves TOPICLIST ran topicList.
	if _, err := runAdmin(t, "TOPICLIST", "-n", dead, "--timeout", "200ms"); !errors.Is(err, errUnreachable) {
		t.Fatalf("TOPICLIST: %v, want topicList's unreachable name server", err)
	}
	_, err := runAdmin(t, "topicLst", "-n", dead, "-t", "T")
	if !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), `unknown command "topicLst"`) ||
		!strings.Contains(err.Error(), "did you mean topicList?") {
		t.Fatalf("topicLst: %v, want an unknown-command usage error suggesting topicList", err)
	}
	if _, err := runAdmin(t, "frobnicate"); !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), "--help") {
		t.Fatalf("frobnicate: %v, want an unknown-command usage error pointing at --help", err)
	}
	if out, err := runAdmin(t); err != nil || !strings.Contains(out, "leadershipTransfer") {
		t.Fatalf("bare `raftmq admin`: %v, want the command list:\n%s", err, out)
	}

	cmd := exec.Command(os.Args[0])
	cmd.Env = mainEnv("admin", "toplist")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "did you mean topicList?") {
		t.Fatalf("raftmq admin toplist: %v, stderr %q; want exit status 1 and a suggestion", err, stderr.String())
	}
}
