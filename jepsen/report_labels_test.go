package jepsen

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFaultLabelsStack checks that labels of faults close together get
// different rows and that a label far from the others goes back to the
// top row; it also renders the timeline (RAFTMQ_JEPSEN_PNG=path keeps it
// for a look).
func TestFaultLabelsStack(t *testing.T) {
	var h History
	h.Profile, h.Mode = "short", ModeProxy
	for i := 0; i < 600; i++ {
		h.Ops = append(h.Ops, Op{Value: "v", Result: ResultOK, InvokeMs: float64(i * 100), CompleteMs: float64(i*100 + 5)})
	}
	for i, n := range []string{"kill-leader", "partition-oneway", "slow-disk", "net-loss-delay"} {
		s := 10000 + float64(i)*700 // 0.7 s apart: labels would overlap
		h.Faults = append(h.Faults, FaultWindow{Nemesis: n, StartMs: s, EndMs: s + 500})
	}
	h.Faults = append(h.Faults, FaultWindow{Nemesis: "kill-namesrv", StartMs: 40000, EndMs: 44000})
	v := CheckHistory(h, false)
	ps, rows := placeFaultLabels(v.Availability, 60)
	if rows != 4 {
		t.Fatalf("rows = %d, want 4 (one per close label): %+v", rows, ps)
	}
	for i := 0; i < 4; i++ {
		if ps[i].row != i {
			t.Fatalf("label %d in row %d: %+v", i, ps[i].row, ps)
		}
	}
	if ps[4].row != 0 {
		t.Fatalf("a lone label should use the top row: %+v", ps[4])
	}
	path := filepath.Join(t.TempDir(), "timeline.png")
	if keep := os.Getenv("RAFTMQ_JEPSEN_PNG"); keep != "" {
		path = keep
	}
	if err := plotTimeline(path, h, v); err != nil {
		t.Fatal(err)
	}
}
