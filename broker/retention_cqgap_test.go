package broker

import "testing"

// TestQueuePinStepsOverMissingQueueFile: a pending position (a timer's,
// a delay level's, the transaction floor) in a ConsumeQueue file missing
// between others pins the CommitLog at the first unit after the gap. No
// message of the missing units can be read through the queue; pinned at
// 0, retention would remove nothing until the position passed the gap.
func TestQueuePinStepsOverMissingQueueFile(t *testing.T) {
	smallQueues := queueFileGap(t) // T/0: 35 messages, the file of units [10, 20) lost
	r := newFakeReplica(t, "127.0.0.1:10911", smallQueues)
	cq := r.st.ConsumeQueues().Get("T", 0)
	at := func(off int64) int64 {
		u, err := cq.Get(off)
		if err != nil {
			t.Fatal(err)
		}
		return u.PhyOffset
	}
	for _, c := range []struct{ q, want int64 }{{3, at(3)}, {13, at(20)}, {10, at(20)}, {19, at(20)}, {20, at(20)}, {34, at(34)}} {
		if got := queuePin(cq, c.q); got != c.want {
			t.Errorf("pin for a position at %d: %d, want %d", c.q, got, c.want)
		}
	}
}
