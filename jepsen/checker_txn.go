package jepsen

import (
	"fmt"
	"maps"
	"slices"
)

// checkTransactions is the transactional workload's part of the verdict:
// no committed transaction whose half was acknowledged is lost, and no
// rolled-back one is ever consumed or stored.
func checkTransactions(h History, consumed map[string]int, inLog map[string]bool) []Check {
	var commits, rollbacks, halves int
	var lost, leaked []string
	nLost, nLeaked := 0, 0
	for _, o := range h.Ops {
		switch o.Txn {
		case TxnCommit:
			commits++
			if mustDeliver(o) {
				halves++
				if consumed[o.Value] == 0 {
					nLost++
					lost = addEx(lost, "%s (half acked at %.0f ms)", o.Value, o.CompleteMs)
				}
			}
		case TxnRollback:
			rollbacks++
			if consumed[o.Value] > 0 || inLog[o.Value] {
				nLeaked++
				leaked = addEx(leaked, "%s (consumed %d times, stored %v)", o.Value, consumed[o.Value], inLog[o.Value])
			}
		}
	}
	if commits+rollbacks == 0 {
		return nil
	}
	return []Check{
		{Name: "transactions sent (commit / rollback)", Value: fmt.Sprintf("%d / %d", commits, rollbacks), OK: true},
		{Name: "committed transactions lost (half acked, never consumed)", Value: fmt.Sprintf("%d of %d", nLost, halves), OK: nLost == 0, Required: true, Examples: lost},
		{Name: "rolled-back transactions delivered or stored", Value: fmt.Sprint(nLeaked), OK: nLeaked == 0, Required: true, Examples: leaked},
	}
}

// checkTxnReplicas holds every read replica to each committed transaction
// whose half was acknowledged, as the replica check holds it to plain
// acknowledged sends. The commit's message has no acknowledged position
// (the half's is not its), so the positions are those the consumers got
// it from: a replica of that group must hold the value at one of them,
// unless all are below its retention floor. A commit nobody consumed is
// already counted lost by checkTransactions.
func checkTxnReplicas(h History, perNode map[string]*nodeCoverage, floor map[nodeQueue]int64) (Check, bool) {
	owed := map[string]bool{}
	for _, o := range h.Ops {
		if o.Txn == TxnCommit && mustDeliver(o) {
			owed[o.Value] = true
		}
	}
	if len(owed) == 0 {
		return Check{}, false
	}
	at := map[string][]slot{}
	for _, d := range h.Deliveries {
		if owed[d.Value] && d.Intact && !slices.Contains(at[d.Value], slot{d.Broker, d.Queue, d.Offset}) {
			at[d.Value] = append(at[d.Value], slot{d.Broker, d.Queue, d.Offset})
		}
	}
	var ex []string
	n := 0
	for _, value := range slices.Sorted(maps.Keys(at)) {
		for _, node := range slices.Sorted(maps.Keys(perNode)) {
			c := perNode[node]
			owes, holds := false, false
			for _, s := range at[value] {
				if s.broker != c.broker || s.offset < floor[nodeQueue{node, s.queue}] {
					continue
				}
				owes = true
				if c.at[queueOffset{s.queue, s.offset}] == value {
					holds = true
				}
			}
			if owes && !holds {
				n++
				ex = addEx(ex, "%s missing on %s (consumed at %v)", value, node, at[value])
			}
		}
	}
	return Check{Name: "committed transactions absent from a replica", Value: fmt.Sprint(n), OK: n == 0, Required: true, Examples: ex}, true
}
