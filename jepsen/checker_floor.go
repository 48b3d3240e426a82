package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/raftmq/raftmq/broker/store"
)

// A replica's retention floor (ReadRange.From above 0) excuses what is
// below it only when something in the run could have removed it. The
// brokers run with RocketMQ's retention: fileReservedTime (72 h) removes
// nothing within a run, so only forced deletion can, and it needs a full
// disk: the disk-full nemesis, or a data file system the monitor saw
// within diskPressureMargin of CleanForciblyRatio. A member that installed
// a snapshot starts its queues at the snapshot until its full-data
// catch-up fetched the older entries from the leader, so a floor on a node
// whose catch-up was still pending at the final read is excused too. Any
// other floor is entries a replica lost: its queues are held to
// everything, and the floor itself fails the run.

// retentionCause names what could have removed queue heads on any node in
// this run ("" when nothing could).
func retentionCause(h History) string {
	for _, f := range h.Faults {
		if f.Nemesis == "disk-full" {
			return "the disk-full nemesis ran"
		}
	}
	limit := float64(store.DefaultRetentionConfig().CleanForciblyRatio)
	for _, node := range slices.Sorted(maps.Keys(h.DiskPeaks)) {
		if pct := h.DiskPeaks[node]; pct >= limit-diskPressureMargin {
			return fmt.Sprintf("%s's data file system reached %.1f %% used (forced deletion above %.0f %%)", node, pct, limit)
		}
	}
	return ""
}

// excusedFloors keeps the floors the replica checks may excuse entries
// below: all of them when the run had a retention cause, otherwise only
// those of nodes whose catch-up was pending at the final read. The other
// nodes are held from offset 0.
func excusedFloors(h History, floor map[nodeQueue]int64) map[nodeQueue]int64 {
	if retentionCause(h) != "" {
		return floor
	}
	out := map[nodeQueue]int64{}
	for nq, f := range floor {
		if slices.Contains(h.CatchupPending, nq.node) {
			out[nq] = f
		}
	}
	return out
}

// checkFloors lists every final read's floors above 0 (main, ordered and
// timer topics, %DLQ%): a failure when none of them has a cause, reported
// with the cause otherwise. No check when every queue was read from 0.
func checkFloors(h History) (Check, bool) {
	type topicRanges struct {
		topic  string
		ranges []ReadRange
	}
	all := []topicRanges{{Topic, h.ReadRanges}, {OrderTopic, h.Chaos.OrderRanges}, {"%DLQ%" + RetryGroup, h.Chaos.DLQRanges}}
	if h.TimerRead != nil {
		all = append(all, topicRanges{TimerTopic, h.TimerRead.Ranges})
	}
	cause := retentionCause(h)
	var bad, excused []string
	for _, t := range all {
		for _, rr := range t.ranges {
			if rr.From <= 0 {
				continue
			}
			s := fmt.Sprintf("%s %s q%d keeps from %d", rr.Node, t.topic, rr.Queue, rr.From)
			switch {
			case cause != "":
				excused = append(excused, s)
			case slices.Contains(h.CatchupPending, rr.Node):
				excused = append(excused, s+" (catch-up pending)")
			default:
				bad = append(bad, s)
			}
		}
	}
	if len(bad)+len(excused) == 0 {
		return Check{}, false
	}
	sort.Strings(bad)
	sort.Strings(excused)
	if len(bad) > 0 {
		return Check{Name: "replica retention floors with no cause (no disk-full, no disk pressure, no pending catch-up)",
			Value: fmt.Sprintf("%d queues", len(bad)), OK: false, Required: true, Examples: bad[:min(len(bad), maxExamples)]}, true
	}
	why := cause
	if why == "" {
		why = "catch-up pending"
	}
	return Check{Name: "replica retention floors (entries below not required)", Value: fmt.Sprintf("%d queues: %s", len(excused), why), OK: true,
		Examples: excused[:min(len(excused), maxExamples)]}, true
}
