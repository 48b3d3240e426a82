package jepsen

import "testing"

// TestCheckerFloorNeedsACause: a replica whose final read starts above
// offset 0 lost the entries below unless something in the run could have
// removed them: the disk-full nemesis, a data file system near the forced
// deletion ratio, or a full-data catch-up still pending on that node. For
// each topic the checker holds replicas to (main, ordered, %DLQ%, timer), a
// floor with none of these fails the run, and the entries below it count
// as absent from that replica.
func TestCheckerFloorNeedsACause(t *testing.T) {
	dropTopicReads := func(reads []Read, node string, below int64) []Read {
		var keep []Read
		for _, r := range reads {
			if r.Node != node || r.Offset >= below {
				keep = append(keep, r)
			}
		}
		return keep
	}
	topics := []struct {
		name   string
		build  func() History // a floor on node, the entries below it gone
		node   string
		absent string
	}{
		{"main topic", func() History {
			h := withRanges(twoGroupHistory())
			dropReads(&h, "n0", 2)
			h.ReadRanges[0].From = 2
			return h
		}, "n0", "acknowledged but absent from a replica"},
		{"ordered topic", func() History {
			h := chaosHistory()
			for _, n := range []string{"n0", "n1"} {
				for _, q := range []int{1, 3} {
					h.Chaos.OrderRanges = append(h.Chaos.OrderRanges, ReadRange{Node: n, Broker: GroupName, Queue: q, To: 5})
				}
			}
			h.Chaos.OrderRanges[2].From = 2 // n1 q1
			var keep []Read
			for _, r := range h.Chaos.OrderReads {
				if r.Node != "n1" || r.Queue != 1 || r.Offset >= 2 {
					keep = append(keep, r)
				}
			}
			h.Chaos.OrderReads = keep
			return h
		}, "n1", "ordered: acknowledged but absent from a replica"},
		{"DLQ", func() History {
			h := chaosHistory()
			h.Chaos.DLQRanges = []ReadRange{{Node: "n0", Broker: GroupName, To: 1}, {Node: "n1", Broker: GroupName, From: 1, To: 1}}
			h.Chaos.DLQReads = dropTopicReads(h.Chaos.DLQReads, "n1", 1)
			return h
		}, "n1", "retry: dead-lettered messages absent from a replica"},
		{"timer topic", func() History {
			h := timerHistory()
			h.TimerRead.Ranges[2].From = 1
			h.TimerRead.Reads = dropTopicReads(h.TimerRead.Reads, "n2", 1)
			return h
		}, "n2", "timer messages due but absent from a replica"},
	}
	const floors = "replica retention floors"
	for _, tc := range topics {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.build()
			v := CheckHistory(h, true)
			if v.Valid || check(t, v, floors).OK || check(t, v, tc.absent).OK {
				t.Fatalf("a floor with no cause not caught (floors %+v, absent %+v):\n%s", check(t, v, floors), check(t, v, tc.absent), VerdictTable(h, v))
			}
			// Disk use far from the forced deletion ratio is no cause.
			h.DiskPeaks = map[string]float64{"n0": 50, "n1": 50, "n2": 50}
			if v := CheckHistory(h, true); v.Valid {
				t.Fatalf("a floor excused by a half-full disk:\n%s", VerdictTable(h, v))
			}
			for _, cause := range []struct {
				name string
				add  func(h *History)
			}{
				{"disk-full nemesis", withDiskFull},
				{"disk pressure", func(h *History) { h.DiskPeaks = map[string]float64{"n4": 83.5} }},
				{"catch-up pending", func(h *History) { h.CatchupPending = []string{tc.node} }},
			} {
				h := tc.build()
				cause.add(&h)
				v := CheckHistory(h, true)
				if !v.Valid || !check(t, v, floors).OK || check(t, v, floors).Required {
					t.Fatalf("%s: floor not excused:\n%s", cause.name, VerdictTable(h, v))
				}
			}
			// Another node's pending catch-up excuses nothing here.
			h = tc.build()
			h.CatchupPending = []string{"n5"}
			if v := CheckHistory(h, true); v.Valid {
				t.Fatalf("a floor excused by another node's catch-up:\n%s", VerdictTable(h, v))
			}
		})
	}
}
