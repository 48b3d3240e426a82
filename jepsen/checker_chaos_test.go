package jepsen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

// chaosHistory is a valid history of the ordered, offsets and retry
// workloads on top of the two-group main history.
func chaosHistory() History {
	h := twoGroupHistory()
	ok := func(key string, seq int, q int, off int64) OrderOp {
		return OrderOp{Op: Op{Value: orderValue(key, seq), Result: ResultOK, Broker: GroupName, Queue: q, Offset: off}, Key: key, Seq: seq}
	}
	h.Chaos.OrderOps = []OrderOp{
		ok("k0", 0, 1, 0), ok("k0", 1, 1, 1), ok("k1", 0, 3, 0),
		{Op: Op{Value: orderValue("k0", 2), Result: ResultUnknown, Queue: -1, Offset: -1}, Key: "k0", Seq: 2},
		ok("k0", 3, 1, 4),
	}
	read := func(node, v string, q int, off int64) Read {
		return Read{Node: node, Broker: GroupName, Queue: q, Offset: off, Value: v, Intact: true}
	}
	for _, n := range []string{"n0", "n1"} {
		h.Chaos.OrderReads = append(h.Chaos.OrderReads,
			read(n, orderValue("k0", 0), 1, 0), read(n, orderValue("k1", 0), 3, 0),
			read(n, orderValue("k0", 1), 1, 1), read(n, orderValue("k0", 1), 1, 2), // a plain retry stored twice
			read(n, orderValue("k0", 2), 1, 3), read(n, orderValue("k0", 3), 1, 4))
	}
	del := func(v string, q int, off int64) Delivery {
		return Delivery{Value: v, Broker: GroupName, Queue: q, Offset: off, Intact: true}
	}
	h.Chaos.OrderDeliveries = []Delivery{
		del(orderValue("k0", 0), 1, 0), del(orderValue("k1", 0), 3, 0), del(orderValue("k0", 1), 1, 1), del(orderValue("k0", 1), 1, 2),
		del(orderValue("k0", 0), 1, 0), // redelivery after a rebalance: not a first delivery
		del(orderValue("k0", 2), 1, 3), del(orderValue("k0", 3), 1, 4),
	}

	h.Chaos.OffsetCommits = []OffsetCommitOp{
		{Queue: 0, Value: 1, InvokeMs: 0, CompleteMs: 1, Result: ResultOK},
		{Queue: 0, Value: 2, InvokeMs: 50, CompleteMs: 51, Result: ResultOK},
		{Queue: 0, Value: 3, InvokeMs: 100, CompleteMs: 101, Result: ResultOK},
	}
	h.Chaos.OffsetObs = []OffsetObs{
		{Node: "n0", State: "Leader", Serving: true, Term: 2, Queue: 0, Value: 2, StatusMs: 60, CompleteMs: 61},
		{Node: "n1", State: "Follower", Term: 2, Queue: 0, Value: 2, StatusMs: 70, CompleteMs: 71},
		{Node: "n2", State: "Follower", Term: 2, Queue: 0, Value: 1, StatusMs: 72, CompleteMs: 73}, // lagging follower: fine
		// n0 took commit 3 and died before replicating it; n1 leads term 3
		// with what was replicated: the acknowledged 3 rolled back (allowed).
		{Node: "n1", State: "Leader", Serving: true, Term: 3, Queue: 0, Value: 2, StatusMs: 300, CompleteMs: 301},
		// A deposed leader of an older term answering less is not a
		// regression of the new term.
		{Node: "n0", State: "Leader", Serving: true, Term: 1, Queue: 0, Value: 1, StatusMs: 310, CompleteMs: 311},
	}

	h.Chaos.RetryOps = []Op{
		{Value: "dlq-0", Result: ResultOK, Broker: GroupName, Queue: 0, Offset: 0}, {Value: "retry-1", Result: ResultOK, Broker: GroupName, Queue: 1, Offset: 0},
		{Value: "dlq-2", Result: ResultUnknown, Queue: -1, Offset: -1},
	}
	// The first delivery from RetryTopic, the redeliveries from the
	// group's %RETRY% queue.
	rd := func(v string, times int32, ok bool, q int, off int64) Delivery {
		d := Delivery{Consumer: "retry-c", Value: v, Broker: GroupName, Queue: q, Offset: off, Intact: true, Reconsume: times}
		if ok {
			d.Consumer = "retry-c ok"
		}
		if times > 0 {
			d.Topic = retryQueueTopic
		}
		return d
	}
	h.Chaos.RetryDeliveries = []Delivery{
		rd("dlq-0", 0, false, 0, 0), rd("dlq-0", 1, false, 0, 0), rd("dlq-0", 2, false, 0, 1),
		rd("retry-1", 0, false, 1, 0), rd("retry-1", 1, true, 0, 2),
	}
	h.Chaos.DLQReads = []Read{read("n0", "dlq-0", 0, 0), read("n1", "dlq-0", 0, 0)}
	return h
}

// retryQueueTopic is the retry group's %RETRY% topic.
const retryQueueTopic = "%RETRY%" + RetryGroup

func TestCheckerChaosWorkloads(t *testing.T) {
	v := CheckHistory(chaosHistory(), true)
	if !v.Valid {
		t.Fatalf("valid history judged invalid:\n%s", VerdictTable(chaosHistory(), v))
	}
	if c := check(t, v, "offsets: acknowledged commits rolled back"); c.Value != "1" {
		t.Fatalf("rolled back = %q, want 1", c.Value)
	}
	for _, c := range []struct {
		name  string
		mut   func(h *History)
		check string
	}{
		{"ack order", func(h *History) { h.Chaos.OrderOps[1].Offset = 0 }, "ordered: acks out of send order"},
		{"ack queue", func(h *History) { h.Chaos.OrderOps[4].Queue = 2 }, "ordered: acks out of send order"},
		{"stored order", func(h *History) {
			h.Chaos.OrderReads[4].Value, h.Chaos.OrderReads[5].Value = h.Chaos.OrderReads[5].Value, h.Chaos.OrderReads[4].Value
		}, "ordered: stored out of send order"},
		{"delivery order", func(h *History) {
			d := h.Chaos.OrderDeliveries
			d[5], d[6] = d[6], d[5]
		}, "ordered: first deliveries out of send order"},
		{"ordered lost", func(h *History) { h.Chaos.OrderDeliveries = h.Chaos.OrderDeliveries[:6] }, "ordered: acknowledged, never delivered"},
		{"ordered phantom", func(h *History) {
			h.Chaos.OrderDeliveries = append(h.Chaos.OrderDeliveries, Delivery{Value: orderValue("k9", 0), Intact: true})
		}, "ordered: phantom"},
		{"offset regression", func(h *History) { h.Chaos.OffsetObs[3].Value = 1 }, "offsets: replicated commit answered lower"},
		{"offset phantom", func(h *History) { h.Chaos.OffsetObs[0].Value = 7 }, "offsets: answers above any commit sent"},
		{"dlq lost", func(h *History) { h.Chaos.DLQReads = nil }, "retry: acknowledged dlq- messages missing"},
		{"dlq one replica", func(h *History) { h.Chaos.DLQReads = append(h.Chaos.DLQReads, read2("n2", "dlq-x")) }, "retry: dead-lettered messages absent from a replica"},
		{"dlq consumed", func(h *History) { h.Chaos.RetryDeliveries[2].Consumer = "retry-c ok" }, "retry: always-failing messages consumed"},
		{"retry lost", func(h *History) { h.Chaos.RetryDeliveries = h.Chaos.RetryDeliveries[:4] }, "retry: acknowledged retry- messages never consumed"},
	} {
		h := chaosHistory()
		c.mut(&h)
		v := CheckHistory(h, true)
		if v.Valid || check(t, v, c.check).OK {
			t.Errorf("%s: not caught (%+v)", c.name, check(t, v, c.check))
		}
	}
}

// read2 is a DLQ read of a value nobody sent on node (it makes node count
// as read, so dlq-0 is then missing there).
func read2(node, v string) Read { return Read{Node: node, Broker: GroupName, Value: v, Intact: true} }

// TestCheckerChaosDLQRetentionFloor: in a run where retention could remove
// entries, the DLQ replica check holds a node only to the entries at or
// above its own floor (forced retention under disk pressure removes the
// head of every queue on that node), like the main topic's check, and does not count a node whose read
// failed as lacking anything.
func TestCheckerChaosDLQRetentionFloor(t *testing.T) {
	dlq := func(node, v string, off int64) Read {
		return Read{Node: node, Broker: GroupName, Queue: 0, Offset: off, Value: v, Intact: true}
	}
	rng := func(node string, from, to int64) ReadRange {
		return ReadRange{Node: node, Broker: GroupName, Queue: 0, From: from, To: to}
	}
	base := func() History {
		h := chaosHistory()
		h.Chaos.RetryOps = append(h.Chaos.RetryOps, Op{Value: "dlq-4", Result: ResultOK, Broker: GroupName, Queue: 2, Offset: 0})
		h.Chaos.RetryDeliveries = append(h.Chaos.RetryDeliveries, Delivery{Consumer: "retry-c", Value: "dlq-4", Broker: GroupName, Queue: 2, Offset: 0, Intact: true})
		// dlq-0 at 0, dlq-4 at 1 on n0 and n1; n2 removed offset 0.
		h.Chaos.DLQReads = []Read{dlq("n0", "dlq-0", 0), dlq("n0", "dlq-4", 1), dlq("n1", "dlq-0", 0), dlq("n1", "dlq-4", 1), dlq("n2", "dlq-4", 1)}
		h.Chaos.DLQRanges = []ReadRange{rng("n0", 0, 2), rng("n1", 0, 2), rng("n2", 1, 2)}
		withDiskFull(&h)
		return h
	}
	const absent = "retry: dead-lettered messages absent from a replica's DLQ"

	h := base()
	v := CheckHistory(h, true)
	if !v.Valid {
		t.Fatalf("entry below n2's floor judged absent:\n%s", VerdictTable(h, v))
	}
	if c := check(t, v, absent); c.Value != "0" || !strings.Contains(c.Name, "(3 read)") {
		t.Fatalf("absent = %+v, want 0 of 3 nodes read", c)
	}
	if c := check(t, v, "retry: DLQ entries below a replica's retention floor"); c.Value != "1" || c.Required {
		t.Fatalf("below floor = %+v, want 1 (info)", c)
	}

	for _, c := range []struct {
		name string
		mut  func(h *History)
	}{
		// n2 keeps from 0 yet lacks dlq-0.
		{"above floor", func(h *History) { h.Chaos.DLQRanges[2].From = 0 }},
		// n2 answered (a range) but holds nothing at all.
		{"empty node", func(h *History) { h.Chaos.DLQReads = h.Chaos.DLQReads[:4] }},
		// dlq-0 stored twice (a retried send-back), the copy at 1 is above
		// n2's floor: n2 must hold it.
		{"second copy above floor", func(h *History) {
			h.Chaos.DLQReads = []Read{dlq("n0", "dlq-0", 0), dlq("n0", "dlq-0", 1), dlq("n1", "dlq-0", 0), dlq("n1", "dlq-0", 1), dlq("n2", "dlq-4", 2), dlq("n0", "dlq-4", 2), dlq("n1", "dlq-4", 2)}
		}},
	} {
		h := base()
		c.mut(&h)
		v := CheckHistory(h, true)
		if v.Valid || check(t, v, absent).OK {
			t.Errorf("%s: not caught (%+v)", c.name, check(t, v, absent))
		}
	}

	// n2's read failed after it returned nothing: not counted as absent,
	// but reported apart as not checked, which fails the run: a replica
	// nobody could read proves nothing.
	h = base()
	h.Chaos.DLQReads = h.Chaos.DLQReads[:4]
	h.Chaos.DLQRanges = h.Chaos.DLQRanges[:2]
	h.Chaos.DLQUnread = []string{"n2"}
	v = CheckHistory(h, true)
	if v.Valid {
		t.Fatalf("unreadable DLQ replica judged valid:\n%s", VerdictTable(h, v))
	}
	if c := check(t, v, absent); c.Value != "0" || !strings.Contains(c.Name, "(2 read)") {
		t.Fatalf("absent = %+v, want 0 of 2 nodes read", c)
	}
	if c := check(t, v, "retry: DLQ replicas not checked"); c.Value != "n2" || !c.Required || c.OK {
		t.Fatalf("not checked = %+v, want n2 (required, failing)", c)
	}
}

// TestCheckerOrderedStoredCorrupt: the ordered topic's final read is held
// to what the consumers are: an entry stored with a broken checksum, or
// one nobody sent, is a violation even though no consumer saw it.
func TestCheckerOrderedStoredCorrupt(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(h *History)
	}{
		{"corrupt", func(h *History) { h.Chaos.OrderReads[2].Intact = false }},
		{"unparsable", func(h *History) { h.Chaos.OrderReads[2].Value = "o-k0" }},
		{"never sent", func(h *History) {
			h.Chaos.OrderReads = append(h.Chaos.OrderReads, Read{Node: "n0", Broker: GroupName, Queue: 1, Offset: 6, Value: orderValue("k0", 9), Intact: true})
		}},
	} {
		h := chaosHistory()
		c.mut(&h)
		v := CheckHistory(h, true)
		if v.Valid {
			t.Errorf("%s stored entry not caught:\n%s", c.name, VerdictTable(h, v))
		}
	}
}

// TestCheckerOrderedReadFailed: a node whose ordered-topic final read
// failed had its stored order checked on part of its queues at most; the
// run is not valid.
func TestCheckerOrderedReadFailed(t *testing.T) {
	h := chaosHistory()
	h.Chaos.OrderUnread = []string{"n1"}
	v := CheckHistory(h, true)
	if v.Valid {
		t.Fatalf("failed ordered-topic read judged valid:\n%s", VerdictTable(h, v))
	}
	if c := check(t, v, "ordered: final read failed"); c.OK || !c.Required || c.Value != "n1" {
		t.Fatalf("check = %+v", c)
	}
}

// TestOffsetAnswerNotFoundIsObserved: a leader answering QUERY_NOT_FOUND
// for a queue whose commit a follower had answered lost it entirely; the
// observation must reach the checker (as -1) and fail the run.
func TestOffsetAnswerNotFoundIsObserved(t *testing.T) {
	ok := remoting.NewResponse(remoting.ResponseSuccess, "")
	ok.ExtFields = map[string]string{"offset": "7"}
	if v, seen := offsetAnswer(ok); !seen || v != 7 {
		t.Fatalf("success answer = %d, %v", v, seen)
	}
	v, seen := offsetAnswer(remoting.NewResponse(remoting.ResponseQueryNotFound, "no committed offset"))
	if !seen || v != -1 {
		t.Fatalf("QUERY_NOT_FOUND = %d, %v; want -1 observed", v, seen)
	}
	if _, seen := offsetAnswer(remoting.NewResponse(remoting.ResponseSystemError, "not leader")); seen {
		t.Fatal("an error answer observed as an offset")
	}
	h := chaosHistory()
	h.Chaos.OffsetObs[3].Value = v // the term-3 leader has no offset for q0
	if r := CheckHistory(h, true); r.Valid || check(t, r, "offsets: replicated commit answered lower").OK {
		t.Fatalf("a lost offset not caught:\n%s", VerdictTable(h, r))
	}
}

// requireChaosViolation applies mut to chaosHistory and requires an
// invalid verdict whose check named name fails.
func requireChaosViolation(t *testing.T, mut func(*History), name string) {
	t.Helper()
	requireViolationIn(t, chaosHistory(), mut, name)
}

// TestCheckerOrderedReplicas: every read replica of the group that
// acknowledged an ordered send must hold it at the acknowledged slot, as
// the main topic's replicas must; a replica that lost the tail, holds it
// elsewhere or answered nothing, or a group none of whose replicas was
// read, is a violation although the consumer got everything and every
// stored order is right.
func TestCheckerOrderedReplicas(t *testing.T) {
	const absent = "ordered: acknowledged but absent from a replica"
	v := CheckHistory(chaosHistory(), true)
	if c := check(t, v, absent); !v.Valid || c.Value != "0" || !strings.Contains(c.Name, "(2 read)") {
		t.Fatalf("valid history: %+v\n%s", c, VerdictTable(chaosHistory(), v))
	}
	// n1's last entry, o-k0-3 acknowledged at q1@4.
	last := func(h *History) *Read { return &h.Chaos.OrderReads[len(h.Chaos.OrderReads)-1] }
	cases := []struct {
		name string
		mut  func(h *History)
	}{
		{"acknowledged tail lost on one replica", func(h *History) {
			h.Chaos.OrderReads = h.Chaos.OrderReads[:len(h.Chaos.OrderReads)-1]
		}},
		{"held at another slot", func(h *History) { last(h).Offset = 6 }},
		{"replica that answered nothing", func(h *History) {
			h.Chaos.OrderRanges = append(h.Chaos.OrderRanges, ReadRange{Node: "n2", Broker: GroupName, Queue: 1})
		}},
		{"acknowledging group never read", func(h *History) {
			o := OrderOp{Op: Op{Value: orderValue("k2", 0), Result: ResultOK, Broker: "broker-j2", Queue: 0, Offset: 0}, Key: "k2"}
			h.Chaos.OrderOps = append(h.Chaos.OrderOps, o)
			h.Chaos.OrderDeliveries = append(h.Chaos.OrderDeliveries, Delivery{Value: o.Value, Broker: "broker-j2", Intact: true})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireChaosViolation(t, tc.mut, absent) })
	}
	// A node whose read failed is not held (the failed read fails the run
	// on its own check).
	h := chaosHistory()
	h.Chaos.OrderReads = h.Chaos.OrderReads[:len(h.Chaos.OrderReads)-1]
	h.Chaos.OrderUnread = []string{"n1"}
	if c := check(t, CheckHistory(h, true), absent); c.Value != "0" || !strings.Contains(c.Name, "(1 read)") {
		t.Fatalf("failed read counted as absence: %+v", c)
	}
}

// TestCheckerChaosDLQTwoGroups: with two groups a message is dead-lettered
// in the %DLQ% of the group it was delivered from. Each group's replicas
// are held to their own group's DLQ entries only, and a group that
// delivered dead-lettered messages must have had its DLQ read.
func TestCheckerChaosDLQTwoGroups(t *testing.T) {
	const j2 = "broker-j2"
	dlq := func(node, broker, v string, off int64) Read {
		return Read{Node: node, Broker: broker, Queue: 0, Offset: off, Value: v, Intact: true}
	}
	base := func() History {
		h := chaosHistory()
		h.Chaos.RetryOps = append(h.Chaos.RetryOps, Op{Value: "dlq-6", Result: ResultOK, Broker: j2})
		for i := int32(0); i < 3; i++ {
			h.Chaos.RetryDeliveries = append(h.Chaos.RetryDeliveries, Delivery{Consumer: "retry-c", Value: "dlq-6", Broker: j2, Intact: true, Reconsume: i})
		}
		for i := range h.Chaos.RetryDeliveries {
			if h.Chaos.RetryDeliveries[i].Value == "dlq-0" {
				h.Chaos.RetryDeliveries[i].Broker = GroupName
			}
		}
		// Both groups' DLQs start at offset 0.
		h.Chaos.DLQReads = append(h.Chaos.DLQReads, dlq("n3", j2, "dlq-6", 0), dlq("n4", j2, "dlq-6", 0))
		return h
	}
	h := base()
	if v := CheckHistory(h, true); !v.Valid {
		t.Fatalf("each group's DLQ on its own replicas judged invalid:\n%s", VerdictTable(h, v))
	}
	cases := []struct {
		name  string
		mut   func(h *History)
		check string
	}{
		{"entry missing on its own group's replica", func(h *History) {
			h.Chaos.DLQRanges = append(h.Chaos.DLQRanges, ReadRange{Node: "n5", Broker: j2, Queue: 0, To: 0})
		}, "retry: dead-lettered messages absent from a replica"},
		{"delivering group's DLQ never read", func(h *History) {
			// dlq-6 was also delivered from broker-j and found there, but
			// broker-j2, which delivered it too, was not read at all.
			h.Chaos.RetryDeliveries = append(h.Chaos.RetryDeliveries, Delivery{Consumer: "retry-c", Value: "dlq-6", Broker: GroupName, Intact: true})
			h.Chaos.DLQReads = []Read{dlq("n0", GroupName, "dlq-0", 0), dlq("n1", GroupName, "dlq-0", 0), dlq("n0", GroupName, "dlq-6", 1), dlq("n1", GroupName, "dlq-6", 1)}
		}, "retry: groups that delivered dlq- messages whose %DLQ% no node read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			tc.mut(&h)
			v := CheckHistory(h, true)
			if v.Valid || check(t, v, tc.check).OK {
				t.Fatalf("not caught (%+v):\n%s", check(t, v, tc.check), VerdictTable(h, v))
			}
		})
	}
}

// TestCheckerChaosDLQRemovedFromEveryReplica: forced retention that ran on
// every replica removes the oldest dead letters everywhere, so the final
// read finds them nowhere. They are excused only when no more are missing
// than the entries below every replica's floor and each is among the
// earliest dead-lettered; a late one missing is a loss.
func TestCheckerChaosDLQRemovedFromEveryReplica(t *testing.T) {
	const n = 100
	base := func() History {
		h := chaosHistory()
		h.Chaos.RetryOps = nil
		h.Chaos.RetryDeliveries = nil
		h.Chaos.DLQReads = nil
		h.Chaos.DLQRanges = nil
		for i := range n {
			v := fmt.Sprintf("dlq-%03d", i)
			h.Chaos.RetryOps = append(h.Chaos.RetryOps, Op{Value: v, Result: ResultOK, Broker: GroupName, Queue: 0, Offset: int64(i)})
			h.Chaos.RetryDeliveries = append(h.Chaos.RetryDeliveries, Delivery{Consumer: "retry-c", Value: v, Broker: GroupName, Queue: 0, Offset: int64(i), Intact: true, AtMs: float64(10 * i)})
			if i < 2 {
				continue // below every replica's floor
			}
			for _, node := range []string{"n0", "n1", "n2"} {
				h.Chaos.DLQReads = append(h.Chaos.DLQReads, Read{Node: node, Broker: GroupName, Queue: 0, Offset: int64(i), Value: v, Intact: true})
			}
		}
		for _, node := range []string{"n0", "n1", "n2"} {
			h.Chaos.DLQRanges = append(h.Chaos.DLQRanges, ReadRange{Node: node, Broker: GroupName, Queue: 0, From: 2, To: n})
		}
		withDiskFull(&h)
		return h
	}
	const lost = "retry: acknowledged dlq- messages missing from %DLQ%"
	h := base()
	if v := CheckHistory(h, true); !v.Valid {
		t.Fatalf("dead letters removed from every replica judged lost:\n%s", VerdictTable(h, v))
	}
	for _, c := range []struct {
		name string
		mut  func(h *History)
	}{
		// A floor of 1 on one replica: only one entry is gone everywhere.
		{"more missing than removed", func(h *History) { h.Chaos.DLQRanges[1].From = 1 }},
		// The latest dead letter is missing instead of the second oldest.
		{"late one missing", func(h *History) {
			d := h.Chaos.DLQReads
			for i := range d {
				if d[i].Value == "dlq-099" {
					d[i].Value = "dlq-001"
				}
			}
		}},
		// Nothing could have removed anything: floors are not excused.
		{"no retention cause", func(h *History) { h.Faults = nil }},
	} {
		h := base()
		c.mut(&h)
		v := CheckHistory(h, true)
		if v.Valid || check(t, v, lost).OK {
			t.Errorf("%s: not caught (%+v)", c.name, check(t, v, lost))
		}
	}
}
