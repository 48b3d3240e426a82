package broker

import (
	"bytes"
	"net/netip"
	"strconv"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestEndTransactionForgedHalf: a message body can hold a complete, valid
// half message that names its own offset. END_TRANSACTION at that offset
// must not commit it: the half queue, which has a unit for every half
// (dispatched before the half is acknowledged), has none there.
func TestEndTransactionForgedHalf(t *testing.T) {
	pc := startRealCluster(t, txnTestConfig)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TXF", 1)
	legit := sendHalf(t, pc, addr, "TXF", "legit", "U-LEGIT") // the half queue exists and retains units

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
	send := func(body []byte) (int64, []byte) {
		t.Helper()
		off := pc.sendAt(addr, "TXF-CARRIER", body)
		v := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
		if v.Code != remoting.ResponseSuccess {
			t.Fatalf("view %d: %d %s", off, v.Code, v.Remark)
		}
		return off, v.Body
	}
	// Same-shape carriers land a fixed stride apart; the forged half is
	// built for where the next one lands, and tried again if something
	// else was appended in between.
	placeholder := make([]byte, len(half(0)))
	var fake int64
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("could not place a forged half where predicted")
		}
		a, _ := send(placeholder)
		b, stored := send(placeholder)
		at := bytes.Index(stored, placeholder)
		next := b + (b - a)
		fake = next + int64(at)
		if got, _ := send(half(fake)); got == next {
			break
		}
	}
	if v := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(fake, 10)}, nil); v.Code != remoting.ResponseSuccess {
		t.Fatalf("the forged half does not read as a message (%d %s): the test no longer forges one", v.Code, v.Remark)
	}

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
