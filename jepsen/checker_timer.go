package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// timerEarlySlackMs allows for TIMER_OUT_MS being whole milliseconds when
// a history has only the monotonic times.
const timerEarlySlackMs = 2

// timerLateness is how long after its due time a delivery came (negative:
// before it), and what slack the early check allows. Both ends are read on
// the wall clock when the history has them: the broker fires on the wall
// clock, and time.Now reads its wall and monotonic clocks one after the
// other, so on a loaded box a preemption between the two reads can put the
// monotonic due time milliseconds past the wall-clock one the producer
// sent. The consumer reads the wall clock after the message arrived, so
// the wall-clock comparison needs no slack.
func timerLateness(o TimerOp, d Delivery) (late, slack float64) {
	if o.DueWallMs > 0 && d.AtWallMs > 0 {
		return float64(d.AtWallMs - o.DueWallMs), 0
	}
	return d.AtMs - o.DueMs, timerEarlySlackMs
}

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
	first := map[string]Delivery{}
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
		if late, slack := timerLateness(o, d); late < -slack {
			early = addEx(early, "%s delivered %.0f ms before its time", d.Value, -late)
		}
		if f, seen := first[d.Value]; !seen || d.AtMs < f.AtMs {
			first[d.Value] = d
		}
	}
	var lost []string
	nLost, pending := 0, 0
	var late []float64
	for _, o := range h.TimerOps {
		if o.Result != ResultOK {
			continue
		}
		d, seen := first[o.Value]
		if !seen {
			if h.TimerRead != nil && o.DueMs > h.TimerRead.AtMs {
				pending++ // not due when the run ended: the wheel may still hold it
				continue
			}
			nLost++
			lost = addEx(lost, "%s (due at %.0f ms)", o.Value, o.DueMs)
			continue
		}
		l, _ := timerLateness(o, d)
		late = append(late, l)
	}
	slices.Sort(late)
	p := func(q float64) float64 {
		if len(late) == 0 {
			return 0
		}
		return late[min(len(late)-1, int(float64(len(late))*q))]
	}
	out := []Check{
		{Name: "timer messages lost", Value: fmt.Sprintf("%d of %d acknowledged", nLost, ok), OK: nLost == 0, Required: true, Examples: lost},
		{Name: "timer messages delivered early", Value: fmt.Sprintf("%d", len(early)), OK: len(early) == 0, Required: true, Examples: early},
		{Name: "timer messages phantom or corrupt", Value: fmt.Sprintf("%d", len(phantom)+len(corrupt)), OK: len(phantom)+len(corrupt) == 0,
			Required: true, Examples: append(phantom, corrupt...)},
		{Name: "timer fire error (first delivery − due)", Value: fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms", p(0.5), p(0.99), p(1)), OK: true},
	}
	if pending > 0 {
		out = append(out, Check{Name: "timer messages not yet due at the final read (pending)", Value: fmt.Sprint(pending), OK: true})
	}
	return append(out, checkTimerReplicas(h)...)
}

// checkTimerReplicas holds TimerTopic's final read to every acknowledged
// timer message due before it began: each read replica of the group that
// acknowledged it must hold it where the consumers got it from (unless
// that is below the replica's retention floor), or anywhere in the topic
// when no consumer got it (it fired on no replica, or the consumer missed
// it). The live consumer alone sees neither a replica that lost a fired
// timer nor which group failed to fire one. A run that sent timer messages
// without the final read, or whose read of a node failed, is not valid.
func checkTimerReplicas(h History) []Check {
	acked := 0
	for _, o := range h.TimerOps {
		if o.Result == ResultOK {
			acked++
		}
	}
	if acked == 0 {
		return nil
	}
	fr := h.TimerRead
	if fr == nil {
		return []Check{{Name: "timer messages: final read of the timer topic", Value: "not done", OK: false, Required: true}}
	}
	unread := uniq(fr.Unread)
	slices.Sort(unread)
	perNode, floor := topicCoverage(fr.Reads, fr.Ranges, unread)
	floor = excusedFloors(h, floor)
	nodes := slices.Sorted(maps.Keys(perNode))
	readGroups := map[string]bool{}
	hasFloor := map[string]bool{} // node keeps some queue from above 0
	for _, node := range nodes {
		readGroups[perNode[node].broker] = true
	}
	for nq, f := range floor {
		if f > 0 {
			hasFloor[nq.node] = true
		}
	}
	at := map[string][]slot{}
	for _, d := range h.TimerDeliveries {
		if s := (slot{d.Broker, d.Queue, d.Offset}); d.Intact && !slices.Contains(at[d.Value], s) {
			at[d.Value] = append(at[d.Value], s)
		}
	}
	var ex []string
	n, below := 0, 0
	for _, o := range h.TimerOps {
		if o.Result != ResultOK || o.DueMs > fr.AtMs {
			continue
		}
		groups := []string{o.Broker}
		if o.Broker == "" { // a history without the acknowledging group
			groups = nil
			for _, s := range at[o.Value] {
				if !slices.Contains(groups, s.broker) {
					groups = append(groups, s.broker)
				}
			}
		}
		for _, g := range groups {
			if !readGroups[g] {
				n++
				ex = addEx(ex, "%s: no node of %s read", o.Value, g)
				continue
			}
			for _, node := range nodes {
				c := perNode[node]
				if c.broker != g {
					continue
				}
				owes, holds, delivered := false, false, false
				for _, s := range at[o.Value] {
					if s.broker != g {
						continue
					}
					delivered = true
					if s.offset < floor[nodeQueue{node, s.queue}] {
						continue
					}
					owes = true
					if c.at[queueOffset{s.queue, s.offset}] == o.Value {
						holds = true
					}
				}
				if !delivered {
					// Never delivered from this group: held anywhere will
					// do; a node that removed part of the topic may have
					// removed it.
					owes, holds = !hasFloor[node], c.values[o.Value]
				}
				switch {
				case holds:
				case !owes:
					below++
				default:
					n++
					ex = addEx(ex, "%s (due %.0f ms) missing on %s (delivered at %v)", o.Value, o.DueMs, node, at[o.Value])
				}
			}
		}
	}
	sent := map[string]bool{}
	for _, o := range h.TimerOps {
		sent[o.Value] = true
	}
	var phEx []string
	phantom := 0
	for _, r := range fr.Reads {
		if !r.Intact || !sent[r.Value] {
			phantom++
			phEx = addEx(phEx, "stored on %s %q q%d@%d intact=%v", r.Node, r.Value, r.Queue, r.Offset, r.Intact)
		}
	}
	out := []Check{
		{Name: fmt.Sprintf("timer messages due but absent from a replica's final read (%d read)", len(nodes)), Value: fmt.Sprint(n), OK: n == 0, Required: true, Examples: ex},
		{Name: "timer topic's final read: phantom or corrupt", Value: fmt.Sprint(phantom), OK: phantom == 0, Required: true, Examples: phEx},
	}
	if below > 0 {
		out = append(out, Check{Name: "timer messages below a replica's retention floor (not held)", Value: fmt.Sprint(below), OK: true})
	}
	if len(unread) > 0 {
		out = append(out, Check{Name: "timer messages: final read failed (not checked)", Value: strings.Join(unread, ", "), OK: false, Required: true})
	}
	return out
}
