package jepsen

import (
	"errors"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/client"
)

// twoGroupHistory is a small valid history over two groups whose queues
// share (queue, offset) numbers, as two real groups do.
func twoGroupHistory() History {
	h := History{Profile: "unit"}
	for i, g := range []string{"broker-j", "broker-j2"} {
		for off := int64(0); off < 3; off++ {
			v := g + "-v" + string(rune('0'+off))
			h.Ops = append(h.Ops, Op{Process: "p", Value: v, Result: ResultOK, Broker: g, Queue: 0, Offset: off,
				InvokeMs: float64(100*off + 10*int64(i)), CompleteMs: float64(100*off + 10*int64(i) + 5)})
			h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c0", Value: v, Broker: g, Queue: 0, Offset: off, Intact: true})
			for _, node := range [][]string{{"n0", "n1", "n2"}, {"n3", "n4", "n5"}}[i] {
				h.Reads = append(h.Reads, Read{Node: node, Broker: g, Queue: 0, Offset: off, Value: v, Intact: true})
			}
		}
	}
	// Both groups have a term 2 leader: not a violation.
	h.Leaders = []LeaderObs{{Node: "n0", Group: "broker-j", Term: 2, State: "Leader"}, {Node: "n3", Group: "broker-j2", Term: 2, State: "Leader"}}
	return h
}

func check(t *testing.T, v Verdict, name string) Check {
	t.Helper()
	for _, c := range v.Checks {
		if strings.HasPrefix(c.Name, name) {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, v.Checks)
	return Check{}
}

// requireViolation applies mut to a valid two-group history and requires
// an invalid verdict whose check named name fails.
func requireViolation(t *testing.T, mut func(*History), name string) {
	t.Helper()
	requireViolationIn(t, twoGroupHistory(), mut, name)
}

// requireViolationIn applies mut to the valid history h and requires an
// invalid verdict whose check named name fails.
func requireViolationIn(t *testing.T, h History, mut func(*History), name string) {
	t.Helper()
	mut(&h)
	v := CheckHistory(h, true)
	if v.Valid {
		t.Fatalf("violation not found:\n%s", VerdictTable(h, v))
	}
	if c := check(t, v, name); c.OK {
		t.Fatalf("check %q passed: %+v", name, c)
	}
}

func TestCheckerTwoGroupsValid(t *testing.T) {
	v := CheckHistory(twoGroupHistory(), true)
	if !v.Valid {
		t.Fatalf("valid history judged invalid:\n%s", VerdictTable(twoGroupHistory(), v))
	}
	if c := check(t, v, "acknowledged per group"); c.Value != "broker-j 3, broker-j2 3" {
		t.Fatalf("per group = %q", c.Value)
	}
}

func TestCheckerFindsViolations(t *testing.T) {
	cases := []struct {
		name  string
		mut   func(h *History)
		check string
	}{
		{"lost", func(h *History) { h.Deliveries = h.Deliveries[1:] }, "lost"},
		{"absent from a replica", func(h *History) { h.Reads = h.Reads[1:] }, "acknowledged but absent"},
		{"offset conflict", func(h *History) { h.Reads[0].Value = h.Ops[1].Value }, "offset conflicts"},
		{"phantom", func(h *History) {
			h.Deliveries = append(h.Deliveries, Delivery{Value: "never-sent", Broker: "broker-j", Queue: 1, Intact: true})
		}, "phantom"},
		{"two leaders in one group's term", func(h *History) {
			h.Leaders = append(h.Leaders, LeaderObs{Node: "n1", Group: "broker-j", Term: 2, State: "Leader"})
		}, "terms with two leaders"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireViolation(t, tc.mut, tc.check) })
	}
}

// TestAvailabilityPerGroup: a fault in one group is measured on that
// group's acks only, and disk-full refusals in the window are counted.
func TestAvailabilityPerGroup(t *testing.T) {
	h := History{}
	for ms := 0; ms <= 3000; ms += 100 {
		h.Ops = append(h.Ops, Op{Value: "b", Result: ResultOK, Broker: "broker-j2", CompleteMs: float64(ms)})
		if ms < 1000 || ms >= 2500 {
			h.Ops = append(h.Ops, Op{Value: "a", Result: ResultOK, Broker: "broker-j", CompleteMs: float64(ms)})
		}
	}
	h.Ops = append(h.Ops, Op{Value: "x", Result: ResultUnknown, Err: "code 14: send: store: disk full", CompleteMs: 1500})
	h.Faults = []FaultWindow{{Nemesis: "disk-full", Group: "broker-j", StartMs: 1000, EndMs: 2000}}
	av := availability(h, okOnly(h.Ops))
	if len(av) != 1 || av[0].MaxGapMs != 1600 || av[0].DiskFullRefusals != 1 {
		t.Fatalf("availability = %+v, want gap 1600 ms and 1 refusal", av)
	}
	h.Faults[0].Group = "broker-j2"
	if av = availability(h, okOnly(h.Ops)); av[0].MaxGapMs != 100 {
		t.Fatalf("other group's gap = %v, want 100", av[0].MaxGapMs)
	}
}

func okOnly(ops []Op) []Op {
	var out []Op
	for _, o := range ops {
		if o.Result == ResultOK {
			out = append(out, o)
		}
	}
	return out
}

// withRanges adds the final read's ranges to twoGroupHistory: every node
// covered [0,3) of queue 0.
func withRanges(h History) History {
	for _, g := range []struct {
		broker string
		nodes  []string
	}{{"broker-j", []string{"n0", "n1", "n2"}}, {"broker-j2", []string{"n3", "n4", "n5"}}} {
		for _, n := range g.nodes {
			h.ReadRanges = append(h.ReadRanges, ReadRange{Node: n, Broker: g.broker, Queue: 0, From: 0, To: 3})
		}
	}
	return h
}

// dropReads removes node's reads below offset `below` (all of them with
// below = 3).
func dropReads(h *History, node string, below int64) {
	var keep []Read
	for _, r := range h.Reads {
		if r.Node != node || r.Offset >= below {
			keep = append(keep, r)
		}
	}
	h.Reads = keep
}

// TestCheckerReplicaThatAnsweredNothing: a running node whose final read
// returned no message at all (a follower answering "not found" below its
// retention floor did so in a full run) is still held to every
// acknowledged value of its group; before ReadRange it silently dropped
// out of the check ("2 read").
func TestCheckerReplicaThatAnsweredNothing(t *testing.T) {
	h := withRanges(twoGroupHistory())
	dropReads(&h, "n0", 3)
	v := CheckHistory(h, true)
	c := check(t, v, "acknowledged but absent")
	if v.Valid || c.OK || c.Value != "3" || !strings.Contains(c.Name, "(6 read)") {
		t.Fatalf("check = %+v, valid %v; want 3 absent on n0 with 6 nodes read", c, v.Valid)
	}
}

// withDiskFull adds a disk-full fault window: retention could then have
// removed queue heads (checkFloors).
func withDiskFull(h *History) {
	h.Faults = append(h.Faults, FaultWindow{Nemesis: "disk-full", Detail: "fill n0's tmpfs (leader)", StartMs: 10, EndMs: 20})
}

// TestCheckerRetentionFloor: in a run where retention could remove entries
// (a disk-full window), offsets below a node's read range start are not
// required there; offsets above are.
func TestCheckerRetentionFloor(t *testing.T) {
	h := withRanges(twoGroupHistory())
	dropReads(&h, "n0", 2)
	h.ReadRanges[0].From = 2 // n0 keeps queue 0 from offset 2
	withDiskFull(&h)
	v := CheckHistory(h, true)
	if !v.Valid {
		t.Fatalf("retention below the floor judged a loss:\n%s", VerdictTable(h, v))
	}
	if c := check(t, v, "acks below a replica's retention floor"); c.Value != "2" {
		t.Fatalf("below-floor count = %q, want 2", c.Value)
	}
	h.ReadRanges[0].From = 1 // now offset 1 is required on n0 and missing
	if v = CheckHistory(h, true); v.Valid {
		t.Fatal("a missing offset above the floor was not found")
	}
}

// TestCheckerBitflipMustBeDetected: a flipped bit the member never named
// makes the run invalid even though the repair left the data whole.
func TestCheckerBitflipMustBeDetected(t *testing.T) {
	h := twoGroupHistory()
	found := FaultWindow{Nemesis: "bitflip-segment", Detail: "n0 (follower): flipped bit 1 of byte 7 of closed segment 0; detected after 5 ms: refused to start"}
	h.Faults = []FaultWindow{found}
	if v := CheckHistory(h, true); !v.Valid || check(t, v, "bitflip").Value != "0 of 1 flips" {
		t.Fatalf("detected flip: valid %v, %+v", v.Valid, check(t, v, "bitflip"))
	}
	missed := found
	missed.Detail = "n1 (follower): flipped bit 2 of byte 9 of closed segment 0; " + damageUndetected + " within 90s (exited false)"
	h.Faults = append(h.Faults, missed)
	v := CheckHistory(h, true)
	if c := check(t, v, "bitflip"); v.Valid || c.OK || c.Value != "1 of 2 flips" {
		t.Fatalf("undetected flip: valid %v, %+v", v.Valid, c)
	}
	// A window that flipped nothing (no closed segment yet) adds no check.
	h.Faults = []FaultWindow{{Nemesis: "bitflip-segment", Detail: "no closed segment"}}
	for _, c := range CheckHistory(h, true).Checks {
		if strings.HasPrefix(c.Name, "bitflip") {
			t.Fatalf("check without a flip: %+v", c)
		}
	}
}

// TestCheckerRebuildMustRejoin: a rebuilt member that bootstrapped, or
// that heal never saw caught up, makes the run invalid although the data
// checks may all pass.
func TestCheckerRebuildMustRejoin(t *testing.T) {
	h := twoGroupHistory()
	ok := FaultWindow{Nemesis: "rebuild-member", Detail: "n1 (follower, pid 7): SIGKILL, data directory wiped (3 MiB of files), restarted from its conf without raftJoin; joined without bootstrapping after 900 ms"}
	h.Faults = []FaultWindow{ok}
	if v := CheckHistory(h, true); !v.Valid || check(t, v, "rebuild-member").Value != "0 of 1 rebuilds" {
		t.Fatalf("rejoined: valid %v, %+v", v.Valid, check(t, v, "rebuild-member"))
	}
	booted := ok
	booted.Detail = "n2 (follower, pid 8): SIGKILL, data directory wiped (3 MiB of files), restarted from its conf without raftJoin; " + rebuildBootstrapped + ": no join line in its log within 30s"
	behind := ok
	behind.HealNote = "n1 of broker-j has not caught up after 5m0s: applied 10 of 90"
	h.Faults = append(h.Faults, booted, behind)
	v := CheckHistory(h, true)
	if c := check(t, v, "rebuild-member"); v.Valid || c.OK || c.Value != "2 of 3 rebuilds" {
		t.Fatalf("bootstrapped and behind: valid %v, %+v", v.Valid, c)
	}
	h.Faults = []FaultWindow{{Nemesis: "replace-member", Detail: "n0 (follower): removed"}}
	for _, c := range CheckHistory(h, true).Checks {
		if strings.HasPrefix(c.Name, "rebuild-member") {
			t.Fatalf("check without a rebuild: %+v", c)
		}
	}
}

// TestCheckerAckedSlotMissingOnAReplica: a plain producer's retried send
// stored "b" twice (q0@1, whose reply was lost, and q0@2, acknowledged);
// n2 lost its tail entry q0@2. n2 still holds the value "b" (at q0@1), but
// not the acknowledged entry: its queue is one shorter than the group's
// and the next append there would put another message at q0@2.
func TestCheckerAckedSlotMissingOnAReplica(t *testing.T) {
	h := History{Profile: "unit"}
	h.Ops = []Op{
		{Process: "p0", Value: "a", Result: ResultOK, Broker: "broker-j", Queue: 0, Offset: 0},
		{Process: "p0", Value: "b", Result: ResultOK, Broker: "broker-j", Queue: 0, Offset: 2},
	}
	for _, d := range []struct {
		v   string
		off int64
	}{{"a", 0}, {"b", 1}, {"b", 2}} {
		h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c0", Value: d.v, Broker: "broker-j", Queue: 0, Offset: d.off, Intact: true})
		for _, n := range []string{"n0", "n1", "n2"} {
			if n == "n2" && d.off == 2 {
				continue
			}
			h.Reads = append(h.Reads, Read{Node: n, Broker: "broker-j", Queue: 0, Offset: d.off, Value: d.v, Intact: true})
		}
	}
	v := CheckHistory(h, true)
	c := check(t, v, "acknowledged but absent")
	if v.Valid || c.OK || c.Value != "1" {
		t.Fatalf("acknowledged q0@2 missing on n2 not found: %+v valid=%v\n%s", c, v.Valid, VerdictTable(h, v))
	}
	// With n2 whole the history is valid (the plain duplicate is allowed).
	h.Reads = append(h.Reads, Read{Node: "n2", Broker: "broker-j", Queue: 0, Offset: 2, Value: "b", Intact: true})
	if v := CheckHistory(h, true); !v.Valid {
		t.Fatalf("whole history judged invalid:\n%s", VerdictTable(h, v))
	}
}

// TestCheckerGroupWithNoReplicaRead: a complete final read that read no
// node of a group that acknowledged sends has checked none of them on any
// replica; that is not a pass.
func TestCheckerGroupWithNoReplicaRead(t *testing.T) {
	h := twoGroupHistory()
	var keep []Read
	for _, r := range h.Reads {
		if r.Broker != "broker-j2" {
			keep = append(keep, r)
		}
	}
	h.Reads = keep
	v := CheckHistory(h, true)
	c := check(t, v, "acknowledged but absent")
	if v.Valid || c.OK || c.Value != "3" {
		t.Fatalf("broker-j2's 3 acks checked on no replica: %+v valid=%v\n%s", c, v.Valid, VerdictTable(h, v))
	}
}

// TestCheckerEachViolationKind feeds one crafted violation of each kind
// the main topic's checks must see and requires an invalid verdict for
// each; a send with an unknown outcome may be missing everywhere.
func TestCheckerEachViolationKind(t *testing.T) {
	cases := []struct {
		name  string
		mut   func(h *History)
		check string
	}{
		{"corrupt body delivered", func(h *History) { h.Deliveries[0].Intact = false }, "phantom or corrupt"},
		{"corrupt body stored on a replica", func(h *History) { h.Reads[2].Intact = false }, "phantom or corrupt"},
		{"phantom stored on a replica", func(h *History) {
			h.Reads = append(h.Reads, Read{Node: "n0", Broker: "broker-j", Queue: 0, Offset: 3, Value: "never-sent", Intact: true})
		}, "phantom or corrupt"},
		{"idempotent duplicate", func(h *History) {
			h.Ops[0].Idempotent = true
			for _, n := range []string{"n0", "n1", "n2"} {
				h.Reads = append(h.Reads, Read{Node: n, Broker: "broker-j", Queue: 0, Offset: 3, Value: h.Ops[0].Value, Intact: true})
			}
		}, "duplicates, idempotent"},
		{"delivered at another offset than acknowledged", func(h *History) {
			h.Deliveries[0].Offset, h.Deliveries[1].Offset = 1, 0
		}, "offset conflicts"},
		{"replica queue gap", func(h *History) {
			dropReads(h, "n1", 2)
			h.Reads = append(h.Reads, Read{Node: "n1", Broker: "broker-j", Queue: 0, Offset: 0, Value: "broker-j-v0", Intact: true})
		}, "queue gaps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireViolation(t, tc.mut, tc.check) })
	}
	// A final read that failed is never a pass, whatever it found.
	if v := CheckHistory(twoGroupHistory(), false); v.Valid {
		t.Fatal("an incomplete final read judged valid")
	}
	h := twoGroupHistory()
	h.Ops = append(h.Ops, Op{Process: "p", Value: "timed-out", Result: ResultUnknown, Queue: -1, Offset: -1, Err: "deadline exceeded"})
	if v := CheckHistory(h, true); !v.Valid {
		t.Fatalf("an unknown send never stored judged a loss:\n%s", VerdictTable(h, v))
	}
}

// TestSendOutcomeOnlySendOK: only SEND_OK is an acknowledgement; a send
// stored without the durability asked for (RocketMQ's FLUSH_DISK_TIMEOUT,
// FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, returned without an error) may
// be lost and must not be held to the no-loss checks.
func TestSendOutcomeOnlySendOK(t *testing.T) {
	if acked, why := sendOutcome(&client.SendResult{Status: client.SendOK}, nil); !acked || why != "" {
		t.Fatalf("SEND_OK: acked %v (%q)", acked, why)
	}
	for _, st := range []client.SendStatus{client.SendFlushDiskTimeout, client.SendFlushSlaveTimeout, client.SendSlaveNotAvailable} {
		if acked, why := sendOutcome(&client.SendResult{Status: st}, nil); acked || !strings.Contains(why, st.String()) {
			t.Errorf("%v: acked %v (%q), want unknown", st, acked, why)
		}
	}
	if acked, why := sendOutcome(nil, errors.New("deadline exceeded")); acked || why != "deadline exceeded" {
		t.Fatalf("error: acked %v (%q)", acked, why)
	}
}
