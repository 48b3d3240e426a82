package broker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// txnTestConfig makes the check-back quick enough for tests.
func txnTestConfig(c *BrokerConfig) {
	c.TransactionTimeOut = 300 * time.Millisecond
	c.TransactionCheckInterval = 100 * time.Millisecond
	c.TransactionCheckMax = 3
}

// halfSent is what a producer keeps of a half's send result.
type halfSent struct {
	queueOffset int64
	phy         int64
	uniq        string
}

// sendHalf sends a half message (TRAN_MSG=true) of group PG to topic and
// returns its send result.
func sendHalf(t *testing.T, tc *procCluster, addr, topic, body, uniq string) halfSent {
	t.Helper()
	props := wire.EncodeProperties(map[string]string{wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG",
		wire.PropertyUniqKey: uniq, wire.PropertyKeys: "k-" + uniq})
	ext := sendExt(topic, -1, props)
	ext["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransPrepared))
	resp := tc.call(addr, remoting.RequestSendMessage, ext, []byte(body))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send half: %d %s", resp.Code, resp.Remark)
	}
	id, err := wire.ParseMessageID(resp.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	qo, _ := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	return halfSent{queueOffset: qo, phy: id.Offset, uniq: uniq}
}

// endExt is END_TRANSACTION's header for a half.
func endExt(h halfSent, decision int32, fromCheck bool) map[string]string {
	return map[string]string{"producerGroup": "PG", "tranStateTableOffset": strconv.FormatInt(h.queueOffset, 10),
		"commitLogOffset": strconv.FormatInt(h.phy, 10), "commitOrRollback": strconv.Itoa(int(decision)),
		"fromTransactionCheck": strconv.FormatBool(fromCheck), "msgId": h.uniq}
}

// topicBodies lists the bodies stored in topic's queues on node i.
func topicBodies(t *testing.T, pc *procCluster, i int, topic string, queues int32) []string {
	t.Helper()
	var out []string
	st := pc.groups[i].Store()
	for q := int32(0); q < queues; q++ {
		res, err := st.GetMessage("", topic, q, 0, 64, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range res.Messages {
			m, _, err := wire.DecodeMessage(b, true)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(m.Body))
		}
	}
	return out
}

// waitBodies waits until every running node holds exactly want in topic.
func waitBodies(t *testing.T, pc *procCluster, topic string, queues int32, want map[string]int) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, topic+" holds the committed messages on every replica", func() bool {
		for i := range pc.groups {
			if pc.groups[i] == nil {
				continue
			}
			got := map[string]int{}
			for _, b := range topicBodies(t, pc, i, topic, queues) {
				got[b]++
			}
			if len(got) != len(want) {
				return false
			}
			for b, n := range want {
				if got[b] != n {
					return false
				}
			}
		}
		return true
	})
}

// TestTransactionEndOnce: a committed half becomes visible exactly once in
// its real topic on every replica, with its properties and keys (indexed),
// whatever the number of END_TRANSACTIONs (sequential, concurrent, and
// proposed straight to the group past the leader's pre-check); a rolled
// back half never does; the half itself is invisible to consumers of the
// real topic.
func TestTransactionEndOnce(t *testing.T) {
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXE", 4)

	commit := sendHalf(t, pc, addr, "TXE", "commit-me", "U1")
	rollback := sendHalf(t, pc, addr, "TXE", "roll-me-back", "U2")
	if got := topicBodies(t, pc, l, "TXE", 4); len(got) != 0 {
		t.Fatalf("halves visible in the real topic before any decision: %q", got)
	}

	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(commit, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if r := pc.call(addr, remoting.RequestEndTransaction, endExt(commit, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
				t.Errorf("commit: %d %s", r.Code, r.Remark)
			}
		}()
		go func() {
			defer wg.Done()
			// Past the leader's pre-check: only the FSM stands between
			// these and a second copy.
			m := &store.Message{Topic: "TXE", QueueID: 0, Body: []byte("commit-me"), Properties: map[string]string{}}
			if _, err := pc.groups[l].EndTransaction(context.Background(), commit.phy, true, []*store.Message{m}); err != nil {
				t.Errorf("direct commit: %v", err)
			}
		}()
	}
	wg.Wait()
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(rollback, wire.SysFlagTransRollback, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("rollback: %d %s", r.Code, r.Remark)
	}
	// A late repeat of either decision changes nothing and succeeds. A
	// late commit of the rolled-back half changes nothing either, and is
	// refused: that message is never delivered (acknowledged, a producer
	// whose check-back answered rollback before its local transaction
	// committed would believe it was).
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(commit, wire.SysFlagTransCommit, true), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("late commit: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(rollback, wire.SysFlagTransRollback, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("repeated rollback: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(rollback, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSystemError ||
		!strings.Contains(r.Remark, "rolled back") {
		t.Fatalf("commit after rollback: %d %s; want SYSTEM_ERROR saying it was rolled back", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXE", 4, map[string]int{"commit-me": 1})

	// The committed copy keeps the producer's properties and is indexed by key.
	st := pc.groups[l].Store()
	q, err := st.QueryMessage("TXE", "k-U1", 10, 0, time.Now().Add(time.Hour).UnixMilli())
	if err != nil || len(q.Messages) != 1 {
		t.Fatalf("key query: %d messages, %v; want one", len(q.Messages), err)
	}
	m := q.Messages[0]
	if m.UniqKey() != "U1" || m.Properties[wire.PropertyRealTopic] != "" || m.SysFlag&wire.SysFlagTransMask != wire.SysFlagTransCommit ||
		m.PreparedTransactionOffset != commit.phy {
		t.Fatalf("committed message: uniq %q props %v sysflag %#x prepared %d", m.UniqKey(), m.Properties, m.SysFlag, m.PreparedTransactionOffset)
	}
	// Op records mark both halves decided.
	testutil.WaitFor(t, 5*time.Second, "two op records", func() bool {
		return st.GetMaxOffsetInQueue(wire.TopicTransOpHalf, 0) == 2
	})
	// Nobody may send to the transaction system topics.
	if r := pc.call(addr, remoting.RequestSendMessage, sendExt(wire.TopicTransHalf, 0, ""), []byte("x")); r.Code != remoting.ResponseNoPermission {
		t.Fatalf("send to the half topic: %d %s; want NO_PERMISSION", r.Code, r.Remark)
	}
	// A wrong group or offset is refused with a reason.
	bad := endExt(commit, wire.SysFlagTransCommit, false)
	bad["producerGroup"] = "OTHER"
	if r := pc.call(addr, remoting.RequestEndTransaction, bad, nil); r.Code != remoting.ResponseSystemError {
		t.Fatalf("END_TRANSACTION of another group: %d %s", r.Code, r.Remark)
	}
}

// txnProducer is a producer connection that answers check-backs the way
// the official client does: END_TRANSACTION one-way on the connection the
// check came on, with the decision decide gives.
type txnProducer struct {
	cli     *remoting.Client
	mu      sync.Mutex
	checked map[string]int // uniq key → checks received
}

func newTxnProducer(t *testing.T, addrs []string, decide func(uniq string) int32) *txnProducer {
	t.Helper()
	p := &txnProducer{cli: remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop()), checked: map[string]int{}}
	t.Cleanup(func() { _ = p.cli.Close() })
	p.cli.RegisterProcessor(remoting.RequestCheckTransactionState, func(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		var h wire.CheckTransactionStateRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			t.Errorf("check header: %v", err)
			return nil, nil
		}
		m, _, err := wire.DecodeMessage(req.Body, true)
		if err != nil {
			t.Errorf("check body: %v", err)
			return nil, nil
		}
		if m.Topic == wire.TopicTransHalf || m.Properties[wire.PropertyProducerGroup] != "PG" {
			t.Errorf("check body: topic %s props %v; want the real topic and PGROUP", m.Topic, m.Properties)
		}
		p.mu.Lock()
		p.checked[m.UniqKey()]++
		p.mu.Unlock()
		end := remoting.NewRequest(remoting.RequestEndTransaction, nil, nil)
		for k, v := range endExt(halfSent{queueOffset: h.TranStateTableOffset, phy: h.CommitLogOffset, uniq: h.MsgID}, decide(m.UniqKey()), true) {
			end.ExtFields[k] = v
		}
		end.Flag |= remoting.FlagOneway
		_ = conn.InvokeOneway(ctx, end)
		return nil, nil
	})
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@txp", ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "PG"}}})
	for _, a := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := p.cli.InvokeSync(ctx, a, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb))
		cancel()
		if err != nil || resp.Code != remoting.ResponseSuccess {
			t.Fatalf("heartbeat to %s: %v %v", a, resp, err)
		}
	}
	return p
}

func (p *txnProducer) checks(uniq string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checked[uniq]
}

// TestTransactionCheckBack: undecided halves older than transactionTimeOut
// are checked back on the producer's connection; the answers commit or
// roll back; a half whose producer keeps answering "unknown" is checked
// transactionCheckMax times, then discarded (counted) and never delivered,
// even by a late commit; the check progress is replicated, so after a
// leader change the new leader neither re-checks decided halves nor
// forgets the check counts.
func TestTransactionCheckBack(t *testing.T) {
	t.Parallel()
	// Test timings although a failover ends the test: it is not about how
	// fast the group elects, and under production's 250 ms lease a stall
	// of the loaded machine deposed the leader before the first send.
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXC", 2)
	var addrs []string
	for _, n := range pc.nodes {
		addrs = append(addrs, n.Addr())
	}
	p := newTxnProducer(t, addrs, func(uniq string) int32 {
		switch uniq {
		case "C":
			return wire.SysFlagTransCommit
		case "R":
			return wire.SysFlagTransRollback
		}
		return 0
	})
	c := sendHalf(t, pc, addr, "TXC", "checked-commit", "C")
	r := sendHalf(t, pc, addr, "TXC", "checked-rollback", "R")
	u := sendHalf(t, pc, addr, "TXC", "never-known", "U")
	waitBodies(t, pc, "TXC", 2, map[string]int{"checked-commit": 1})
	testutil.WaitFor(t, 10*time.Second, "the unknown half discarded", func() bool {
		return pc.groups[l].TxnDecided(u.phy)
	})
	// The discard follows the last check-back by one round; that check
	// may still be on its way to the producer.
	testutil.WaitFor(t, 5*time.Second, "the producer got the check-backs sent before the discard", func() bool {
		return p.checks("U") >= 3
	})
	if n := p.checks("U"); n != 3 {
		t.Fatalf("unknown half checked %d times; want transactionCheckMax = 3", n)
	}
	// The walker counts a discard once its entry returns, a moment after
	// the state machine applied it.
	testutil.WaitFor(t, 5*time.Second, "the discard counted", func() bool { return counterValue(t, pc.nodes[l].txn.discarded) >= 1 })
	if got := counterValue(t, pc.nodes[l].txn.discarded); got != 1 {
		t.Fatalf("discarded counter %v; want 1", got)
	}
	// A late commit of the discarded half is refused (its message is never
	// delivered); a late rollback changes nothing and succeeds.
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(u, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSystemError ||
		!strings.Contains(r.Remark, "discarded") {
		t.Fatalf("late commit of a discarded half: %d %s; want SYSTEM_ERROR saying it was discarded", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(u, wire.SysFlagTransRollback, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("late rollback of a discarded half: %d %s", r.Code, r.Remark)
	}
	// Every replica agrees, and the floor passed all three halves.
	testutil.WaitFor(t, 5*time.Second, "replicas agree on the decided halves", func() bool {
		for _, g := range pc.groups {
			if !g.TxnDecided(c.phy) || !g.TxnDecided(r.phy) || !g.TxnDecided(u.phy) || g.TxnFloor().FloorQueue != 3 {
				return false
			}
		}
		return true
	})
	waitBodies(t, pc, "TXC", 2, map[string]int{"checked-commit": 1})

	// A new leader resumes from the replicated state: a new unknown half
	// gets checked by it, the old ones are not checked again.
	before := map[string]int{"C": p.checks("C"), "R": p.checks("R"), "U": p.checks("U")}
	pc.stopNode(l)
	nl := pc.leader()
	naddr := pc.nodes[nl].Addr()
	sendHalf(t, pc, naddr, "TXC", "after-failover", "C2")
	testutil.WaitFor(t, 10*time.Second, "the new leader checks the new half", func() bool { return p.checks("C2") > 0 })
	for k, n := range before {
		if p.checks(k) != n {
			t.Fatalf("half %s checked again after the failover (%d → %d)", k, n, p.checks(k))
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// goldenTxnImage is the transaction part of a snapshot image as brokers
// write it (stateImage.Txn; absent while the table is empty, so older
// images keep their bytes: TestSnapshotImageGolden).
const goldenTxnImage = `{"decided":{"700":1700000000002},"checks":{"900":2},"floorQueue":3,"floorPhy":600}`

// TestTxnTableImageAndPrune: the table's snapshot image is pinned, loads
// back, and the floor prunes what is below it while still answering
// "decided" for it.
func TestTxnTableImageAndPrune(t *testing.T) {
	s := newState(0, 0)
	s.applyLocked(&Command{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 3, FloorPhy: 600, Checked: []int64{900, 900, 500}}}, 1700000000001)
	s.txn.decide(700, 1700000000002)
	s.txn.decide(550, 1700000000002) // below the floor: nothing to keep
	b, err := json.Marshal(s.imageLocked().Txn)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != goldenTxnImage {
		t.Fatalf("txn image\n got %s\nwant %s", b, goldenTxnImage)
	}
	var img txnImage
	if err := json.Unmarshal([]byte(goldenTxnImage), &img); err != nil {
		t.Fatal(err)
	}
	s2 := newState(0, 0)
	s2.loadLocked(stateImage{Txn: &img})
	if !s2.txnDecided(700) || !s2.txnDecided(10) || s2.txnDecided(900) || s2.txnChecks(900) != 2 || s2.txnFloor().FloorQueue != 3 {
		t.Fatalf("loaded table: %+v", s2.txn)
	}
	// Moving the floor prunes decided and checked halves below it.
	s2.applyLocked(&Command{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 5, FloorPhy: 1000, Discarded: []int64{1200}}}, 1700000000003)
	if len(s2.txn.decided) != 1 || len(s2.txn.checks) != 0 || !s2.txnDecided(1200) || !s2.txnDecided(700) {
		t.Fatalf("after the floor moved: decided %v checks %v", s2.txn.decided, s2.txn.checks)
	}
	if img := newState(0, 0).imageLocked(); img.Txn != nil {
		t.Fatalf("empty table in the image: %+v", img.Txn)
	}
}

// TestTxnTableDiscards: a discarded half stays known past the floor (a
// late commit of it must be refused), also through the image; a half
// decided before its discard applied is not marked discarded; the set is
// capped, dropping the lowest offsets.
func TestTxnTableDiscards(t *testing.T) {
	s := newState(0, 0)
	s.txn.decide(300, 1)
	s.applyLocked(&Command{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 3, FloorPhy: 600, Discarded: []int64{200, 300}}}, 2)
	if !s.txnDiscarded(200) || s.txnDiscarded(300) || !s.txnDecided(200) {
		t.Fatalf("discarded %v decided %v", s.txn.discarded, s.txn.decided)
	}
	var img txnImage
	b, err := json.Marshal(s.imageLocked().Txn)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &img); err != nil {
		t.Fatal(err)
	}
	s2 := newState(0, 0)
	s2.loadLocked(stateImage{Txn: &img})
	if !s2.txnDiscarded(200) || s2.txnDiscarded(300) {
		t.Fatalf("after the image %s: discarded %v", b, s2.txn.discarded)
	}
	var many []int64
	for h := int64(1000); h < 1000+maxTxnDiscardsKept+maxTxnDiscardsKept/8+1; h++ {
		many = append(many, h)
	}
	s2.applyLocked(&Command{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 4, FloorPhy: 600, Discarded: many}}, 3)
	if n := len(s2.txn.discarded); n < maxTxnDiscardsKept || n > maxTxnDiscardsKept+maxTxnDiscardsKept/8 ||
		s2.txnDiscarded(200) || !s2.txnDiscarded(many[len(many)-1]) {
		t.Fatalf("after %d more discards: %d kept, 200 kept %v", len(many), n, s2.txnDiscarded(200))
	}
}

// TestTxnTableRollbacks: a rolled-back half stays known past the floor (a
// later commit of it must be refused), also through the image; a commit
// is not one; the set is capped, dropping the lowest offsets.
func TestTxnTableRollbacks(t *testing.T) {
	s := newState(0, 0)
	s.txn.rollBack(700, 1) // as the FSM applies a rollback's CmdTxnEnd
	s.txn.decide(700, 1)
	s.txn.decide(800, 1) // and a commit's
	s.applyLocked(&Command{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 3, FloorPhy: 900}}, 2)
	if !s.txnRolledBack(700) || s.txnRolledBack(800) || !s.txnDecided(700) {
		t.Fatalf("rolled back %v decided %v", s.txn.rolledBack, s.txn.decided)
	}
	b, err := json.Marshal(s.imageLocked().Txn)
	if err != nil {
		t.Fatal(err)
	}
	var img txnImage
	if err := json.Unmarshal(b, &img); err != nil {
		t.Fatal(err)
	}
	s2 := newState(0, 0)
	s2.loadLocked(stateImage{Txn: &img})
	if !s2.txnRolledBack(700) || s2.txnRolledBack(800) {
		t.Fatalf("after the image %s: rolled back %v", b, s2.txn.rolledBack)
	}
	for h := int64(1000); h < 1000+maxTxnDiscardsKept+maxTxnDiscardsKept/8+1; h++ {
		s2.txn.rollBack(h, 3)
	}
	if n := len(s2.txn.rolledBack); n < maxTxnDiscardsKept || n > maxTxnDiscardsKept+maxTxnDiscardsKept/8 || s2.txnRolledBack(700) {
		t.Fatalf("after many rollbacks: %d kept, 700 kept %v", n, s2.txnRolledBack(700))
	}
}

// TestTransactionSurvivesSnapshotRestart: the decided set and the check
// progress come back from a snapshot (no log entry replays them): after
// every member snapshotted and restarted, a late commit of a committed
// half still changes nothing.
func TestTransactionSurvivesSnapshotRestart(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { txnTestConfig(c); withProdRaftTimings(c) })
	addr := pc.nodes[pc.leader()].Addr()
	pc.createTopic(addr, "TXS", 2)
	h := sendHalf(t, pc, addr, "TXS", "once", "S1")
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXS", 2, map[string]int{"once": 1})
	testutil.WaitFor(t, 10*time.Second, "the check walk passed the half everywhere", func() bool {
		for _, g := range pc.groups {
			if g.TxnFloor().FloorQueue != 1 {
				return false
			}
		}
		return true
	})
	for i, g := range pc.groups {
		if _, err := g.SnapshotAndTruncate(); err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
	}
	for i := range pc.groups {
		pc.stopNode(i)
	}
	for i := range pc.groups {
		pc.startNode(i)
	}
	l := pc.leader()
	pc.waitLeaderRegistered()
	for i, g := range pc.groups {
		if !g.TxnDecided(h.phy) || g.TxnFloor().FloorQueue != 1 {
			t.Fatalf("node %d after restart: decided %v floor %+v", i, g.TxnDecided(h.phy), g.TxnFloor())
		}
	}
	if r := pc.call(pc.nodes[l].Addr(), remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, true), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("late commit: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXS", 2, map[string]int{"once": 1})
}

// TestTransactionConfigKeys: RocketMQ's transaction keys load from a
// broker.conf (bare numbers are milliseconds) and bad values are refused
// naming the key (BrokerConfig.Validate runs this check).
func TestTransactionConfigKeys(t *testing.T) {
	path := t.TempDir() + "/broker.conf"
	if err := os.WriteFile(path, []byte("transactionTimeOut=3000\ntransactionCheckInterval=10s\ntransactionCheckMax=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if cfg.TransactionTimeOut != 6*time.Second || cfg.TransactionCheckInterval != time.Minute || cfg.TransactionCheckMax != 15 {
		t.Fatalf("defaults %+v; want RocketMQ's 6 s, 60 s, 15", cfg.TransactionConfig)
	}
	if err := config.LoadFile(path, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.TransactionTimeOut != 3*time.Second || cfg.TransactionCheckInterval != 10*time.Second || cfg.TransactionCheckMax != 4 {
		t.Fatalf("loaded %+v", cfg.TransactionConfig)
	}
	if cfg.RejectTransactionMessage {
		t.Fatal("rejectTransactionMessage on by default")
	}
	cfg.TransactionCheckMax = 0
	if err := cfg.TransactionConfig.validate(); !errors.Is(err, ErrInvalidBrokerConfig) || !strings.Contains(err.Error(), "transactionCheckMax") {
		t.Fatalf("transactionCheckMax=0: %v", err)
	}
}

// TestTransactionFollowerAndDelay: a follower answers END_TRANSACTION
// not-leader with the leader's address; a committed half with a delay
// level or a timer property is delivered to its real topic after the
// delay, counted from the commit, not before.
func TestTransactionFollowerAndDelay(t *testing.T) {
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXD", 1)
	props := wire.EncodeProperties(map[string]string{wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG",
		wire.PropertyUniqKey: "D1", wire.PropertyDelayTimeLevel: "3"})
	resp := pc.call(addr, remoting.RequestSendMessage, sendExt("TXD", 0, props), []byte("delayed"))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send half: %d %s", resp.Code, resp.Remark)
	}
	id, _ := wire.ParseMessageID(resp.ExtFields["msgId"])
	qo, _ := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	h := halfSent{queueOffset: qo, phy: id.Offset, uniq: "D1"}

	f := (l + 1) % len(pc.nodes)
	// A follower that has not heard from the leader yet answers not-leader
	// without a hint ("election in progress"); it names the leader once it
	// has.
	testutil.WaitFor(t, 10*time.Second, "a follower's END_TRANSACTION refusal naming the leader "+addr, func() bool {
		r := pc.call(pc.nodes[f].Addr(), remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, false), nil)
		if r.Code != remoting.ResponseServiceNotAvailable {
			t.Fatalf("END_TRANSACTION on a follower: %d %s %v; want not-leader", r.Code, r.Remark, r.ExtFields)
		}
		return r.ExtFields[wire.ExtLeaderAddr] == addr
	})
	committed := time.Now()
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXD", 1, map[string]int{"delayed": 1})
	if d := time.Since(committed); d < 400*time.Millisecond { // level 3 is 400 ms in the test table
		t.Fatalf("delivered %v after the commit; want the level's delay", d)
	}

	// A timer property works the same way.
	props = wire.EncodeProperties(map[string]string{wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG",
		wire.PropertyUniqKey: "D2", wire.PropertyTimerDelayMs: "700"})
	resp = pc.call(addr, remoting.RequestSendMessage, sendExt("TXD", 0, props), []byte("timed"))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send timed half: %d %s", resp.Code, resp.Remark)
	}
	id, _ = wire.ParseMessageID(resp.ExtFields["msgId"])
	qo, _ = strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	committed = time.Now()
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(halfSent{queueOffset: qo, phy: id.Offset, uniq: "D2"}, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit timed: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXD", 1, map[string]int{"delayed": 1, "timed": 1})
	// The timer service works in whole milliseconds: allow it that much.
	if d := time.Since(committed); d < 690*time.Millisecond {
		t.Fatalf("timed message delivered %v after the commit; want 700 ms", d)
	}
}

// TestTransactionRejected: with rejectTransactionMessage a half is refused
// with NO_PERMISSION naming the key, and nothing is stored.
func TestTransactionRejected(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { c.RejectTransactionMessage = true })
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXJ", 1)
	props := wire.EncodeProperties(map[string]string{wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG"})
	if r := pc.call(addr, remoting.RequestSendMessage, sendExt("TXJ", 0, props), []byte("half")); r.Code != remoting.ResponseNoPermission ||
		!strings.Contains(r.Remark, "rejectTransactionMessage") {
		t.Fatalf("half: %d %s; want NO_PERMISSION naming rejectTransactionMessage", r.Code, r.Remark)
	}
	if _, ok := pc.groups[l].State().Topic(wire.TopicTransHalf); ok {
		t.Fatal("the half topic was created for a refused half")
	}
}
