package broker

import (
	"strconv"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestCommittedMessageForwardedIsNoHalf: the committed copy of a half
// carries no TRAN_MSG (RocketMQ's EndTransactionProcessor clears it), so a
// consumer that forwards the message it received to another topic sends a
// plain message, which is delivered there. Kept, the property would make
// the producer mark the forward prepared and the broker store it as a new
// half of the original producer group: acknowledged, never delivered.
func TestCommittedMessageForwardedIsNoHalf(t *testing.T) {
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXF", 1)
	pc.createTopic(addr, "TXF-OUT", 1)

	h := sendHalf(t, pc, addr, "TXF", "forward-me", "UF1")
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(h, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXF", 1, map[string]int{"forward-me": 1})

	res, err := pc.groups[l].Store().GetMessage("", "TXF", 0, 0, 1, nil)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("read the committed message: %d messages, %v", len(res.Messages), err)
	}
	m, _, err := wire.DecodeMessage(res.Messages[0], true)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m.Properties[wire.PropertyTransactionPrep]; ok {
		t.Errorf("the committed message carries %s=%s", wire.PropertyTransactionPrep, v)
	}

	// Forward it as the official Java producer sends a received message:
	// its properties as they came, the prepared sysFlag when they say TRAN_MSG=true.
	props := m.Properties
	delete(props, wire.PropertyUniqKey) // a new send gets a new client id
	props[wire.PropertyUniqKey] = "UF2"
	ext := sendExt("TXF-OUT", 0, wire.EncodeProperties(props))
	if v, _ := strconv.ParseBool(props[wire.PropertyTransactionPrep]); v {
		ext["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransPrepared))
	}
	if r := pc.call(addr, remoting.RequestSendMessage, ext, m.Body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("forward: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, "TXF-OUT", 1, map[string]int{"forward-me": 1})
}
