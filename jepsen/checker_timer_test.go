package jepsen

import (
	"strings"
	"testing"
)

func timerHistory() History {
	h := twoGroupHistory()
	h.TimerOps = []TimerOp{
		{Value: "timer-0", DueMs: 1000, Result: ResultOK, Broker: GroupName},
		{Value: "timer-1", DueMs: 1500, Result: ResultOK, Broker: GroupName},
		{Value: "timer-2", DueMs: 1600, Result: ResultUnknown}, // may or may not arrive
	}
	h.TimerDeliveries = []Delivery{
		{Value: "timer-0", Broker: GroupName, Queue: 2, Offset: 0, AtMs: 1010, Intact: true},
		{Value: "timer-1", Broker: GroupName, Queue: 2, Offset: 1, AtMs: 1530, Intact: true},
		{Value: "timer-1", Broker: GroupName, Queue: 2, Offset: 1, AtMs: 2500, Intact: true}, // redelivered after a failover
	}
	// Every replica of the group holds both fired timers where the
	// consumer got them.
	h.TimerRead = &TimerFinalRead{AtMs: 5000}
	for _, n := range []string{"n0", "n1", "n2"} {
		for off, v := range []string{"timer-0", "timer-1"} {
			h.TimerRead.Reads = append(h.TimerRead.Reads, Read{Node: n, Broker: GroupName, Queue: 2, Offset: int64(off), Value: v, Intact: true})
		}
		h.TimerRead.Ranges = append(h.TimerRead.Ranges, ReadRange{Node: n, Broker: GroupName, Queue: 2, To: 2})
	}
	return h
}

func TestCheckerTimers(t *testing.T) {
	v := CheckHistory(timerHistory(), true)
	if !v.Valid {
		t.Fatalf("valid timer history judged invalid:\n%s", VerdictTable(timerHistory(), v))
	}
	if c := check(t, v, "timer fire error"); c.Value != "p50 30 ms, p99 30 ms, max 30 ms" {
		t.Fatalf("fire error = %q", c.Value)
	}
	for _, c := range []struct {
		name  string
		mut   func(h *History)
		check string
	}{
		{"lost", func(h *History) { h.TimerDeliveries = h.TimerDeliveries[1:] }, "timer messages lost"},
		{"early", func(h *History) { h.TimerDeliveries[0].AtMs = 900 }, "timer messages delivered early"},
		{"phantom", func(h *History) {
			h.TimerDeliveries = append(h.TimerDeliveries, Delivery{Value: "timer-9", Intact: true})
		}, "timer messages phantom"},
		{"corrupt", func(h *History) { h.TimerDeliveries[0].Intact = false }, "timer messages phantom"},
	} {
		h := timerHistory()
		c.mut(&h)
		v := CheckHistory(h, true)
		if v.Valid || check(t, v, c.check).OK {
			t.Errorf("%s: not caught (%+v)", c.name, check(t, v, c.check))
		}
	}
}

// TestCheckerTimerWallClock: when the history has wall-clock times, the
// early check and the fire error compare them, as the broker fires on the
// wall clock: a monotonic due time read past the wall-clock one it was
// derived from (time.Now preempted between its two reads) is no early
// delivery, and a delivery before the wall-clock due time is one whatever
// the monotonic times say.
func TestCheckerTimerWallClock(t *testing.T) {
	withWall := func() History {
		h := timerHistory()
		for i := range h.TimerOps {
			h.TimerOps[i].DueWallMs = 1_700_000_000_000 + int64(h.TimerOps[i].DueMs)
		}
		for i := range h.TimerDeliveries {
			h.TimerDeliveries[i].AtWallMs = 1_700_000_000_000 + int64(h.TimerDeliveries[i].AtMs)
		}
		return h
	}
	h := withWall()
	for i := range h.TimerOps {
		h.TimerOps[i].DueMs += 20 // the producer's two reads 20 ms apart
	}
	v := CheckHistory(h, true)
	if !v.Valid || check(t, v, "timer messages delivered early").Value != "0" {
		t.Fatalf("monotonic skew judged an early delivery:\n%s", VerdictTable(h, v))
	}
	if c := check(t, v, "timer fire error"); c.Value != "p50 30 ms, p99 30 ms, max 30 ms" {
		t.Fatalf("fire error = %q, want the wall-clock one", c.Value)
	}
	h = withWall()
	h.TimerDeliveries[0].AtWallMs = h.TimerOps[0].DueWallMs - 1
	v = CheckHistory(h, true)
	if c := check(t, v, "timer messages delivered early"); v.Valid || c.OK || !strings.Contains(c.Examples[0], "timer-0 delivered 1 ms before") {
		t.Fatalf("a delivery 1 ms before its wall-clock due time not caught (%+v)", c)
	}
}

// TestCheckerTimerFinalRead: the timer topic's final read holds every
// replica of the acknowledging group to every timer due before the read
// (where the consumer got it, or anywhere when nobody did); a run without
// that read, or whose read of a node failed, is not valid; a timer not yet
// due when the run ended is pending, not lost.
func TestCheckerTimerFinalRead(t *testing.T) {
	const absent = "timer messages due but absent from a replica"
	v := CheckHistory(timerHistory(), true)
	if c := check(t, v, absent); !v.Valid || c.Value != "0" || !strings.Contains(c.Name, "(3 read)") {
		t.Fatalf("valid history: %+v\n%s", c, VerdictTable(timerHistory(), v))
	}
	dropRead := func(h *History, node, value string) {
		var keep []Read
		for _, r := range h.TimerRead.Reads {
			if r.Node != node || r.Value != value {
				keep = append(keep, r)
			}
		}
		h.TimerRead.Reads = keep
	}
	cases := []struct {
		name  string
		mut   func(h *History)
		check string
	}{
		{"fired timer lost on one replica", func(h *History) { dropRead(h, "n2", "timer-1") }, absent},
		{"held at another slot", func(h *History) { h.TimerRead.Reads[3].Offset = 2 }, absent},
		{"never delivered, fired on no replica", func(h *History) {
			h.TimerOps = append(h.TimerOps, TimerOp{Value: "timer-3", DueMs: 1700, Result: ResultOK, Broker: GroupName})
		}, absent},
		{"acknowledging group never read", func(h *History) {
			h.TimerOps = append(h.TimerOps, TimerOp{Value: "timer-3", DueMs: 1700, Result: ResultOK, Broker: "broker-j2"})
			h.TimerDeliveries = append(h.TimerDeliveries, Delivery{Value: "timer-3", Broker: "broker-j2", AtMs: 1710, Intact: true})
		}, absent},
		{"corrupt on a replica", func(h *History) { h.TimerRead.Reads[5].Intact = false }, "timer topic's final read: phantom or corrupt"},
		{"phantom on a replica", func(h *History) {
			h.TimerRead.Reads = append(h.TimerRead.Reads, Read{Node: "n0", Broker: GroupName, Queue: 2, Offset: 2, Value: "timer-9", Intact: true})
		}, "timer topic's final read: phantom or corrupt"},
		{"final read not done", func(h *History) { h.TimerRead = nil }, "timer messages: final read of the timer topic"},
		{"final read of a node failed", func(h *History) {
			dropRead(h, "n2", "timer-1")
			h.TimerRead.Ranges = h.TimerRead.Ranges[:2]
			h.TimerRead.Unread = []string{"n2"}
		}, "timer messages: final read failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := timerHistory()
			tc.mut(&h)
			v := CheckHistory(h, true)
			if v.Valid || check(t, v, tc.check).OK {
				t.Fatalf("not caught (%+v):\n%s", check(t, v, tc.check), VerdictTable(h, v))
			}
		})
	}
	// Due after the read began: pending, not lost (and not owed by the
	// replicas).
	h := timerHistory()
	h.TimerOps = append(h.TimerOps, TimerOp{Value: "timer-3", DueMs: 6000, Result: ResultOK, Broker: GroupName})
	v = CheckHistory(h, true)
	if !v.Valid || check(t, v, "timer messages not yet due").Value != "1" {
		t.Fatalf("a timer due after the run judged lost:\n%s", VerdictTable(h, v))
	}
	// Below a replica's floor: not owed there.
	h = timerHistory()
	dropRead(&h, "n2", "timer-0")
	h.TimerRead.Ranges[2].From = 1
	withDiskFull(&h)
	if v = CheckHistory(h, true); !v.Valid || check(t, v, "timer messages below a replica's retention floor").Value != "1" {
		t.Fatalf("an entry below the floor judged absent:\n%s", VerdictTable(h, v))
	}
}
