package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Check is one line of the verdict table.
type Check struct {
	Name     string   `json:"name"`
	Value    string   `json:"value"`
	OK       bool     `json:"ok"`
	Required bool     `json:"required"` // a failing required check makes the run invalid
	Examples []string `json:"examples,omitempty"`
}

// Availability is what one fault window cost the writers.
type Availability struct {
	Window FaultWindow `json:"window"`
	// MaxGapMs is the longest time without any acknowledged send among
	// gaps that overlap the window (a failover gap).
	MaxGapMs  float64 `json:"maxGapMs"`
	GapFromMs float64 `json:"gapFromMs"`
	// TimeToOKMs is from injection to the first acknowledgement of a send
	// invoked after the injection; -1 if none came.
	TimeToOKMs float64 `json:"timeToOkMs"`
	// DiskFullRefusals counts sends completed inside the window whose
	// error names a full disk (the disk-full nemesis expects some when it
	// fills the leader).
	DiskFullRefusals int `json:"diskFullRefusals"`
	// Deliveries counts messages consumed inside the window: reads go on
	// under a full disk or a minority fault.
	Deliveries int `json:"deliveries"`
}

// Verdict is the checker's result.
type Verdict struct {
	Valid             bool           `json:"valid"`
	Checks            []Check        `json:"checks"`
	Availability      []Availability `json:"availability"`
	Sent, OK, Unknown int
}

// slot is one position of one group's queue.
type slot struct {
	broker string
	queue  int
	offset int64
}

const maxExamples = 8

func addEx(ex []string, format string, args ...any) []string {
	if len(ex) < maxExamples {
		ex = append(ex, fmt.Sprintf(format, args...))
	}
	return ex
}

// CheckHistory evaluates a history. readsComplete says whether the final read
// reached the leader; without it the log-based checks are skipped
// (reported, not passed silently).
func CheckHistory(h History, readsComplete bool) Verdict {
	var v Verdict
	invoked := map[string]Op{}
	var okOps []Op
	for _, o := range h.Ops {
		invoked[o.Value] = o
		if o.Txn != "" {
			continue // transactional sends are counted by checkTransactions
		}
		v.Sent++
		if o.Result == ResultOK {
			v.OK++
			okOps = append(okOps, o)
		} else {
			v.Unknown++
		}
	}
	consumed := map[string]int{}
	for _, d := range h.Deliveries {
		consumed[d.Value]++
	}
	inLog := map[string]bool{}
	for _, r := range h.Reads {
		inLog[r.Value] = true
	}

	// Lost: acknowledged, never consumed.
	var lost []string
	nLost := 0
	for _, o := range okOps {
		if consumed[o.Value] == 0 {
			nLost++
			lost = addEx(lost, "%s (ack q%d@%d at %.0f ms)", o.Value, o.Queue, o.Offset, o.CompleteMs)
		}
	}
	v.Checks = append(v.Checks, Check{Name: "lost (acknowledged, never consumed)", Value: fmt.Sprint(nLost), OK: nLost == 0, Required: true, Examples: lost})

	if readsComplete {
		// Every node was caught up before the read: each must hold every
		// acknowledged value.
		// Every replica of the group that acknowledged must hold it.
		perNode, floor := readCoverage(h)
		floor = excusedFloors(h, floor)
		n, below, ex := ackedOnReplicas(okOps, perNode, floor)
		v.Checks = append(v.Checks, Check{Name: fmt.Sprintf("acknowledged but absent from a replica (%d read)", len(perNode)), Value: fmt.Sprint(n), OK: n == 0 && len(perNode) > 0, Required: true, Examples: ex})
		if c, ok := checkTxnReplicas(h, perNode, floor); ok {
			v.Checks = append(v.Checks, c)
		}
		if below > 0 {
			v.Checks = append(v.Checks, Check{Name: "acks below a replica's retention floor (not held)", Value: fmt.Sprint(below), OK: true})
		}
	} else {
		v.Checks = append(v.Checks, Check{Name: "lost from log (final read)", Value: "not checked: final read incomplete", OK: false, Required: true})
	}

	// Phantom: consumed or stored but never sent, or a broken checksum.
	{
		var ex []string
		n := 0
		for _, d := range h.Deliveries {
			if _, ok := invoked[d.Value]; !ok || !d.Intact {
				n++
				ex = addEx(ex, "consumed %q q%d@%d intact=%v", d.Value, d.Queue, d.Offset, d.Intact)
			}
		}
		for _, r := range h.Reads {
			if _, ok := invoked[r.Value]; !ok || !r.Intact {
				n++
				ex = addEx(ex, "stored on %s %q q%d@%d intact=%v", r.Node, r.Value, r.Queue, r.Offset, r.Intact)
			}
		}
		v.Checks = append(v.Checks, Check{Name: "phantom or corrupt (never sent / bad checksum)", Value: fmt.Sprint(n), OK: n == 0, Required: true, Examples: ex})
	}

	// The values each position of the main topic was seen holding, by
	// acks, consumers and replicas: the duplicates check below counts the
	// positions each value holds.
	slots := map[slot]map[string]bool{}
	see := func(s slot, value string) {
		m := slots[s]
		if m == nil {
			m = map[string]bool{}
			slots[s] = m
		}
		m[value] = true
	}
	for _, o := range okOps {
		see(slot{o.Broker, o.Queue, o.Offset}, o.Value)
	}
	for _, d := range h.Deliveries {
		if d.Topic == "" {
			see(slot{d.Broker, d.Queue, d.Offset}, d.Value)
		}
	}
	for _, r := range h.Reads {
		see(slot{r.Broker, r.Queue, r.Offset}, r.Value)
	}
	// One value per position of every topic the workloads use (main,
	// ordered, retry and %RETRY%, %DLQ%, timer).
	{
		n, ex := offsetConflicts(h, okOps)
		v.Checks = append(v.Checks, Check{Name: "offset conflicts (one offset, two values)", Value: fmt.Sprint(n), OK: n == 0, Required: true, Examples: ex})
	}

	// Dense queues on every node that answered, in every topic read.
	if readsComplete {
		n, ex := queueGaps(h)
		v.Checks = append(v.Checks, Check{Name: "queue gaps or repeats (final read per node)", Value: fmt.Sprint(n), OK: n == 0, Required: true, Examples: ex})
	}

	// Duplicates: a value stored at two offsets. Must be 0 for idempotent
	// producers; reported for plain ones (their retries may store twice).
	{
		where := map[string]map[slot]bool{}
		for s, vals := range slots {
			for val := range vals {
				if where[val] == nil {
					where[val] = map[slot]bool{}
				}
				where[val][s] = true
			}
		}
		var exI, exP []string
		nI, nP := 0, 0
		for val, ss := range where {
			if len(ss) < 2 {
				continue
			}
			if o, ok := invoked[val]; ok && o.Idempotent {
				nI++
				exI = addEx(exI, "%s at %d offsets", val, len(ss))
			} else {
				nP++
				exP = addEx(exP, "%s at %d offsets", val, len(ss))
			}
		}
		v.Checks = append(v.Checks, Check{Name: "duplicates, idempotent producers", Value: fmt.Sprint(nI), OK: nI == 0, Required: true, Examples: exI})
		v.Checks = append(v.Checks, Check{Name: "duplicates, plain producers (allowed)", Value: fmt.Sprint(nP), OK: true, Examples: exP})
	}

	// Redeliveries are at-least-once behaviour, reported only.
	{
		n := 0
		for _, c := range consumed {
			if c > 1 {
				n += c - 1
			}
		}
		v.Checks = append(v.Checks, Check{Name: "redeliveries to consumers (allowed)", Value: fmt.Sprint(n), OK: true})
	}

	// Unknown outcomes that were committed anyway.
	{
		n := 0
		for _, o := range h.Ops {
			if o.Txn == "" && o.Result != ResultOK && (consumed[o.Value] > 0 || inLog[o.Value]) {
				n++
			}
		}
		v.Checks = append(v.Checks, Check{Name: "unknown sends later found committed (allowed)", Value: fmt.Sprintf("%d of %d", n, v.Unknown), OK: true})
	}

	v.Checks = append(v.Checks, checkTransactions(h, consumed, inLog)...)

	// At most one leader per term.
	{
		type groupTerm struct {
			group string
			term  uint64
		}
		leaders := map[groupTerm]map[string]bool{}
		for _, l := range h.Leaders {
			if l.State != "Leader" {
				continue
			}
			k := groupTerm{l.Group, l.Term}
			if leaders[k] == nil {
				leaders[k] = map[string]bool{}
			}
			leaders[k][l.Node] = true
		}
		var ex []string
		n := 0
		for k, nodes := range leaders {
			if len(nodes) > 1 {
				n++
				ex = addEx(ex, "%s term %d: %v", k.group, k.term, nodes)
			}
		}
		v.Checks = append(v.Checks, Check{Name: "terms with two leaders", Value: fmt.Sprintf("%d (of %d terms seen)", n, len(leaders)), OK: n == 0, Required: true, Examples: ex})
	}

	// Per group: the checks above key every position by group, so each
	// group is checked on its own; this line shows the spread.
	{
		per := map[string]int{}
		for _, o := range okOps {
			per[o.Broker]++
		}
		var parts []string
		for _, g := range sortedKeys(per) {
			parts = append(parts, fmt.Sprintf("%s %d", g, per[g]))
		}
		v.Checks = append(v.Checks, Check{Name: "acknowledged per group", Value: strings.Join(parts, ", "), OK: true})
	}

	v.Checks = append(v.Checks, checkTimers(h)...)
	v.Checks = append(v.Checks, checkChaos(h)...)
	if c, ok := checkFloors(h); ok {
		v.Checks = append(v.Checks, c)
	}
	if c, ok := checkDamageDetected(h); ok {
		v.Checks = append(v.Checks, c)
	}
	if c, ok := checkRebuildRejoined(h); ok {
		v.Checks = append(v.Checks, c)
	}
	if c, ok := checkAudit(h); ok {
		v.Checks = append(v.Checks, c)
	}
	v.Availability = availability(h, okOps)
	v.Valid = true
	for _, c := range v.Checks {
		if c.Required && !c.OK {
			v.Valid = false
		}
	}
	return v
}

// checkDamageDetected: every bit the bitflip-segment nemesis flipped was
// found and named by the damaged member (false when no bit was flipped).
// The nemesis's repair rebuilds the member either way, so damage nobody
// noticed would otherwise leave no trace in the data checks.
func checkDamageDetected(h History) (Check, bool) {
	flips := 0
	var missed []string
	for _, f := range h.Faults {
		if f.Nemesis != "bitflip-segment" || !strings.Contains(f.Detail, "flipped bit") {
			continue
		}
		flips++
		if strings.Contains(f.Detail, damageUndetected) {
			missed = addEx(missed, "%.1f s: %s", f.StartMs/1000, f.Detail)
		}
	}
	if flips == 0 {
		return Check{}, false
	}
	return Check{Name: "bitflip: damage not found and named by the member", Value: fmt.Sprintf("%d of %d flips", len(missed), flips),
		OK: len(missed) == 0, Required: true, Examples: missed}, true
}

// checkRebuildRejoined: every member the rebuild-member nemesis wiped
// joined its running group instead of bootstrapping a log of its own, and
// caught up before heal gave up (false when no member was rebuilt). A
// bootstrap can leave no trace in the data checks (the bootstrap entry
// may equal the group's), and a member that never catches up only shows
// as a missing replica at the end.
func checkRebuildRejoined(h History) (Check, bool) {
	rebuilds := 0
	var bad []string
	for _, f := range h.Faults {
		if f.Nemesis != "rebuild-member" {
			continue
		}
		rebuilds++
		if strings.Contains(f.Detail, rebuildBootstrapped) || f.HealNote != "" {
			bad = addEx(bad, "%.1f s: %s %s", f.StartMs/1000, f.Detail, f.HealNote)
		}
	}
	if rebuilds == 0 {
		return Check{}, false
	}
	return Check{Name: "rebuild-member: bootstrapped or never caught up", Value: fmt.Sprintf("%d of %d rebuilds", len(bad), rebuilds),
		OK: len(bad) == 0, Required: true, Examples: bad}, true
}

func availability(h History, allOK []Op) []Availability {
	// Acks by group ("" = all), completion times sorted once per group.
	byGroup := map[string][]Op{"": allOK}
	for _, o := range allOK {
		byGroup[o.Broker] = append(byGroup[o.Broker], o)
	}
	sortedTimes := map[string][]float64{}
	for g, ops := range byGroup {
		t := make([]float64, 0, len(ops))
		for _, o := range ops {
			t = append(t, o.CompleteMs)
		}
		sort.Float64s(t)
		sortedTimes[g] = t
	}
	var out []Availability
	for k, w := range h.Faults {
		a := Availability{Window: w, TimeToOKMs: -1}
		// With two groups only the group hit counts: the other one keeps
		// acknowledging through the fault.
		okOps, times := byGroup[w.Group], sortedTimes[w.Group]
		// A gap belongs to this window when it starts between injection
		// (less a second: the last ack before the fault) and a second
		// after the heal, and before the next fault.
		limit := w.EndMs + 1000
		if k+1 < len(h.Faults) && h.Faults[k+1].StartMs < limit {
			limit = h.Faults[k+1].StartMs
		}
		for i := 1; i < len(times); i++ {
			if times[i] > w.StartMs && times[i-1] >= w.StartMs-1000 && times[i-1] < limit {
				if g := times[i] - times[i-1]; g > a.MaxGapMs {
					a.MaxGapMs, a.GapFromMs = g, times[i-1]
				}
			}
		}
		for _, o := range h.Ops {
			if o.Result != ResultOK && o.CompleteMs >= w.StartMs && o.CompleteMs <= w.EndMs && strings.Contains(strings.ToLower(o.Err), "disk full") {
				a.DiskFullRefusals++
			}
		}
		for _, d := range h.Deliveries {
			if d.AtMs >= w.StartMs && d.AtMs <= w.EndMs {
				a.Deliveries++
			}
		}
		for _, o := range okOps {
			if o.InvokeMs >= w.StartMs {
				if t := o.CompleteMs - w.StartMs; a.TimeToOKMs < 0 || t < a.TimeToOKMs {
					a.TimeToOKMs = t
				}
			}
		}
		out = append(out, a)
	}
	return out
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// nodeQueue names one queue on one node.
type nodeQueue struct {
	node  string
	queue int
}

// queueOffset is one position of a queue.
type queueOffset struct {
	queue  int
	offset int64
}

// nodeCoverage is what the final read found on one node.
type nodeCoverage struct {
	broker string
	values map[string]bool
	at     map[queueOffset]string
}

// readCoverage indexes the main topic's final read (topicCoverage).
func readCoverage(h History) (map[string]*nodeCoverage, map[nodeQueue]int64) {
	return topicCoverage(h.Reads, h.ReadRanges, nil)
}

// topicCoverage indexes one topic's final read: the values each read node
// holds and at which positions, and, per node and queue, the lowest offset
// it still keeps (its ReadRange From; 0 when the history has no ranges). A
// node counts as read when it has a range or a read, so one that answered
// nothing at all is still held to every acknowledged value of its group;
// a node named in unread (its read failed part way) is left out: what it
// did not return proves nothing, and the caller fails the run on it.
func topicCoverage(reads []Read, ranges []ReadRange, unread []string) (map[string]*nodeCoverage, map[nodeQueue]int64) {
	failed := map[string]bool{}
	for _, n := range unread {
		failed[n] = true
	}
	perNode := map[string]*nodeCoverage{}
	node := func(id, broker string) *nodeCoverage {
		c := perNode[id]
		if c == nil {
			c = &nodeCoverage{broker: broker, values: map[string]bool{}, at: map[queueOffset]string{}}
			perNode[id] = c
		}
		return c
	}
	floor := map[nodeQueue]int64{}
	for _, rr := range ranges {
		if failed[rr.Node] {
			continue
		}
		node(rr.Node, rr.Broker)
		floor[nodeQueue{rr.Node, rr.Queue}] = rr.From
	}
	for _, r := range reads {
		if failed[r.Node] {
			continue
		}
		c := node(r.Node, r.Broker)
		c.values[r.Value] = true
		c.at[queueOffset{r.Queue, r.Offset}] = r.Value
	}
	return perNode, floor
}

// ackedOnReplicas holds every read replica of the group that acknowledged
// each op to the acknowledged entry: value v at the acknowledged (queue,
// offset), unless that offset is below the replica's retention floor
// (counted in below). A group none of whose replicas was read counts
// against every op it acknowledged: they were checked nowhere.
func ackedOnReplicas(acks []Op, perNode map[string]*nodeCoverage, floor map[nodeQueue]int64) (n, below int, ex []string) {
	readGroups := map[string]bool{}
	for _, c := range perNode {
		readGroups[c.broker] = true
	}
	nodes := slices.Sorted(maps.Keys(perNode))
	for _, o := range acks {
		if !readGroups[o.Broker] {
			n++
			ex = addEx(ex, "%s: no node of %s read (ack q%d@%d)", o.Value, o.Broker, o.Queue, o.Offset)
			continue
		}
		for _, node := range nodes {
			c := perNode[node]
			if c.broker != o.Broker {
				continue
			}
			if o.Offset < floor[nodeQueue{node, o.Queue}] {
				below++ // removed from this node by retention
				continue
			}
			// The acknowledged entry itself, not the value anywhere: a
			// plain retry may have stored the value at an earlier offset
			// too, and that copy does not make up for a replica that lost
			// the acknowledged one.
			if got, ok := c.at[queueOffset{o.Queue, o.Offset}]; !ok || got != o.Value {
				n++
				ex = addEx(ex, "%s missing on %s (ack q%d@%d; value held elsewhere: %v)", o.Value, node, o.Queue, o.Offset, c.values[o.Value])
			}
		}
	}
	return n, below, ex
}
