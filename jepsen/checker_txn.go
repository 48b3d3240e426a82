package jepsen

import "fmt"

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
