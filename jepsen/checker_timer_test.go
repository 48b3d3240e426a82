package jepsen

import "testing"

func timerHistory() History {
	h := twoGroupHistory()
	h.TimerOps = []TimerOp{
		{Value: "timer-0", DueMs: 1000, Result: ResultOK},
		{Value: "timer-1", DueMs: 1500, Result: ResultOK},
		{Value: "timer-2", DueMs: 1600, Result: ResultUnknown}, // may or may not arrive
	}
	h.TimerDeliveries = []Delivery{
		{Value: "timer-0", AtMs: 1010, Intact: true},
		{Value: "timer-1", AtMs: 1530, Intact: true},
		{Value: "timer-1", AtMs: 2500, Intact: true}, // redelivered after a failover
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
