package jepsen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// checkChaos checks the chaos workloads (each only when it ran).
func checkChaos(h History) []Check {
	var out []Check
	x := h.Chaos
	if len(x.OrderOps) > 0 {
		out = append(out, checkOrder(h)...)
	}
	if len(x.OffsetObs) > 0 || len(x.OffsetCommits) > 0 {
		out = append(out, checkOffsetRegression(x)...)
	}
	if len(x.RetryOps) > 0 {
		out = append(out, checkRetry(h)...)
	}
	return out
}

// checkOrder: per key, acknowledged sends hold increasing offsets of one
// queue in send order; every replica read holds every acknowledged entry
// at its acknowledged slot (above its retention floor); every node's stored order of the key's messages
// follows the send order; the consumer's first delivery of each message
// follows the send order; nothing acknowledged is left undelivered;
// nothing delivered or stored was never sent or has a broken checksum.
func checkOrder(h History) []Check {
	x := h.Chaos
	// Acks.
	byKey := map[string][]OrderOp{}
	sent := map[string]bool{}
	okCount := 0
	for _, o := range x.OrderOps {
		sent[o.Value] = true
		if o.Result == ResultOK && o.Key != "warm" {
			okCount++
			byKey[o.Key] = append(byKey[o.Key], o)
		}
	}
	var ackEx []string
	ackBad := 0
	for _, k := range sortedOrderKeys(byKey) {
		ops := byKey[k]
		sort.Slice(ops, func(i, j int) bool { return ops[i].Seq < ops[j].Seq })
		for i := 1; i < len(ops); i++ {
			a, b := ops[i-1], ops[i]
			if a.Broker != b.Broker || a.Queue != b.Queue || b.Offset <= a.Offset {
				ackBad++
				ackEx = addEx(ackEx, "%s: seq %d acked at %s q%d@%d, seq %d at %s q%d@%d", k, a.Seq, a.Broker, a.Queue, a.Offset, b.Seq, b.Broker, b.Queue, b.Offset)
			}
		}
	}

	// Stored order on every node: per node and key, seqs in offset order
	// never go down (a plain producer's retry may store one twice in a row).
	type nodeKey struct{ node, key string }
	stored := map[nodeKey][]Read{}
	for _, r := range x.OrderReads {
		if k, _, ok := parseOrderValue(r.Value); ok && k != "warm" {
			stored[nodeKey{r.Node, k}] = append(stored[nodeKey{r.Node, k}], r)
		}
	}
	var storeEx []string
	storeBad := 0
	nks := make([]nodeKey, 0, len(stored))
	for nk := range stored {
		nks = append(nks, nk)
	}
	sort.Slice(nks, func(i, j int) bool { return nks[i].node+nks[i].key < nks[j].node+nks[j].key })
	for _, nk := range nks {
		rs := stored[nk]
		sort.Slice(rs, func(i, j int) bool {
			if rs[i].Queue != rs[j].Queue {
				return rs[i].Queue < rs[j].Queue
			}
			return rs[i].Offset < rs[j].Offset
		})
		for i := 1; i < len(rs); i++ {
			_, sa, _ := parseOrderValue(rs[i-1].Value)
			_, sb, _ := parseOrderValue(rs[i].Value)
			if rs[i].Queue != rs[i-1].Queue || sb < sa {
				storeBad++
				storeEx = addEx(storeEx, "%s %s: seq %d at q%d@%d after seq %d at q%d@%d", nk.node, nk.key, sb, rs[i].Queue, rs[i].Offset, sa, rs[i-1].Queue, rs[i-1].Offset)
			}
		}
	}

	// Delivery order: the first delivery of each message, in the order the
	// orderly listener saw them, never goes back in seq for its key.
	first := map[string]bool{}
	maxSeq := map[string]int{}
	var delEx []string
	delBad := 0
	for _, d := range x.OrderDeliveries {
		k, s, ok := parseOrderValue(d.Value)
		if !ok || first[d.Value] {
			continue
		}
		first[d.Value] = true
		if k == "warm" {
			continue
		}
		if m, seen := maxSeq[k]; seen && s < m {
			delBad++
			delEx = addEx(delEx, "%s: seq %d first delivered after seq %d (q%d@%d)", k, s, m, d.Queue, d.Offset)
		}
		maxSeq[k] = max(maxSeq[k], s)
	}
	lost, phantom := 0, 0
	var lostEx, phEx []string
	for _, ops := range byKey {
		for _, o := range ops {
			if !first[o.Value] {
				lost++
				lostEx = addEx(lostEx, "%s (ack q%d@%d)", o.Value, o.Queue, o.Offset)
			}
		}
	}
	for _, d := range x.OrderDeliveries {
		if !sent[d.Value] || !d.Intact {
			phantom++
			phEx = addEx(phEx, "%q q%d@%d intact=%v", d.Value, d.Queue, d.Offset, d.Intact)
		}
	}
	// The final read too: an entry no consumer reached (its replica never
	// led) is still stored data the group may serve later.
	for _, r := range x.OrderReads {
		if !sent[r.Value] || !r.Intact {
			phantom++
			phEx = addEx(phEx, "stored on %s %q q%d@%d intact=%v", r.Node, r.Value, r.Queue, r.Offset, r.Intact)
		}
	}
	// Every read replica of the acknowledging group holds each acknowledged
	// entry at its acknowledged slot, as the main topic's check requires
	// (warm-up sends included: they were acknowledged too).
	var acks []Op
	for _, o := range x.OrderOps {
		if o.Result == ResultOK {
			acks = append(acks, o.Op)
		}
	}
	perNode, floor := topicCoverage(x.OrderReads, x.OrderRanges, x.OrderUnread)
	floor = excusedFloors(h, floor)
	absent, below, absentEx := ackedOnReplicas(acks, perNode, floor)
	out := []Check{
		{Name: fmt.Sprintf("ordered: acknowledged but absent from a replica (%d read)", len(perNode)), Value: fmt.Sprint(absent), OK: absent == 0, Required: true, Examples: absentEx},
		{Name: "ordered: acks out of send order (per key)", Value: fmt.Sprintf("%d (of %d acknowledged, %d keys)", ackBad, okCount, len(byKey)), OK: ackBad == 0, Required: true, Examples: ackEx},
		{Name: "ordered: stored out of send order (final read per node)", Value: fmt.Sprint(storeBad), OK: storeBad == 0, Required: true, Examples: storeEx},
		{Name: "ordered: first deliveries out of send order", Value: fmt.Sprint(delBad), OK: delBad == 0, Required: true, Examples: delEx},
		{Name: "ordered: acknowledged, never delivered", Value: fmt.Sprint(lost), OK: lost == 0, Required: true, Examples: lostEx},
		{Name: "ordered: phantom or corrupt (deliveries, final read)", Value: fmt.Sprint(phantom), OK: phantom == 0, Required: true, Examples: phEx},
	}
	if below > 0 {
		out = append(out, Check{Name: "ordered: acks below a replica's retention floor (not held)", Value: fmt.Sprint(below), OK: true})
	}
	if unread := uniq(x.OrderUnread); len(unread) > 0 {
		sort.Strings(unread)
		// The stored-order and corruption checks saw part of these
		// nodes' queues at most.
		out = append(out, Check{Name: "ordered: final read failed (stored order not checked)", Value: strings.Join(unread, ", "), OK: false, Required: true})
	}
	return out
}

func sortedOrderKeys(m map[string][]OrderOp) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkOffsetRegression: a committed offset a follower answered is
// replicated (followers answer only applied state). A serving leader
// whose status, polled after that answer, shows the same term or a later
// one must never answer less for the queue: that would be a regression
// across failover. No answer may exceed what was ever committed. Acknowledged
// commits answered lower later (coalesced on a leader that lost office
// before replicating them) are reported.
func checkOffsetRegression(x ChaosHistory) []Check {
	type durable struct {
		value int64
		atMs  float64
		term  uint64
		node  string
	}
	obs := append([]OffsetObs(nil), x.OffsetObs...)
	sort.SliceStable(obs, func(i, j int) bool { return obs[i].CompleteMs < obs[j].CompleteMs })
	commits := append([]OffsetCommitOp(nil), x.OffsetCommits...)
	sort.SliceStable(commits, func(i, j int) bool { return commits[i].InvokeMs < commits[j].InvokeMs })
	maxInvoked := map[int]int64{} // per queue, over commits invoked so far
	ci := 0
	best := map[int]durable{} // per queue, the highest follower answer so far
	var ex, phEx []string
	regress, phantom, leaderObs := 0, 0, 0
	for _, o := range obs {
		for ci < len(commits) && commits[ci].InvokeMs <= o.CompleteMs {
			maxInvoked[commits[ci].Queue] = max(maxInvoked[commits[ci].Queue], commits[ci].Value)
			ci++
		}
		if o.Value > maxInvoked[o.Queue] {
			phantom++
			phEx = addEx(phEx, "%s q%d answered %d at %.0f ms; highest commit sent %d", o.Node, o.Queue, o.Value, o.CompleteMs, maxInvoked[o.Queue])
		}
		switch {
		case o.State == "Follower":
			if b, ok := best[o.Queue]; !ok || o.Value > b.value {
				best[o.Queue] = durable{o.Value, o.CompleteMs, o.Term, o.Node}
			}
		case o.State == "Leader" && o.Serving:
			leaderObs++
			if b, ok := best[o.Queue]; ok && o.StatusMs > b.atMs && o.Term >= b.term && o.Value < b.value {
				regress++
				ex = addEx(ex, "q%d: leader %s (term %d) answered %d at %.0f ms; follower %s (term %d) had answered %d at %.0f ms",
					o.Queue, o.Node, o.Term, o.Value, o.CompleteMs, b.node, b.term, b.value, b.atMs)
			}
		}
	}
	// Acknowledged commits rolled back: a later serving-leader answer below
	// an acknowledged value (allowed: commits are coalesced for 100 ms).
	rolled := 0
	maxAcked := map[int]int64{}
	var leaderTerm uint64
	ci = 0
	acked := append([]OffsetCommitOp(nil), x.OffsetCommits...)
	sort.SliceStable(acked, func(i, j int) bool { return acked[i].CompleteMs < acked[j].CompleteMs })
	for _, o := range obs {
		for ci < len(acked) && acked[ci].CompleteMs < o.StatusMs {
			if acked[ci].Result == ResultOK {
				maxAcked[acked[ci].Queue] = max(maxAcked[acked[ci].Queue], acked[ci].Value)
			}
			ci++
		}
		if o.State != "Leader" || !o.Serving || o.Term < leaderTerm {
			continue // a deposed leader's stale answer is not the group's
		}
		leaderTerm = o.Term
		if o.Value < maxAcked[o.Queue] {
			rolled++
			maxAcked[o.Queue] = o.Value // count each rollback once
		}
	}
	okCommits := 0
	for _, c := range x.OffsetCommits {
		if c.Result == ResultOK {
			okCommits++
		}
	}
	return []Check{
		{Name: "offsets: replicated commit answered lower by a later leader (regression)", Value: fmt.Sprintf("%d (of %d leader answers, %d commits acknowledged)", regress, leaderObs, okCommits),
			OK: regress == 0 && leaderObs > 0, Required: true, Examples: ex},
		{Name: "offsets: answers above any commit sent", Value: fmt.Sprint(phantom), OK: phantom == 0, Required: true, Examples: phEx},
		{Name: "offsets: acknowledged commits rolled back before replication (allowed)", Value: fmt.Sprint(rolled), OK: true},
	}
}

// checkRetry: every acknowledged dlq- message reached %DLQ%RetryGroup
// (found by the final read on some node), and every node read holds it
// unless its DLQ offset is below that node's retention floor — the main
// topic's replica rule; nodes whose read failed are counted apart. None was
// consumed successfully; every acknowledged retry- message was consumed
// after one redelivery. The deliveries per dead-lettered message are
// reported.
func checkRetry(h History) []Check {
	x := h.Chaos
	okDLQ, okRetry := 0, 0
	delivered := map[string]int{}
	consumedOK := map[string]bool{}
	sent := map[string]bool{}
	for _, o := range x.RetryOps {
		sent[o.Value] = true
	}
	var phEx []string
	phantom := 0
	for _, d := range x.RetryDeliveries {
		delivered[d.Value]++
		if d.Consumer == "retry-c ok" {
			consumedOK[d.Value] = true
		}
		if !sent[d.Value] || !d.Intact {
			phantom++
			phEx = addEx(phEx, "%q q%d@%d intact=%v", d.Value, d.Queue, d.Offset, d.Intact)
		}
	}
	inDLQ := map[string]map[string]bool{} // value → nodes
	dlqAt := map[string][]slot{}          // value → DLQ positions (a retried send-back may store it twice)
	perNode, floor, unread := dlqCoverage(x)
	floor = excusedFloors(h, floor)
	nodes := slices.Sorted(maps.Keys(perNode))
	for _, r := range x.DLQReads {
		if !r.Intact || !sent[r.Value] {
			phantom++
			phEx = addEx(phEx, "DLQ on %s: %q q%d@%d intact=%v", r.Node, r.Value, r.Queue, r.Offset, r.Intact)
			continue
		}
		if inDLQ[r.Value] == nil {
			inDLQ[r.Value] = map[string]bool{}
		}
		inDLQ[r.Value][r.Node] = true
		dlqAt[r.Value] = append(dlqAt[r.Value], slot{r.Broker, r.Queue, r.Offset})
	}
	var lostEx, partEx, retryEx, wrongEx, missing []string
	lost, partial, below, retryLost, wrong := 0, 0, 0, 0, 0
	minDel, maxDel := -1, 0
	for _, o := range x.RetryOps {
		if o.Result != ResultOK {
			continue
		}
		switch {
		case strings.HasPrefix(o.Value, "dlq-"):
			okDLQ++
			if consumedOK[o.Value] {
				wrong++
				wrongEx = addEx(wrongEx, "%s consumed successfully", o.Value)
			}
			if len(inDLQ[o.Value]) == 0 {
				missing = append(missing, o.Value)
				continue
			}
			for _, node := range nodes {
				if inDLQ[o.Value][node] {
					continue
				}
				// Owed by the node when its group's DLQ holds it: another
				// group's replicas never had it.
				owed, kept := false, false // kept: some position of it at or above node's floor
				var at slot
				for _, s := range dlqAt[o.Value] {
					if s.broker != perNode[node].broker {
						continue
					}
					owed, at = true, s
					if s.offset >= floor[nodeQueue{node, s.queue}] {
						kept = true
					}
				}
				if !owed {
					continue
				}
				if !kept {
					below++ // removed from this node by retention
					continue
				}
				partial++
				partEx = addEx(partEx, "%s missing on %s (DLQ %s q%d@%d on %d nodes; %s keeps from %d)",
					o.Value, node, at.broker, at.queue, at.offset, len(inDLQ[o.Value]), node, floor[nodeQueue{node, at.queue}])
			}
			n := delivered[o.Value]
			if minDel < 0 || n < minDel {
				minDel = n
			}
			maxDel = max(maxDel, n)
		case strings.HasPrefix(o.Value, "retry-") && !strings.HasPrefix(o.Value, "retry-warm-"):
			okRetry++
			if !consumedOK[o.Value] {
				retryLost++
				if len(retryEx) < maxExamples {
					retryEx = append(retryEx, fmt.Sprintf("%s (delivered %d times%s)", o.Value, delivered[o.Value], retryTrail(x, o.Value)))
				}
			}
		}
	}
	if removedEverywhere(missing, x, perNode, floor) {
		below += len(missing) // removed from every replica by retention
	} else {
		for _, v := range missing {
			lost++
			lostEx = addEx(lostEx, "%s (delivered %d times)", v, delivered[v])
		}
	}
	// Every group that delivered a dlq- message is where its send-backs
	// went and so where it is dead-lettered: its %DLQ% must have been read,
	// or its replicas were checked nowhere.
	readGroups := map[string]bool{}
	for _, c := range perNode {
		readGroups[c.broker] = true
	}
	unreadGroups := map[string]bool{}
	for _, d := range x.RetryDeliveries {
		if strings.HasPrefix(d.Value, "dlq-") && d.Broker != "" && !readGroups[d.Broker] {
			unreadGroups[d.Broker] = true
		}
	}
	out := []Check{
		{Name: "retry: groups that delivered dlq- messages whose %DLQ% no node read", Value: fmt.Sprint(len(unreadGroups)), OK: len(unreadGroups) == 0, Required: true,
			Examples: slices.Sorted(maps.Keys(unreadGroups))},
		{Name: "retry: acknowledged dlq- messages missing from %DLQ%", Value: fmt.Sprintf("%d of %d", lost, okDLQ), OK: lost == 0, Required: true, Examples: lostEx},
		{Name: fmt.Sprintf("retry: dead-lettered messages absent from a replica's DLQ (%d read)", len(nodes)), Value: fmt.Sprint(partial), OK: partial == 0, Required: true, Examples: partEx},
	}
	if below > 0 {
		out = append(out, Check{Name: "retry: DLQ entries below a replica's retention floor (not held)", Value: fmt.Sprint(below), OK: true})
	}
	if len(unread) > 0 {
		// Required: a replica nobody could read proves nothing, as the main
		// topic's incomplete final read.
		out = append(out, Check{Name: "retry: DLQ replicas not checked (final read failed)", Value: strings.Join(unread, ", "), OK: false, Required: true})
	}
	return append(out, []Check{
		{Name: "retry: always-failing messages consumed successfully", Value: fmt.Sprint(wrong), OK: wrong == 0, Required: true, Examples: wrongEx},
		{Name: "retry: acknowledged retry- messages never consumed", Value: fmt.Sprintf("%d of %d", retryLost, okRetry), OK: retryLost == 0, Required: true, Examples: retryEx},
		{Name: "retry: phantom or corrupt (deliveries, DLQ)", Value: fmt.Sprint(phantom), OK: phantom == 0, Required: true, Examples: phEx},
		// RocketMQ dead-letters after MaxReconsumeTimes+1 deliveries on the
		// broker's send-back path, one earlier when the client falls back
		// to sending %RETRY% itself (it sends reconsumeTimes+1 and the
		// broker compares that), and redelivers after ambiguous send-backs:
		// reported only.
		{Name: fmt.Sprintf("retry: deliveries of a dead-lettered message (send-back path %d)", RetryMaxReconsume+1), Value: fmt.Sprintf("min %d, max %d", max(minDel, 0), maxDel), OK: true},
	}...)
}

// removedEverywhere reports whether the acknowledged dlq- messages no
// node's %DLQ% holds can all be entries retention removed from every
// replica. The final read cannot place them, so the excuse is bounded
// twice: there are no more of them than the entries below every read
// replica's (excused) floor, summed over the DLQ's queues, and each is
// among the earliest dead-lettered (by its last delivery, which precedes
// its send-back to %DLQ%; dlqReorderSlack allows for send-backs that
// retried while later ones went through). Dead-letter queues are written
// in arrival order, so retention takes the oldest first.
func removedEverywhere(missing []string, x ChaosHistory, perNode map[string]*nodeCoverage, floor map[nodeQueue]int64) bool {
	if len(missing) == 0 {
		return true
	}
	// Entries below the floor of every read node, per queue.
	minFloor := map[int]int64{}
	queues := map[int]bool{}
	for _, rr := range x.DLQRanges {
		queues[rr.Queue] = true
	}
	for q := range queues {
		m := int64(-1)
		for node := range perNode {
			f := floor[nodeQueue{node, q}]
			if m < 0 || f < m {
				m = f
			}
		}
		minFloor[q] = max(m, 0)
	}
	var removed int64
	for _, f := range minFloor {
		removed += f
	}
	if int64(len(missing)) > removed {
		return false
	}
	last := map[string]float64{}
	for _, d := range x.RetryDeliveries {
		if strings.HasPrefix(d.Value, "dlq-") {
			last[d.Value] = max(last[d.Value], d.AtMs)
		}
	}
	order := slices.SortedFunc(maps.Keys(last), func(a, b string) int { return cmp.Compare(last[a], last[b]) })
	rank := map[string]int{}
	for i, v := range order {
		rank[v] = i
	}
	for _, v := range missing {
		r, ok := rank[v]
		if !ok || int64(r) >= removed+dlqReorderSlack {
			return false
		}
	}
	return true
}

// dlqReorderSlack is how far past the removed entries' count a removed
// message's dead-letter rank may lie (send-backs retried across faults
// land out of their delivery order).
const dlqReorderSlack = 64

// dlqCoverage indexes the %DLQ% final read (topicCoverage: a node with a
// range but no entries is still read and held to every entry of its group
// above its floor) and lists the nodes whose read failed.
func dlqCoverage(x ChaosHistory) (perNode map[string]*nodeCoverage, floor map[nodeQueue]int64, unread []string) {
	unread = uniq(x.DLQUnread)
	sort.Strings(unread)
	perNode, floor = topicCoverage(x.DLQReads, x.DLQRanges, unread)
	return perNode, floor, unread
}

// retryTrail says where a retry- message that was never consumed went:
// each delivery's position and the member that served it, and where the
// final read found its copies in %RETRY% (position: nodes). A copy no
// delivery reached, at a position some replica holds, points at the
// member that served the retry queue around it.
func retryTrail(x ChaosHistory, value string) string {
	var dels []string
	for _, d := range x.RetryDeliveries {
		if d.Value != value {
			continue
		}
		s := position{orTopic(d.Topic, RetryTopic), d.Broker, d.Queue, d.Offset}.String()
		if d.ServedBy != "" {
			s += " via " + d.ServedBy
		}
		dels = append(dels, s)
	}
	copies := map[position][]string{}
	for _, r := range x.RetryReads {
		if r.Value == value && r.Topic != "" && r.Topic != RetryTopic {
			p := position{r.Topic, r.Broker, r.Queue, r.Offset}
			copies[p] = append(copies[p], r.Node)
		}
	}
	var out string
	if len(dels) > 0 {
		out += ": " + strings.Join(uniq(dels), ", ")
	}
	if len(copies) > 0 {
		var cs []string
		for _, p := range slices.SortedFunc(maps.Keys(copies), comparePositions) {
			nodes := uniq(copies[p])
			sort.Strings(nodes)
			cs = append(cs, fmt.Sprintf("%s on %s", p, strings.Join(nodes, ",")))
		}
		out += "; final read's retry copies: " + strings.Join(cs, ", ")
	}
	return out
}
