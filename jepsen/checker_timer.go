package jepsen

import (
	"fmt"
	"slices"
)

// timerEarlySlackMs allows for TIMER_OUT_MS being whole milliseconds.
const timerEarlySlackMs = 2

// checkTimers checks the timer messages (nothing when the run sent none):
// every acknowledged one delivered (none lost), none delivered before its
// due time, none delivered that was never sent; the fire-time error of the
// first delivery is reported.
func checkTimers(h History) []Check {
	if len(h.TimerOps) == 0 {
		return nil
	}
	sent := map[string]TimerOp{}
	ok := 0
	for _, o := range h.TimerOps {
		sent[o.Value] = o
		if o.Result == ResultOK {
			ok++
		}
	}
	first := map[string]float64{}
	var phantom, early, corrupt []string
	for _, d := range h.TimerDeliveries {
		if !d.Intact {
			corrupt = addEx(corrupt, "%s at %s q%d@%d", d.Value, d.Broker, d.Queue, d.Offset)
			continue
		}
		o, known := sent[d.Value]
		if !known {
			phantom = addEx(phantom, "%s", d.Value)
			continue
		}
		if d.AtMs < o.DueMs-timerEarlySlackMs {
			early = addEx(early, "%s delivered %.0f ms before its time", d.Value, o.DueMs-d.AtMs)
		}
		if t, seen := first[d.Value]; !seen || d.AtMs < t {
			first[d.Value] = d.AtMs
		}
	}
	var lost []string
	nLost := 0
	var late []float64
	for _, o := range h.TimerOps {
		if o.Result != ResultOK {
			continue
		}
		t, seen := first[o.Value]
		if !seen {
			nLost++
			lost = addEx(lost, "%s (due at %.0f ms)", o.Value, o.DueMs)
			continue
		}
		late = append(late, t-o.DueMs)
	}
	slices.Sort(late)
	p := func(q float64) float64 {
		if len(late) == 0 {
			return 0
		}
		return late[min(len(late)-1, int(float64(len(late))*q))]
	}
	return []Check{
		{Name: "timer messages lost", Value: fmt.Sprintf("%d of %d acknowledged", nLost, ok), OK: nLost == 0, Required: true, Examples: lost},
		{Name: "timer messages delivered early", Value: fmt.Sprintf("%d", len(early)), OK: len(early) == 0, Required: true, Examples: early},
		{Name: "timer messages phantom or corrupt", Value: fmt.Sprintf("%d", len(phantom)+len(corrupt)), OK: len(phantom)+len(corrupt) == 0,
			Required: true, Examples: append(phantom, corrupt...)},
		{Name: "timer fire error (first delivery − due)", Value: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms", p(0.5), p(0.99), p(1)), OK: true},
	}
}
