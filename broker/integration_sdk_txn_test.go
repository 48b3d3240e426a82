package broker

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
)

// Transactions with raftmq's SDK (client.TransactionProducer) against a
// real 3-node group: the same scenarios as the official client's.

// sdkTxListener decides by body prefix like txListener.
type sdkTxListener struct {
	onExecute func(body string)
	check     func(body string) client.LocalTransactionState
	mu        sync.Mutex
	checked   map[string]int
}

func newSDKTxListener() *sdkTxListener { return &sdkTxListener{checked: map[string]int{}} }

func (l *sdkTxListener) ExecuteLocalTransaction(_ context.Context, m *client.Message) client.LocalTransactionState {
	body := string(m.Body)
	if l.onExecute != nil {
		l.onExecute(body)
	}
	switch {
	case strings.HasPrefix(body, "commit-"):
		return client.TransactionCommit
	case strings.HasPrefix(body, "rollback-"):
		return client.TransactionRollback
	}
	return client.TransactionUnknown
}

func (l *sdkTxListener) CheckLocalTransaction(_ context.Context, m *client.MessageExt) client.LocalTransactionState {
	body := string(m.Body)
	l.mu.Lock()
	l.checked[body]++
	l.mu.Unlock()
	if l.check != nil {
		return l.check(body)
	}
	return client.TransactionCommit
}

func (l *sdkTxListener) checks(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked[body]
}

func sdkTxnProducer(t *testing.T, nsAddr, group string, l client.TransactionListener) *client.TransactionProducer {
	t.Helper()
	tp, err := client.NewTransactionProducer(l, client.NameServers(nsAddr), client.WithLogger(testLogger()),
		client.ProducerGroup(group), client.InstanceName("sdktx"+strconv.FormatInt(instanceSeq.Add(1), 10)),
		client.SendTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close(context.Background()) })
	return tp
}

func sdkSendTx(t *testing.T, tp *client.TransactionProducer, topic, body string) *client.TransactionSendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := tp.SendMessageInTransaction(ctx, client.NewMessage(topic, []byte(body)).WithKeys("key-"+body))
	if err != nil || res.Status != client.SendOK {
		t.Fatalf("send %s: %v %v", body, res, err)
	}
	return res
}

// sdkConsumeExactly is consumeExactly with the SDK's push consumer.
func sdkConsumeExactly(t *testing.T, pc *procCluster, group, topic string, want []string) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	c, err := client.NewPushConsumer(sdkConsumerOpts(pc.nsAddr, group)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SubscribeSelector(topic, client.Tags("*")); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)]++
		}
		return client.ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	testutil.WaitFor(t, 30*time.Second, "every committed message consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range want {
			if got[b] == 0 {
				return false
			}
		}
		return true
	})
	storedExactly(t, pc, topic, want)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("consumed %v; want exactly %v", got, want)
	}
	for b, n := range got {
		if n != 1 {
			t.Fatalf("%s consumed %d times; want once (all: %v)", b, n, got)
		}
	}
}

// TestSDKTransactions: commit, rollback and unknown-then-check-back with
// the SDK's transaction producer.
func TestSDKTransactions(t *testing.T) {
	pc := startRealCluster(t, officialTxnConfig)
	pc.createTopicOnLeader("STX", 4)
	l := newSDKTxListener()
	tp := sdkTxnProducer(t, pc.nsAddr, "STXPG", l)
	var want []string
	for i := 0; i < 10; i++ {
		b := "commit-" + strconv.Itoa(i)
		if res := sdkSendTx(t, tp, "STX", b); res.State != client.TransactionCommit || res.EndErr != nil {
			t.Fatalf("%s: state %v end error %v", b, res.State, res.EndErr)
		}
		want = append(want, b)
		if res := sdkSendTx(t, tp, "STX", "rollback-"+strconv.Itoa(i)); res.EndErr != nil {
			t.Fatalf("rollback end error: %v", res.EndErr)
		}
		if i < 5 {
			b := "unknown-" + strconv.Itoa(i)
			sdkSendTx(t, tp, "STX", b)
			want = append(want, b)
		}
	}
	sdkConsumeExactly(t, pc, "STXCG", "STX", want)
	for i := 0; i < 5; i++ {
		if l.checks("unknown-"+strconv.Itoa(i)) == 0 {
			t.Fatalf("unknown-%d committed without a check-back", i)
		}
	}
}

// TestSDKTransactionProducerRestart: the producer closes after its half
// with the outcome unknown; a restarted producer of the group, which has
// sent nothing yet (it heartbeats TBW102's brokers from its start), commits
// it on the check-back.
func TestSDKTransactionProducerRestart(t *testing.T) {
	pc := startRealCluster(t, officialTxnConfig)
	pc.createTopicOnLeader("STXR", 4)
	first := newSDKTxListener()
	first.check = func(string) client.LocalTransactionState { return client.TransactionUnknown }
	tp := sdkTxnProducer(t, pc.nsAddr, "STXRPG", first)
	sdkSendTx(t, tp, "STXR", "orphan")
	if err := tp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := newSDKTxListener()
	tp2 := sdkTxnProducer(t, pc.nsAddr, "STXRPG", second)
	testutil.WaitFor(t, 20*time.Second, "the restarted producer checked back", func() bool { return second.checks("orphan") > 0 })
	sdkSendTx(t, tp2, "STXR", "commit-after-restart")
	sdkConsumeExactly(t, pc, "STXRCG", "STXR", []string{"orphan", "commit-after-restart"})
}

// TestSDKTransactionLeaderKill: the leader dies between the half and the
// commit; the SDK's END_TRANSACTION follows the new leader (or, when
// there is none yet, the new leader's check-back decides), and the message
// is consumed exactly once.
func TestSDKTransactionLeaderKill(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { officialTxnConfig(c); withProdRaftTimings(c) })
	pc.createTopicOnLeader("STXK", 4)
	l := newSDKTxListener()
	var killed atomic.Bool
	l.onExecute = func(body string) {
		if body == "commit-while-leader-dies" && killed.CompareAndSwap(false, true) {
			pc.stopNode(pc.leader())
		}
	}
	tp := sdkTxnProducer(t, pc.nsAddr, "STXKPG", l)
	sdkSendTx(t, tp, "STXK", "commit-warm")
	waitProducerEverywhere(t, pc, "STXKPG")
	res := sdkSendTx(t, tp, "STXK", "commit-while-leader-dies")
	t.Logf("END_TRANSACTION after the leader kill: %v (check-backs: %d)", res.EndErr, l.checks("commit-while-leader-dies"))
	pc.waitLeaderRegistered()
	sdkConsumeExactly(t, pc, "STXKCG", "STXK", []string{"commit-warm", "commit-while-leader-dies"})
}
