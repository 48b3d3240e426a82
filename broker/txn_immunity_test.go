package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestTransactionImmunityBounded: a half's CHECK_IMMUNITY_TIME_IN_SECONDS
// holds the check walk's floor until it passes, and every half decided
// above the floor stays in the replicated table (memory, snapshots) and is
// walked again every round. An immunity longer than an undecided half is
// kept anyway (transactionCheckMax × transactionCheckInterval) is refused
// at send with MESSAGE_ILLEGAL; one within it is accepted, and once the
// halves are decided the floor passes them all and the table empties.
func TestTransactionImmunityBounded(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) {
		txnTestConfig(c)
		c.TransactionCheckMax = 20 // undecided halves kept 2 s
	})
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXI", 1)
	send := func(uniq, immunity string) (halfSent, *remoting.RemotingCommand) {
		t.Helper()
		props := map[string]string{wire.PropertyTransactionPrep: "true", wire.PropertyProducerGroup: "PG", wire.PropertyUniqKey: uniq}
		if immunity != "" {
			props[wire.PropertyCheckImmunityTime] = immunity
		}
		ext := sendExt("TXI", 0, wire.EncodeProperties(props))
		ext["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransPrepared))
		resp := pc.call(addr, remoting.RequestSendMessage, ext, []byte(uniq))
		if resp.Code != remoting.ResponseSuccess {
			return halfSent{}, resp
		}
		id, err := wire.ParseMessageID(resp.ExtFields["msgId"])
		if err != nil {
			t.Fatal(err)
		}
		qo, _ := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
		return halfSent{queueOffset: qo, phy: id.Offset, uniq: uniq}, resp
	}
	var accepted []halfSent
	// Accepted, it would stay undecided for the day, as with a producer
	// still working on it.
	if _, resp := send("long", "86400"); resp.Code != remoting.ResponseMessageIllegal ||
		!strings.Contains(resp.Remark, wire.PropertyCheckImmunityTime) {
		t.Errorf("a half immune for a day: %d %q; want MESSAGE_ILLEGAL naming %s", resp.Code, resp.Remark, wire.PropertyCheckImmunityTime)
	}
	for i, imm := range []string{"1", "", "", ""} {
		h, resp := send("h"+strconv.Itoa(i), imm)
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("half %d (immunity %q): %d %s", i, imm, resp.Code, resp.Remark)
		}
		accepted = append(accepted, h)
	}
	for _, h := range accepted {
		if r := pc.call(addr, remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit %s: %d %s", h.uniq, r.Code, r.Remark)
		}
	}
	g := pc.groups[l]
	testutil.WaitFor(t, 5*time.Second, "the check walk's floor passes the decided halves and the table empties", func() bool {
		d, _ := g.TxnSizes()
		return g.TxnFloor().FloorQueue >= accepted[len(accepted)-1].queueOffset+1 && d == 0
	})
}
