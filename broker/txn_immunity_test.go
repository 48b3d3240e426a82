package broker

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestTransactionImmunityBounded: a half's CHECK_IMMUNITY_TIME_IN_SECONDS
// holds the check walk's floor until it passes, and every half decided
// above the floor stays in the replicated table (memory, snapshots) and is
// walked again every round. RocketMQ accepts any immunity, so a day's is
// accepted at send; the walk caps it at transactionCheckMax ×
// transactionCheckInterval, then checks the half back until it is
// discarded, and the floor passes it and the halves committed after it.
func TestTransactionImmunityBounded(t *testing.T) {
	t.Parallel()
	pc := startRealCluster(t, func(c *BrokerConfig) {
		txnTestConfig(c)
		c.TransactionCheckMax = 10 // immunity capped at 1 s
	})
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXI", 1)
	send := func(uniq, immunity string) halfSent {
		t.Helper()
		props := map[string]string{wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG", wire.PropertyUniqKey: uniq}
		if immunity != "" {
			props[wire.PropertyCheckImmunityTime] = immunity
		}
		ext := sendExt("TXI", 0, wire.EncodeProperties(props))
		ext["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransPrepared))
		resp := pc.call(addr, remoting.RequestSendMessage, ext, []byte(uniq))
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("half %s (immunity %q): %d %s", uniq, immunity, resp.Code, resp.Remark)
		}
		id, err := wire.ParseMessageID(resp.ExtFields["msgId"])
		if err != nil {
			t.Fatal(err)
		}
		qo, _ := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
		return halfSent{queueOffset: qo, phy: id.Offset, uniq: uniq}
	}
	// Undecided for the day, as with a producer that never answers: it is
	// first in the queue, so it holds the floor for as long as the walk
	// honours its immunity.
	long := send("long", "86400")
	var committed []halfSent
	for i, imm := range []string{"1", "", "", ""} {
		committed = append(committed, send("h"+strconv.Itoa(i), imm))
	}
	for _, h := range committed {
		if r := pc.call(addr, remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit %s: %d %s", h.uniq, r.Code, r.Remark)
		}
	}
	g := pc.groups[l]
	testutil.WaitFor(t, 15*time.Second, "the check walk's floor passes the day-immune half and the committed halves, and the table empties", func() bool {
		d, _ := g.TxnSizes()
		return g.TxnFloor().FloorQueue >= committed[len(committed)-1].queueOffset+1 && d == 0
	})
	if !g.TxnDiscarded(long.phy) {
		t.Errorf("the day-immune half is not discarded after its capped immunity and transactionCheckMax check-backs")
	}
}

// TestTransactionHalfScheduleChecked: the commit of a half applies its
// DELAY and timer properties, and refuses one that is malformed or too far
// ahead; the official clients send END_TRANSACTION one-way, so that
// refusal reaches nobody and a half the broker acknowledged would never be
// delivered (checked back until discarded). Such a half is refused at
// send, with the same code and remark a plain send gets; a good one is
// accepted and commits.
func TestTransactionHalfScheduleChecked(t *testing.T) {
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXS", 1)
	half := func(uniq string, extra map[string]string) *remoting.RemotingCommand {
		props := map[string]string{wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG", wire.PropertyUniqKey: uniq}
		for k, v := range extra {
			props[k] = v
		}
		ext := sendExt("TXS", 0, wire.EncodeProperties(props))
		ext["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransPrepared))
		return pc.call(addr, remoting.RequestSendMessage, ext, []byte(uniq))
	}
	far := strconv.Itoa(10 * 7 * 24 * 3600) // ten times timerMaxDelaySec
	for _, bad := range []map[string]string{
		{wire.PropertyDelayTimeLevel: "x"},
		{wire.PropertyTimerDelaySec: "soon"},
		{wire.PropertyTimerDelaySec: far},
		{wire.PropertyTimerDeliverMs: strconv.FormatInt(time.Now().Add(30*24*time.Hour).UnixMilli(), 10)},
		{wire.PropertyTimerDelUniqKey: "k"},
	} {
		r := half("bad", bad)
		if r.Code == remoting.ResponseSuccess {
			id, _ := wire.ParseMessageID(r.ExtFields["msgId"])
			qo, _ := strconv.ParseInt(r.ExtFields["queueOffset"], 10, 64)
			c := pc.call(addr, remoting.RequestEndTransaction, endExt(halfSent{queueOffset: qo, phy: id.Offset, uniq: "bad"}, wire.SysFlagTransCommit, false), nil)
			t.Errorf("half with %v acknowledged; its commit answers %d %q", bad, c.Code, c.Remark)
			continue
		}
		if r.Code != remoting.ResponseMessageIllegal {
			t.Errorf("half with %v: %d %q; want MESSAGE_ILLEGAL", bad, r.Code, r.Remark)
		}
	}
	// A DELAY level wins over a timer property, as on a plain send: the
	// timer value is then not looked at.
	if r := half("ok", map[string]string{wire.PropertyDelayTimeLevel: "1", wire.PropertyTimerDelaySec: far}); r.Code != remoting.ResponseSuccess {
		t.Fatalf("half with a DELAY level and a far timer: %d %s", r.Code, r.Remark)
	}
}

// TestEndTransactionBadInput: END_TRANSACTION naming no half (offsets
// before, inside and past the log, a plain message), another group's half
// or an unknown decision is answered SYSTEM_ERROR with a remark, changes
// nothing, and the broker keeps serving.
func TestEndTransactionBadInput(t *testing.T) {
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXB", 1)
	h := sendHalf(t, pc, addr, "TXB", "half", "B1")
	plain := pc.call(addr, remoting.RequestSendMessage, sendExt("TXB", 0, ""), []byte("plain"))
	pid, _ := wire.ParseMessageID(plain.ExtFields["msgId"])
	for _, c := range []struct {
		name string
		ext  map[string]string
	}{
		{"negative offset", endExt(halfSent{queueOffset: 0, phy: -1, uniq: "x"}, wire.SysFlagTransCommit, false)},
		{"inside the half", endExt(halfSent{queueOffset: 0, phy: h.phy + 7, uniq: "x"}, wire.SysFlagTransCommit, false)},
		{"past the log", endExt(halfSent{queueOffset: 0, phy: 1 << 40, uniq: "x"}, wire.SysFlagTransCommit, false)},
		{"a plain message", endExt(halfSent{queueOffset: 0, phy: pid.Offset, uniq: "x"}, wire.SysFlagTransCommit, false)},
		{"unknown decision", endExt(h, 5, false)},
		{"another group", func() map[string]string {
			e := endExt(h, wire.SysFlagTransCommit, false)
			e["producerGroup"] = "OTHER"
			return e
		}()},
	} {
		r := pc.call(addr, remoting.RequestEndTransaction, c.ext, nil)
		if r.Code != remoting.ResponseSystemError || r.Remark == "" {
			t.Errorf("%s: %d %q; want SYSTEM_ERROR with a remark", c.name, r.Code, r.Remark)
		}
	}
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit after the bad requests: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXB", 1, map[string]int{"plain": 1, "half": 1})
}

// TestImmunityCapSaturates: a transactionCheckMax meant as "never discard"
// times the interval overflows a Duration; the cap must then be no cap,
// not a wrapped (negative or small) one that silently ignores immunity.
func TestImmunityCapSaturates(t *testing.T) {
	for _, c := range []struct {
		cfg  TransactionConfig
		want time.Duration
	}{
		{TransactionConfig{TransactionTimeOut: 6 * time.Second, TransactionCheckMax: 15, TransactionCheckInterval: time.Minute}, 15 * time.Minute},
		{TransactionConfig{TransactionTimeOut: time.Hour, TransactionCheckMax: 15, TransactionCheckInterval: time.Minute}, time.Hour},
		{TransactionConfig{TransactionTimeOut: 6 * time.Second, TransactionCheckMax: math.MaxInt32, TransactionCheckInterval: time.Minute}, math.MaxInt64},
	} {
		if got := c.cfg.immunityCap(); got != c.want {
			t.Errorf("checkMax %d × %v, timeout %v: cap %v, want %v", c.cfg.TransactionCheckMax, c.cfg.TransactionCheckInterval,
				c.cfg.TransactionTimeOut, got, c.want)
		}
	}
}

// TestRetentionKeepsUndecidedHalf: retention deletes no CommitLog segment
// holding a half the check walk has not passed. The half's send was
// acknowledged; with its segment gone (a transaction open past
// fileReservedTime, or deletion forced by a full disk) its commit finds no
// half and the message is never delivered.
func TestRetentionKeepsUndecidedHalf(t *testing.T) {
	c, res, ctx := retentionKeepsPinned(t, wire.TopicTransHalf, 0,
		map[string]string{wire.PropertyRealTopic: "T", wire.PropertyRealQueueID: "0",
			wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG"},
		"an undecided half")
	l := c.leader()
	half := res.PhysicalOffset
	// Once the walk passes the decided half, it pins nothing.
	if _, err := l.g().EndTransaction(ctx, half, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.g().UpdateTxnCheck(ctx, &txnCheck{FloorQueue: res.QueueOffset + 1, FloorPhy: half + 1}); err != nil {
		t.Fatal(err)
	}
	if pin := l.g().txnPin(); pin != math.MaxInt64 {
		t.Fatalf("a decided half the walk passed pins the CommitLog at %d", pin)
	}
}
