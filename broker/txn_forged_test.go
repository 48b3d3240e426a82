package broker

import (
	"net/netip"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestEndTransactionForgedHalf: a message body can hold a complete, valid
// half message that names its own offset. END_TRANSACTION at that offset
// must not commit it: the half queue, which has a unit for every half
// (dispatched before the half is acknowledged), has none there, though
// its first unit comes after.
func TestEndTransactionForgedHalf(t *testing.T) {
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXF", 1)

	half := func(phy int64) []byte {
		m := &wire.Message{Topic: wire.TopicTransHalf, Body: []byte("forged-commit"), SysFlag: wire.SysFlagTransPrepared,
			BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2"),
			PhysicalOffset: phy, Properties: map[string]string{wire.PropertyProducerGroup: "PG", wire.PropertyRealTopic: "TXF",
				wire.PropertyRealQueueID: "0", wire.PropertyTransactionPrep: "true", wire.PropertyUniqKey: "U-FORGED"}}
		m.EncodedProperties = wire.StoredProperties(m.Properties)
		b, err := wire.AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fake := placeForged(t, pc, addr, "TXF-CARRIER", half)
	// The half queue's first unit comes after the forged bytes.
	legit := sendHalf(t, pc, addr, "TXF", "legit", "U-LEGIT")

	forged := halfSent{queueOffset: 0, phy: fake, uniq: "U-FORGED"}
	r := pc.call(addr, remoting.RequestEndTransaction, endExt(forged, wire.SysFlagTransCommit, false), nil)
	if r.Code == remoting.ResponseSuccess {
		t.Fatalf("END_TRANSACTION committed a half forged inside a message body at %d", fake)
	}
	// The legitimate half still commits.
	if r := pc.call(addr, remoting.RequestEndTransaction, endExt(legit, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit of the real half: %d %s", r.Code, r.Remark)
	}
	if got := topicBodies(t, pc, l, "TXF", 1); len(got) != 1 || got[0] != "legit" {
		t.Fatalf("TXF holds %q, want only the real half's commit", got)
	}
}
