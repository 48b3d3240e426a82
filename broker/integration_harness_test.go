package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// procCluster is a name server plus brokers on loopback for tests.
type procCluster struct {
	t      *testing.T
	ns     *namesrv.NameServer
	nsAddr string
	nodes  []*Controller
	client *remoting.Client
	// Real clusters only: the group and config of each node.
	groups []*Group
	cfgs   []BrokerConfig
	// Real clusters on in-memory Raft parts: their network and each
	// node's parts (nil net: files and TCP).
	net     *InmemNetwork
	parts   []Parts
	started []bool
	run     []*Node
}

// startProcNameServer starts a real name server on a free loopback port.
func startProcNameServer(t *testing.T) (*namesrv.NameServer, string) {
	return startProcNameServerWith(t, nil)
}

// startProcNameServerWith starts a name server after mutate adjusted its
// config (e.g. gossipEnable).
func startProcNameServerWith(t *testing.T, mutate func(*namesrv.Config)) (*namesrv.NameServer, string) {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.KVConfigPath = t.TempDir() + "/kv.json"
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := namesrv.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return n, n.Addr().String()
}

// testBrokerConfig is a broker config for loopback tests: short timers,
// a short custom delay table ("1s" levels would make tests slow), the test
// clusters' Raft timings.
func testBrokerConfig(t *testing.T, nsAddr string, port int) BrokerConfig {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.BrokerIP1, cfg.ListenPort = "127.0.0.1", "127.0.0.1", port
	cfg.VipChannelEnabled = false
	// listenPort+2 is not reserved by FreePort; gossip tests turn it on
	// with explicit free ports.
	cfg.GossipEnable = false
	cfg.MetricsPort = -1
	cfg.NamesrvAddr = nsAddr
	cfg.MessageDelayLevel = "200ms 300ms 400ms 500ms 600ms 700ms 800ms 900ms 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
	cfg.PullHoldCheckInterval = 200 * time.Millisecond
	cfg.ScheduleMessageCheckInterval = 50 * time.Millisecond
	cfg.TopicChangeCheckInterval = 50 * time.Millisecond
	cfg.ConsumerOffsetCommitCoalescer = 20 * time.Millisecond
	cfg.SendMessageThreadPoolNums, cfg.PullMessageThreadPoolNums = 8, 8
	cfg.Store.MaxMessageSize = 1 << 20
	cfg.RaftBatchMaxBytes = 1 << 20
	testRaftTimings(&cfg.Raft)
	return cfg
}

// withProdRaftTimings is a cluster mutate func for tests about failover,
// elections, leases or transfers: production's Raft timings
// (testRaftTimings says why the others run longer ones).
func withProdRaftTimings(c *BrokerConfig) { prodRaftTimings(&c.Raft) }

// startFakeProc starts one broker over a fakeReplica (storeOpts as
// newFakeReplica takes them).
func startFakeProc(t *testing.T, mutate func(*BrokerConfig), storeOpts ...func(*store.Config)) (*procCluster, *fakeReplica) {
	t.Helper()
	ns, nsAddr := startProcNameServer(t)
	port := testutil.FreePort(t)
	cfg := testBrokerConfig(t, nsAddr, port)
	if mutate != nil {
		mutate(&cfg)
	}
	rep := newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port), storeOpts...)
	c, err := New(cfg, rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	tc := &procCluster{t: t, ns: ns, nsAddr: nsAddr, nodes: []*Controller{c},
		client: remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())}
	t.Cleanup(func() {
		_ = tc.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return tc, rep
}

// sendAt sends body to topic's queue 0 at addr and returns the stored
// message's physical offset (from its offset msgId).
func (tc *procCluster) sendAt(addr, topic string, body []byte) int64 {
	tc.t.Helper()
	r := tc.call(addr, remoting.RequestSendMessage, sendExt(topic, 0, ""), body)
	if r.Code != remoting.ResponseSuccess {
		tc.t.Fatalf("send to %s: %d %s", topic, r.Code, r.Remark)
	}
	id, err := wire.ParseMessageID(r.ExtFields["msgId"])
	if err != nil {
		tc.t.Fatal(err)
	}
	return id.Offset
}

// call sends a request to a node and returns the response.
func (tc *procCluster) call(addr string, code int16, ext map[string]string, body []byte) *remoting.RemotingCommand {
	tc.t.Helper()
	req := remoting.NewRequest(code, nil, body)
	for k, v := range ext {
		req.ExtFields[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tc.client.InvokeSync(ctx, addr, req)
	if err != nil {
		tc.t.Fatalf("call code %d to %s: %v", code, addr, err)
	}
	return resp
}

// createTopic creates a topic through UPDATE_AND_CREATE_TOPIC on addr and
// waits until the name server routes it.
func (tc *procCluster) createTopic(addr, topic string, queues int) {
	tc.t.Helper()
	if resp := tc.tryCreateTopic(addr, topic, queues); resp.Code != remoting.ResponseSuccess {
		tc.t.Fatalf("create topic %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	tc.waitRoute(topic)
}

func (tc *procCluster) tryCreateTopic(addr, topic string, queues int) *remoting.RemotingCommand {
	tc.t.Helper()
	return tc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": wire.TopicAutoCreate, "readQueueNums": strconv.Itoa(queues),
		"writeQueueNums": strconv.Itoa(queues), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil)
}

// createTopicOnLeader creates a topic on whichever member leads and
// returns that member's index. On a loaded machine leadership can move
// between finding the leader and the request (NOT_LEADER); the request is
// then sent to the new leader.
func (pc *procCluster) createTopicOnLeader(topic string, queues int) int {
	pc.t.Helper()
	l := -1
	testutil.WaitFor(pc.t, 30*time.Second, "a leader that creates "+topic, func() bool {
		l = pc.leader()
		resp := pc.tryCreateTopic(pc.nodes[l].Addr(), topic, queues)
		switch resp.Code {
		case remoting.ResponseSuccess:
			return true
		case remoting.ResponseServiceNotAvailable: // not the leader (any more)
			return false
		}
		pc.t.Fatalf("create topic %s: code %d %s", topic, resp.Code, resp.Remark)
		return false
	})
	pc.waitRoute(topic)
	return l
}

// wipeBehindSnapshot stops member f once it has applied everything the
// leader lg has, wipes its files, has more stored meanwhile (putMore), then
// snapshots lg and deletes lg's log below 1 MiB past its start: f, started
// again, must install the snapshot and catch up on the messages before it.
// The test is skipped when leadership moved while f was down.
func (pc *procCluster) wipeBehindSnapshot(t *testing.T, lg *Group, f int, putMore func()) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "the follower applies everything", func() bool {
		return pc.groups[f].FSMAppliedIndex() >= lg.FSMAppliedIndex()
	})
	pc.stopNode(f)
	if err := os.RemoveAll(pc.cfgs[f].Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	putMore()
	if l := pc.leader(); pc.groups[l] != lg {
		t.Skip("leadership moved while the follower was down; the test needs one leader throughout")
	}
	if err := lg.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	idx, err := lg.LogStore().FirstIndexFrom(lg.LogStore().MinPosition() + 1<<20)
	if err != nil || idx == 0 {
		t.Fatalf("first index: %d, %v", idx, err)
	}
	if _, err := lg.LogStore().DeleteSegmentsBefore(idx); err != nil {
		t.Fatal(err)
	}
}

// callOnLeader sends a request to whichever member leads, again to the
// next leader while the answer is "not leader" (on a loaded machine a
// leader can lose its lease right after the election), and returns the
// answering member's index and its answer.
func (pc *procCluster) callOnLeader(code int16, ext map[string]string, body []byte) (int, *remoting.RemotingCommand) {
	pc.t.Helper()
	l := -1
	var resp *remoting.RemotingCommand
	testutil.WaitFor(pc.t, 30*time.Second, fmt.Sprintf("a leader that answers request %d", code), func() bool {
		l = pc.leader()
		resp = pc.call(pc.nodes[l].Addr(), code, ext, body)
		return resp.Code != remoting.ResponseServiceNotAvailable || !wire.IsNotLeaderRemark(resp.Remark)
	})
	return l, resp
}

func (tc *procCluster) waitRoute(topic string) {
	tc.t.Helper()
	testutil.WaitFor(tc.t, 10*time.Second, "name server routes "+topic, func() bool {
		rd := tc.ns.Routes().PickupTopicRouteData(topic)
		if rd == nil {
			return false
		}
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerAddrs[0] != "" {
				return true
			}
		}
		return false
	})
}

// sendExt is the SEND_MESSAGE header of a plain message.
func sendExt(topic string, queueID int, props string) map[string]string {
	return map[string]string{
		"producerGroup": "PG", "topic": topic, "defaultTopic": wire.TopicAutoCreate, "defaultTopicQueueNums": "4",
		"queueId": strconv.Itoa(queueID), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}
}

func pullExt(group, topic string, queueID int, offset int64, suspendMillis int64) map[string]string {
	sys := "0"
	if suspendMillis > 0 {
		sys = "2"
	}
	return map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queueID), "queueOffset": strconv.FormatInt(offset, 10),
		"maxMsgNums": "32", "sysFlag": sys, "commitOffset": "0", "suspendTimeoutMillis": strconv.FormatInt(suspendMillis, 10),
		"subVersion": "0",
	}
}

// testLogger is zap.NewNop unless RAFTMQ_TEST_LOG=1 asks for debug logs.
func testLogger() *zap.Logger {
	if os.Getenv("RAFTMQ_TEST_LOG") == "1" {
		l, _ := zap.NewDevelopment()
		return l
	}
	return zap.NewNop()
}

// startRealCluster starts a name server and a 3-node Raft group (real
// NewGroup with a Controller on each node, serving clients over TCP) and
// waits until a leader is registered as brokerId 0. The Raft members run
// on in-memory parts (no fsync, no Raft ports); startDiskCluster puts them
// on files and TCP.
func startRealCluster(t *testing.T, mutate func(*BrokerConfig)) *procCluster {
	t.Helper()
	ns, nsAddr := startProcNameServer(t)
	return startRealClusterOn(t, ns, nsAddr, mutate)
}

// startDiskCluster is startRealCluster with the Raft members on files and
// TCP (official-client integration, restarts from disk).
func startDiskCluster(t *testing.T, mutate func(*BrokerConfig)) *procCluster {
	t.Helper()
	ns, nsAddr := startProcNameServer(t)
	return startClusterOn(t, ns, nsAddr, true, mutate)
}

// startRealClusterOn is startRealCluster with a given name server.
func startRealClusterOn(t *testing.T, ns *namesrv.NameServer, nsAddr string, mutate func(*BrokerConfig)) *procCluster {
	return startClusterOn(t, ns, nsAddr, false, mutate)
}

func startClusterOn(t *testing.T, ns *namesrv.NameServer, nsAddr string, disk bool, mutate func(*BrokerConfig)) *procCluster {
	t.Helper()
	base := t.TempDir()
	ids := []string{"n0", "n1", "n2"}
	var peers []string
	for i, id := range ids {
		port := 20910 + i // in memory only a name
		if disk {
			port = testutil.FreePort(t)
		}
		peers = append(peers, id+"-127.0.0.1:"+strconv.Itoa(port))
	}
	pc := &procCluster{t: t, ns: ns, nsAddr: nsAddr,
		client: remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())}
	if !disk {
		pc.net = NewInmemNetwork()
	}
	for _, id := range ids {
		cfg := testBrokerConfig(t, nsAddr, testutil.FreePort(t))
		cfg.Store.StorePathRootDir = base + "/" + id
		// 4 MiB, as newTestCluster's: it holds the largest message (1 MiB)
		// and keeps a segment's first sync cheap on in-memory parts, where
		// the FS reads the whole file (paid at every cluster's bootstrap).
		cfg.Store.MappedFileSizeCommitLog = 4 << 20
		cfg.Store.MappedFileSizeConsumeQueue = 20_000 * store.CQUnitSize
		cfg.Store.MaxHashSlotNum, cfg.Store.MaxIndexNum = 5000, 20000
		cfg.Raft.DLegerPeers = strings.Join(peers, ";")
		cfg.Raft.DLegerSelfID = id
		if mutate != nil {
			mutate(&cfg)
		}
		if err := cfg.Derive(); err != nil {
			t.Fatal(err)
		}
		pc.cfgs = append(pc.cfgs, cfg)
		pc.nodes = append(pc.nodes, nil)
		pc.groups = append(pc.groups, nil)
		pc.run = append(pc.run, nil)
		var p Parts
		if pc.net != nil {
			var err error
			if p, err = NewInmemParts(cfg.GroupConfig, pc.net); err != nil {
				t.Fatal(err)
			}
		}
		pc.parts, pc.started = append(pc.parts, p), append(pc.started, false)
	}
	t.Cleanup(func() {
		_ = pc.client.Close()
		for i := range pc.nodes {
			pc.stopNode(i)
		}
	})
	pc.startNodes(0, 1, 2)
	electNow(t, pc.groups)
	pc.waitGroupRouted()
	pc.logTermMoves()
	return pc
}

// logTermMoves logs, at cleanup, the group's Raft term at readiness and
// at the end when they differ: in a test that is not about failover a
// moved term is a spurious election (a leader that lost its lease on a
// loaded machine), the first thing to rule out when such a test fails.
func (pc *procCluster) logTermMoves() {
	ready := pc.term()
	pc.t.Cleanup(func() {
		if end := pc.term(); end != ready {
			pc.t.Logf("raft term moved after readiness: %d -> %d", ready, end)
		}
	})
}

// term is the highest Raft term among the running members.
func (pc *procCluster) term() uint64 { return maxTerm(pc.groups) }

// waitGroupRouted waits until the name server routes the group the way a
// client's first send needs it (groupRouted), judged at one look: a
// leader that loses its lease right after the election (a loaded machine
// under -race) registers again as a follower, so a leader seen registered
// earlier says nothing about the route now.
func (pc *procCluster) waitGroupRouted() {
	pc.t.Helper()
	name, autoCreate := pc.cfgs[0].BrokerName, pc.cfgs[0].AutoCreateTopicEnable
	testutil.WaitFor(pc.t, 15*time.Second, "group routed with the leader as master and every member", func() bool {
		leader := ""
		if l := pc.leading(); l >= 0 {
			leader = pc.nodes[l].Addr()
		}
		return groupRouted(pc.ns.Routes().ClusterInfo(), pc.ns.Routes().PickupTopicRouteData(wire.TopicAutoCreate),
			name, leader, len(pc.cfgs), autoCreate)
	})
}

// groupRouted reports whether ci and tbw (the name server's cluster table
// and its route of TBW102) route group brokerName for clients:
// leaderAddr, the member leading now, is brokerId 0 and all members are
// registered (a member started after the others elected joins rather
// than bootstraps, member_join.go, and registers only once the leader
// replicated the configuration to it; tests that forward to every member
// or count the routed ones start from the full route). With autoCreate
// the official client's first send to a new topic uses TBW102's route,
// and skips a broker without a master or writable queues there.
func groupRouted(ci *wire.ClusterInfo, tbw *wire.TopicRouteData, brokerName, leaderAddr string, members int, autoCreate bool) bool {
	bd, ok := ci.BrokerAddrTable[brokerName]
	if !ok || leaderAddr == "" || bd.BrokerAddrs[wire.MasterID] != leaderAddr || len(bd.BrokerAddrs) != members {
		return false
	}
	if !autoCreate {
		return true
	}
	if tbw == nil {
		return false
	}
	writable := false
	for _, qd := range tbw.QueueDatas {
		writable = writable || qd.BrokerName == brokerName && qd.Perm&wire.PermWrite != 0 && qd.WriteQueueNums > 0
	}
	for _, b := range tbw.BrokerDatas {
		if b.BrokerName == brokerName {
			return writable && b.BrokerAddrs[wire.MasterID] == leaderAddr
		}
	}
	return false
}

// startNode starts (or restarts) node i: group, then controller.
func (pc *procCluster) startNode(i int) {
	pc.t.Helper()
	pc.startNodes(i)
}

// startNodes starts nodes at once, each on its own goroutine, as a
// group's processes start on their hosts: every member's join check then
// finds the others in theirs (member_join.go) instead of waiting out
// raftAskTimeout for a member not started yet.
func (pc *procCluster) startNodes(idx ...int) {
	pc.t.Helper()
	for _, i := range idx {
		pc.prepareStart(i)
	}
	nodes := make([]*Node, len(idx))
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[k], errs[k] = pc.openNode(i)
		}()
	}
	wg.Wait()
	for k, i := range idx {
		if n := nodes[k]; n != nil {
			pc.run[i], pc.groups[i], pc.nodes[i] = n, n.Group(), n.Controller()
		}
	}
	if err := errors.Join(errs...); err != nil {
		pc.t.Fatal(err) // the cleanup stops the nodes that started
	}
}

// prepareStart readies node i's in-memory parts for a start: a restart
// gets a new transport (Close closed the previous run's).
func (pc *procCluster) prepareStart(i int) {
	if pc.net == nil {
		return
	}
	if pc.run[i] == nil && pc.started[i] {
		pc.parts[i] = pc.net.Reopen(pc.parts[i])
	}
	pc.started[i] = true
}

// openNode opens and starts node i's Node; it touches no shared state,
// so nodes open side by side.
func (pc *procCluster) openNode(i int) (*Node, error) {
	cfg := pc.cfgs[i]
	var n *Node
	var err error
	if pc.net != nil {
		n, err = NewNode(cfg, pc.parts[i], testLogger())
	} else {
		n, err = OpenNode(cfg, testLogger())
	}
	if err != nil {
		return nil, fmt.Errorf("start node %d: %w", i, err)
	}
	if err := n.Start(); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

// stopNode shuts node i down (controller, then group) without handing
// leadership off: a stopped leader looks to the others like a crashed one.
func (pc *procCluster) stopNode(i int) {
	if pc.run[i] == nil {
		return
	}
	_ = pc.run[i].close(false)
	pc.run[i], pc.nodes[i], pc.groups[i] = nil, nil, nil
}

// shutdownNode is a planned stop of node i (Node.Close, as on SIGTERM): a
// leader hands leadership off first. It returns the Raft id that took
// over, "" when none did.
func (pc *procCluster) shutdownNode(i int) string {
	pc.t.Helper()
	n := pc.run[i]
	if err := n.Close(); err != nil {
		pc.t.Fatalf("close node %d: %v", i, err)
	}
	pc.run[i], pc.nodes[i], pc.groups[i] = nil, nil, nil
	return n.handedOffTo
}

// leader returns the index of the node that leads (waiting for one).
func (pc *procCluster) leader() int {
	pc.t.Helper()
	idx := -1
	testutil.WaitFor(pc.t, 15*time.Second, "a raft leader", func() bool {
		idx = pc.leading()
		return idx >= 0
	})
	return idx
}

// leading returns the index of a node that leads now, or -1.
func (pc *procCluster) leading() int {
	for i, g := range pc.groups {
		if g != nil && g.IsLeader() {
			return i
		}
	}
	return -1
}

// waitLeaderRegistered waits until the name server's cluster table names
// the current leader as brokerId 0.
func (pc *procCluster) waitLeaderRegistered() {
	pc.t.Helper()
	testutil.WaitFor(pc.t, 15*time.Second, "leader registered as brokerId 0", func() bool {
		l := pc.leading()
		if l < 0 {
			return false
		}
		ci := pc.ns.Routes().ClusterInfo()
		bd, ok := ci.BrokerAddrTable[pc.cfgs[l].BrokerName]
		return ok && bd.BrokerAddrs[0] == pc.nodes[l].Addr()
	})
}

// sentOffset is the CommitLog offset a successful send's answer names.
func sentOffset(t *testing.T, what string, resp *remoting.RemotingCommand) int64 {
	t.Helper()
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send %s: %d %s", what, resp.Code, resp.Remark)
	}
	id, err := wire.ParseMessageID(resp.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	return id.Offset
}
