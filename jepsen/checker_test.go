package jepsen

import (
	"strings"
	"testing"
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
		t.Run(tc.name, func(t *testing.T) {
			h := twoGroupHistory()
			tc.mut(&h)
			v := CheckHistory(h, true)
			if v.Valid {
				t.Fatal("violation not found")
			}
			if c := check(t, v, tc.check); c.OK {
				t.Fatalf("check %q passed: %+v", tc.check, c)
			}
		})
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
