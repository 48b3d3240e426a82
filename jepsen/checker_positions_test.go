package jepsen

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/client"
)

const (
	conflicts = "offset conflicts (one offset, two values)"
	gaps      = "queue gaps or repeats (final read per node)"
)

// retryReadsHistory is chaosHistory with the final read of RetryTopic and
// %RETRY%JepsenRetryConsumers on n0 and n1, every copy at CommitLog offset
// 1000+100×(its %RETRY% offset), and the redeliveries carrying those
// offsets, served by n0.
func retryReadsHistory() History {
	h := chaosHistory()
	retryVals := []string{"dlq-0", "dlq-0", "retry-1"} // %RETRY% q0@0..2
	for _, n := range []string{"n0", "n1"} {
		h.Chaos.RetryReads = append(h.Chaos.RetryReads,
			Read{Node: n, Broker: GroupName, Queue: 0, Offset: 0, Value: "dlq-0", Intact: true, CommitLogOffset: 500},
			Read{Node: n, Broker: GroupName, Queue: 1, Offset: 0, Value: "retry-1", Intact: true, CommitLogOffset: 600})
		for off, v := range retryVals {
			h.Chaos.RetryReads = append(h.Chaos.RetryReads, Read{Node: n, Broker: GroupName, Topic: retryQueueTopic, Queue: 0, Offset: int64(off),
				Value: v, Intact: true, CommitLogOffset: int64(1000 + 100*off)})
		}
	}
	for i := range h.Chaos.RetryDeliveries {
		d := &h.Chaos.RetryDeliveries[i]
		d.ServedBy = "n0"
		if d.Topic == retryQueueTopic {
			d.CommitLogOffset = 1000 + 100*d.Offset
		}
	}
	return h
}

// TestCheckerShiftedRetryQueue: a follower whose %RETRY% ConsumeQueue is
// one entry short (its offsets hold what the other replicas hold one
// further on) serves a consumer. Each shifted position is an offset
// conflict, named by topic, queue and offset with both values, the
// member that served the consumer and both CommitLog offsets, even where
// the shift lands on another copy of the same message (same value, other
// CommitLog offset).
func TestCheckerShiftedRetryQueue(t *testing.T) {
	h := retryReadsHistory()
	if v := CheckHistory(h, true); !v.Valid {
		t.Fatalf("valid history judged invalid:\n%s", VerdictTable(h, v))
	}
	// n1 lost the unit at 0: its 0 and 1 point at the entries of 1 and 2.
	var keep []Read
	for _, r := range h.Chaos.RetryReads {
		if r.Node == "n1" && r.Topic == retryQueueTopic {
			if r.Offset == 0 {
				continue
			}
			r.Offset--
		}
		keep = append(keep, r)
	}
	h.Chaos.RetryReads = keep
	// The consumer pulled %RETRY% q0@1 from n1 and got retry-1.
	h.Chaos.RetryDeliveries = append(h.Chaos.RetryDeliveries, Delivery{Consumer: "retry-c ok", Value: "retry-1", Broker: GroupName, Topic: retryQueueTopic,
		Queue: 0, Offset: 1, Intact: true, Reconsume: 1, CommitLogOffset: 1200, ServedBy: "n1"})
	v := CheckHistory(h, true)
	c := check(t, v, conflicts)
	if v.Valid || c.OK || c.Value != "2" || len(c.Examples) != 2 {
		t.Fatalf("shift not reported as 2 conflicts: %+v\n%s", c, VerdictTable(h, v))
	}
	for i, want := range [][]string{
		{"broker-j %RETRY%JepsenRetryConsumers q0@0: ", "dlq-0 by ", "read n0 clo 1000", "read n1 clo 1100"},
		{"broker-j %RETRY%JepsenRetryConsumers q0@1: ", "dlq-0 by ", "consumer retry-c via n0 clo 1100", "read n0 clo 1100",
			" | retry-1 by ", "consumer retry-c ok via n1 clo 1200", "read n1 clo 1200"},
	} {
		for _, s := range want {
			if !strings.Contains(c.Examples[i], s) {
				t.Errorf("example %d %q lacks %q", i, c.Examples[i], s)
			}
		}
	}
	if c := check(t, v, gaps); !c.OK {
		t.Fatalf("a dense shifted queue reported as a gap: %+v", c)
	}
}

// TestCheckerConflictsEveryTopic: a position of the ordered topic,
// RetryTopic, the %DLQ% or the timer topic seen holding another value (a
// consumer served by a diverged member, or one replica's final read) is an
// offset conflict naming that topic; the main topic's keeps its form.
func TestCheckerConflictsEveryTopic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		base  func() History
		mut   func(h *History)
		wants string
	}{
		{"main", twoGroupHistory, func(h *History) {
			h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c1", Value: h.Deliveries[1].Value, Broker: h.Deliveries[0].Broker, Queue: h.Deliveries[0].Queue,
				Offset: h.Deliveries[0].Offset, Intact: true, ServedBy: "n2", CommitLogOffset: 77})
		}, "consumer c1 via n2 clo 77"},
		{"ordered delivery", retryReadsHistory, func(h *History) {
			h.Chaos.OrderDeliveries = append(h.Chaos.OrderDeliveries, Delivery{Consumer: "order-c", Value: orderValue("k0", 2), Broker: GroupName, Queue: 1, Offset: 2,
				Intact: true, ServedBy: "n2"})
		}, "broker-j JepsenOrderTopic q1@2: "},
		{"ordered replica", retryReadsHistory, func(h *History) { h.Chaos.OrderReads[2].Value = orderValue("k0", 0) }, "broker-j JepsenOrderTopic q1@1: "},
		{"retry topic", retryReadsHistory, func(h *History) { h.Chaos.RetryReads[0].Value = "retry-1" }, "broker-j JepsenRetryTopic q0@0: "},
		{"retry topic delivery", retryReadsHistory, func(h *History) { h.Chaos.RetryDeliveries[3].Queue = 0 }, "broker-j JepsenRetryTopic q0@0: "},
		{"dlq", retryReadsHistory, func(h *History) {
			h.Chaos.DLQReads[1].Value = "dlq-2"
		}, "broker-j %DLQ%JepsenRetryConsumers q0@0: "},
		{"timer delivery", timerHistory, func(h *History) { h.TimerDeliveries[1].Offset = 0 }, "broker-j JepsenTimerTopic q2@0: "},
		{"timer replica", timerHistory, func(h *History) { h.TimerRead.Reads[3].Value = "timer-0" }, "broker-j JepsenTimerTopic q2@1: "},
		{"same value, other CommitLog offset", retryReadsHistory, func(h *History) {
			h.Chaos.RetryReads[len(h.Chaos.RetryReads)-1].CommitLogOffset = 9999
		}, "read n1 clo 9999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.base()
			if v := CheckHistory(h, true); !check(t, v, conflicts).OK {
				t.Fatalf("base history has conflicts: %+v", check(t, v, conflicts))
			}
			tc.mut(&h)
			v := CheckHistory(h, true)
			c := check(t, v, conflicts)
			if v.Valid || c.OK || len(c.Examples) == 0 || !strings.Contains(strings.Join(c.Examples, "\n"), tc.wants) {
				t.Fatalf("conflict not reported with %q: %+v\n%s", tc.wants, c, VerdictTable(h, v))
			}
		})
	}
}

// TestCheckerGapsEveryTopic: a node whose final read of the ordered,
// retry, %RETRY%, %DLQ% or timer topic skips an offset is a queue gap
// naming node, topic and queue.
func TestCheckerGapsEveryTopic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		base  func() History
		mut   func(h *History)
		wants string
	}{
		{"ordered", retryReadsHistory, func(h *History) { h.Chaos.OrderReads[5].Offset = 6 }, "n0 JepsenOrderTopic q1: offset 6 follows 3"},
		{"%RETRY%", retryReadsHistory, func(h *History) {
			h.Chaos.RetryReads[len(h.Chaos.RetryReads)-1].Offset = 3
		}, "n1 %RETRY%JepsenRetryConsumers q0: offset 3 follows 1"},
		{"dlq", retryReadsHistory, func(h *History) {
			h.Chaos.DLQReads = append(h.Chaos.DLQReads, Read{Node: "n1", Broker: GroupName, Queue: 0, Offset: 2, Value: "dlq-0", Intact: true})
		}, "n1 %DLQ%JepsenRetryConsumers q0: offset 2 follows 0"},
		{"timer", timerHistory, func(h *History) { h.TimerRead.Reads[5].Offset = 2 }, "n2 JepsenTimerTopic q2: offset 2 follows 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.base()
			tc.mut(&h)
			v := CheckHistory(h, true)
			c := check(t, v, gaps)
			if v.Valid || c.OK || !strings.Contains(strings.Join(c.Examples, "\n"), tc.wants) {
				t.Fatalf("gap not reported as %q: %+v\n%s", tc.wants, c, VerdictTable(h, v))
			}
		})
	}
}

// TestDeliveryOf: a delivery records the queue's topic when it is not the
// subscribed one, the entry's CommitLog offset and the member that served
// the pull, by node id when it is one of the cluster's.
func TestDeliveryOf(t *testing.T) {
	m := &client.MessageExt{QueueID: 0, QueueOffset: 20317, CommitLogOffset: 123456, ReconsumeTimes: 1, ServedBy: "10.0.0.2:10911"}
	m.Body = encodeBody("retry-5301")
	nodes := map[string]string{"10.0.0.2:10911": "n1"}
	d := deliveryOf("retry-c", client.MessageQueue{Topic: retryQueueTopic, BrokerName: GroupName}, RetryTopic, m, 5, nodes)
	want := Delivery{Consumer: "retry-c", Value: "retry-5301", Broker: GroupName, Queue: 0, Offset: 20317, AtMs: 5, Intact: true, Reconsume: 1,
		Topic: retryQueueTopic, CommitLogOffset: 123456, ServedBy: "n1"}
	if d != want {
		t.Fatalf("delivery %+v, want %+v", d, want)
	}
	m.ServedBy = "10.0.0.9:10911"
	if d := deliveryOf("retry-c", client.MessageQueue{Topic: RetryTopic, BrokerName: GroupName}, RetryTopic, m, 5, nodes); d.Topic != "" || d.ServedBy != m.ServedBy {
		t.Fatalf("subscribed topic or unknown member: %+v", d)
	}
}

// TestCheckerRetryLostTrail: a retry- message never consumed is reported
// with where it was delivered from (position and serving member) and
// where the final read found its %RETRY% copy, the position the consumer
// stepped over.
func TestCheckerRetryLostTrail(t *testing.T) {
	h := retryReadsHistory()
	h.Chaos.RetryDeliveries = h.Chaos.RetryDeliveries[:4] // retry-1's redelivery from %RETRY% q0@2 never came
	v := CheckHistory(h, true)
	c := check(t, v, "retry: acknowledged retry- messages never consumed")
	want := "retry-1 (delivered 1 times: broker-j JepsenRetryTopic q1@0 via n0; final read's retry copies: broker-j %RETRY%JepsenRetryConsumers q0@2 on n0,n1)"
	if c.OK || len(c.Examples) != 1 || c.Examples[0] != want {
		t.Fatalf("examples %q, want [%q]", c.Examples, want)
	}
}
