package broker

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/internal/testutil"
)

// Transactions with the UNMODIFIED official Go client's
// NewTransactionProducer against a real 3-node group: commit, rollback,
// unknown-then-check-back, a producer killed after its half (the
// check-back reaches a restarted producer of the group) and the leader
// killed between the half and the commit.

// officialTxnConfig: quick check-backs, and enough of them that a half
// waiting for a restarted producer is never discarded in a test.
func officialTxnConfig(c *BrokerConfig) {
	c.TransactionTimeOut = 300 * time.Millisecond
	c.TransactionCheckInterval = 100 * time.Millisecond
	c.TransactionCheckMax = 100000
}

// txListener decides by the body's prefix: "commit-" commits,
// "rollback-" rolls back, anything else is unknown when executed; checks
// answer check(body) (commit when nil). It counts the checks by body.
type txListener struct {
	onExecute func(body string)
	check     func(body string) primitive.LocalTransactionState
	mu        sync.Mutex
	checked   map[string]int
}

func newTxListener() *txListener { return &txListener{checked: map[string]int{}} }

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	body := string(m.Body)
	if l.onExecute != nil {
		l.onExecute(body)
	}
	switch {
	case strings.HasPrefix(body, "commit-"):
		return primitive.CommitMessageState
	case strings.HasPrefix(body, "rollback-"):
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	body := string(m.Body)
	l.mu.Lock()
	l.checked[body]++
	l.mu.Unlock()
	if l.check != nil {
		return l.check(body)
	}
	return primitive.CommitMessageState
}

func (l *txListener) checks(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked[body]
}

// officialTxnProducer starts an official transaction producer of group
// with its own client instance (instance "" picks a new name).
func officialTxnProducer(t *testing.T, nsAddr, group, instance string, l primitive.TransactionListener) rocketmq.TransactionProducer {
	t.Helper()
	if instance == "" {
		instance = "tx" + strconv.FormatInt(instanceSeq.Add(1), 10)
	}
	tp, err := rocketmq.NewTransactionProducer(l,
		producer.WithNameServer(primitive.NamesrvAddr{nsAddr}),
		producer.WithGroupName(group),
		producer.WithInstanceName(instance),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown() }) // Shutdown runs once however often it is called
	return tp
}

// sendTx sends one transactional message and requires SEND_OK.
func sendTx(t *testing.T, tp rocketmq.TransactionProducer, topic, body string) *primitive.TransactionSendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := tp.SendMessageInTransaction(ctx, primitive.NewMessage(topic, []byte(body)).WithKeys([]string{"key-" + body}))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send %s: %v %v", body, res, err)
	}
	return res
}

// consumeExactly starts an official push consumer on topic and waits
// until it received exactly want (each once); then it waits a little
// longer for anything else (a rolled-back or duplicated message) to show.
func consumeExactly(t *testing.T, pc *procCluster, group, topic string, want []string) {
	t.Helper()
	got := newBodySet()
	officialPushConsumer(t, pc.nsAddr, group, topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		got.add(msgs...)
		return consumer.ConsumeSuccess, nil
	})
	testutil.WaitFor(t, 30*time.Second, "every committed message consumed", func() bool {
		for _, b := range want {
			if !got.has(b) {
				return false
			}
		}
		return true
	})
	storedExactly(t, pc, topic, want)
	got.mu.Lock()
	defer got.mu.Unlock()
	if len(got.seen) != len(want) {
		t.Fatalf("consumed %v; want exactly %v", got.seen, want)
	}
	for b, n := range got.seen {
		if n != 1 {
			t.Fatalf("%s consumed %d times; want once (all: %v)", b, n, got.seen)
		}
	}
}

// storedExactly waits until every running replica holds each of want
// once in topic and nothing else: a message stored twice never goes away,
// so the wait fails rather than passing on a window.
func storedExactly(t *testing.T, pc *procCluster, topic string, want []string) {
	t.Helper()
	tc, ok := pc.groups[pc.leader()].State().Topic(topic)
	if !ok {
		t.Fatalf("topic %s unknown to the leader", topic)
	}
	m := map[string]int{}
	for _, b := range want {
		m[b]++
	}
	waitBodies(t, pc, topic, int32(tc.ReadQueueNums), m)
}

// waitProducerEverywhere waits until every running node's producer table
// has group (the official client heartbeats every broker of its routes).
func waitProducerEverywhere(t *testing.T, pc *procCluster, group string) {
	t.Helper()
	testutil.WaitFor(t, 40*time.Second, "producer "+group+" registered on every node", func() bool {
		for _, n := range pc.nodes {
			if n != nil && n.clients.producerChannel(group) == nil {
				return false
			}
		}
		return true
	})
}

// TestOfficialTransactions: commit, rollback and unknown-then-check-back
// with the official transaction producer; the consumer gets every
// committed message exactly once and no rolled-back one.
func TestOfficialTransactions(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startRealCluster(t, officialTxnConfig)
	pc.createTopicOnLeader("OTX", 4)
	l := newTxListener()
	tp := officialTxnProducer(t, pc.nsAddr, "OTXPG", "", l)
	var want []string
	for i := 0; i < 10; i++ {
		b := "commit-" + strconv.Itoa(i)
		res := sendTx(t, tp, "OTX", b)
		if res.State != primitive.CommitMessageState {
			t.Fatalf("%s: state %v", b, res.State)
		}
		want = append(want, b)
		sendTx(t, tp, "OTX", "rollback-"+strconv.Itoa(i))
		if i < 5 {
			b := "unknown-" + strconv.Itoa(i)
			sendTx(t, tp, "OTX", b)
			want = append(want, b)
		}
	}
	consumeExactly(t, pc, "OTXCG", "OTX", want)
	for i := 0; i < 5; i++ {
		if l.checks("unknown-"+strconv.Itoa(i)) == 0 {
			t.Fatalf("unknown-%d committed without a check-back", i)
		}
	}
}

// TestOfficialTransactionProducerRestart: the producer dies after its half
// with the outcome unknown; a restarted producer of the same group gets
// the check-back and commits it, once.
func TestOfficialTransactionProducerRestart(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startRealCluster(t, officialTxnConfig)
	pc.createTopicOnLeader("OTXR", 4)
	first := newTxListener()
	first.check = func(string) primitive.LocalTransactionState { return primitive.UnkonwnState }
	tp := officialTxnProducer(t, pc.nsAddr, "OTXRPG", "", first)
	sendTx(t, tp, "OTXR", "orphan")
	if err := tp.Shutdown(); err != nil {
		t.Fatal(err)
	}

	second := newTxListener()
	tp2 := officialTxnProducer(t, pc.nsAddr, "OTXRPG", "", second)
	sendTx(t, tp2, "OTXR", "commit-after-restart") // loads the route, so its heartbeats reach the group
	testutil.WaitFor(t, 40*time.Second, "the restarted producer checked back", func() bool { return second.checks("orphan") > 0 })
	consumeExactly(t, pc, "OTXRCG", "OTXR", []string{"orphan", "commit-after-restart"})
}

// TestOfficialTransactionLeaderKill: the leader dies between the half and
// the producer's commit (whose one-way END_TRANSACTION goes to the dead
// leader); the new leader resumes the check-back from the replicated
// state, the producer commits, and the message is consumed exactly once.
func TestOfficialTransactionLeaderKill(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startRealCluster(t, func(c *BrokerConfig) { officialTxnConfig(c); withProdRaftTimings(c) })
	pc.createTopicOnLeader("OTXK", 4)
	l := newTxListener()
	var killed atomic.Bool
	l.onExecute = func(body string) {
		if body == "commit-while-leader-dies" && killed.CompareAndSwap(false, true) {
			pc.stopNode(pc.leader())
		}
	}
	// A client instance with only producers heartbeats brokerId 0 alone
	// (RocketMQ's clients do the same), so after a failover the new
	// leader would know the producer only after the client's 30 s route
	// refresh and heartbeat. A consumer in the same instance (what an
	// application with the default instance name has) makes it heartbeat
	// every member, so the new leader can check back at once.
	instance := "txk" + strconv.FormatInt(instanceSeq.Add(1), 10)
	tp := officialTxnProducer(t, pc.nsAddr, "OTXKPG", instance, l)
	pc.createTopicOnLeader("OTXK-SIDE", 1)
	officialPushConsumer(t, pc.nsAddr, "OTXKSIDE", "OTXK-SIDE", "*", func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}, consumer.WithInstance(instance))
	sendTx(t, tp, "OTXK", "commit-warm")
	waitProducerEverywhere(t, pc, "OTXKPG")
	sendTx(t, tp, "OTXK", "commit-while-leader-dies")
	testutil.WaitFor(t, 30*time.Second, "the new leader checked the half back", func() bool {
		return l.checks("commit-while-leader-dies") > 0
	})
	pc.waitLeaderRegistered()
	consumeExactly(t, pc, "OTXKCG", "OTXK", []string{"commit-warm", "commit-while-leader-dies"})
}

// TestOfficialTransactionLeaderKillProducerOnly is the leader kill with a
// client instance that has only the transaction producer: it heartbeats
// brokerId 0 alone, so the new leader can check the half back only once
// the client's 30 s route refresh found it and its next heartbeat (30 s)
// reached it. RAFTMQ_LONG=1 only: it waits for both.
func TestOfficialTransactionLeaderKillProducerOnly(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	if os.Getenv("RAFTMQ_LONG") != "1" {
		t.Skip("waits for the official client's 30 s route refresh and heartbeat; set RAFTMQ_LONG=1")
	}
	pc := startRealCluster(t, func(c *BrokerConfig) { officialTxnConfig(c); withProdRaftTimings(c) })
	pc.createTopicOnLeader("OTXP", 4)
	l := newTxListener()
	var killed atomic.Bool
	l.onExecute = func(body string) {
		if body == "commit-while-leader-dies" && killed.CompareAndSwap(false, true) {
			pc.stopNode(pc.leader())
		}
	}
	tp := officialTxnProducer(t, pc.nsAddr, "OTXPPG", "", l)
	sendTx(t, tp, "OTXP", "commit-warm")
	sendTx(t, tp, "OTXP", "commit-while-leader-dies")
	killedAt := time.Now()
	testutil.WaitFor(t, 150*time.Second, "the new leader checked the half back", func() bool {
		return l.checks("commit-while-leader-dies") > 0
	})
	t.Logf("checked back %v after the leader kill", time.Since(killedAt).Round(time.Second))
	pc.waitLeaderRegistered()
	consumeExactly(t, pc, "OTXPCG", "OTXP", []string{"commit-warm", "commit-while-leader-dies"})
}
