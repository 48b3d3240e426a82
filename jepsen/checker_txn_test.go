package jepsen

import "testing"

// txnHistory adds transactional ops to a valid history: a committed one
// consumed and stored at broker-j q1@0, a rolled-back one nowhere, and
// a commit whose half was never acknowledged (owed nothing).
func txnHistory() History {
	h := twoGroupHistory()
	h.Ops = append(h.Ops,
		Op{Process: "t0", Value: "t0-w0-0", Txn: TxnCommit, Result: ResultHalfOK, Broker: "broker-j", Queue: -1, Offset: -1},
		Op{Process: "t0", Value: "t0-w0-rb-2", Txn: TxnRollback, Result: ResultHalfOK, Broker: "broker-j", Queue: -1, Offset: -1},
		Op{Process: "t0", Value: "t0-w0-3", Txn: TxnCommit, Result: ResultUnknown, Queue: -1, Offset: -1})
	h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c0", Value: "t0-w0-0", Broker: "broker-j", Queue: 1, Offset: 0, Intact: true})
	for _, node := range []string{"n0", "n1", "n2"} {
		h.Reads = append(h.Reads, Read{Node: node, Broker: "broker-j", Queue: 1, Offset: 0, Value: "t0-w0-0", Intact: true})
	}
	return h
}

func TestCheckerTransactions(t *testing.T) {
	v := CheckHistory(txnHistory(), true)
	if !v.Valid {
		t.Fatalf("valid transactional history judged invalid:\n%s", VerdictTable(txnHistory(), v))
	}
	if c := check(t, v, "transactions sent"); c.Value != "2 / 1" {
		t.Fatalf("transactions sent = %q", c.Value)
	}

	lost := txnHistory()
	lost.Deliveries = lost.Deliveries[:len(lost.Deliveries)-1]
	if c := check(t, CheckHistory(lost, true), "committed transactions lost"); c.OK || c.Value != "1 of 1" {
		t.Fatalf("a committed transaction never consumed: %+v", c)
	}

	leaked := txnHistory()
	leaked.Deliveries = append(leaked.Deliveries, Delivery{Consumer: "c0", Value: "t0-w0-rb-2", Broker: "broker-j", Queue: 1, Offset: 1, Intact: true})
	v = CheckHistory(leaked, true)
	if c := check(t, v, "rolled-back transactions"); c.OK || v.Valid {
		t.Fatalf("a rolled-back transaction consumed: %+v valid=%v", c, v.Valid)
	}
}

// TestCheckerCommittedTxnAbsentFromReplica: a committed transaction's
// message was consumed (from the leader) but one replica never stored it;
// the commit's write is the transaction's own path, so the replica check
// must cover it as it covers plain acknowledged sends.
func TestCheckerCommittedTxnAbsentFromReplica(t *testing.T) {
	h := txnHistory()
	var keep []Read
	for _, r := range h.Reads {
		if !(r.Node == "n2" && r.Value == "t0-w0-0") {
			keep = append(keep, r)
		}
	}
	h.Reads = keep
	v := CheckHistory(h, true)
	c := check(t, v, "committed transactions absent from a replica")
	if v.Valid || c.OK || c.Value != "1" {
		t.Fatalf("committed transaction missing on n2 not found: %+v valid=%v\n%s", c, v.Valid, VerdictTable(h, v))
	}
	// Below n2's retention floor it is not owed there.
	h = withRanges(h)
	h.ReadRanges = append(h.ReadRanges, ReadRange{Node: "n2", Broker: "broker-j", Queue: 1, From: 1, To: 1})
	withDiskFull(&h)
	if v := CheckHistory(h, true); !v.Valid {
		t.Fatalf("committed transaction below n2's floor judged absent:\n%s", VerdictTable(h, v))
	}
}
