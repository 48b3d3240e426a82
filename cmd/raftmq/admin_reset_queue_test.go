package main

import (
	"errors"
	"strconv"
	"testing"
)

// TestAdminResetOneQueue: RocketMQ 5's mqadmin resetOffsetByTime -b
// brokerAddr -q queueId [-o offset] resets that one queue (to -o, or to
// the offset found for -s), the way to step a group over one poison
// message; the other queues keep their offsets. -q without -b, or -o
// without both, is a usage error rather than a whole-topic reset.
func TestAdminResetOneQueue(t *testing.T) {
	f := startParity(t)
	f.run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "ParQ")
	f.run(t, "resetOffsetByTime", "-g", "ParQ", "-t", "ParT", "-s", "now")
	before := map[int]int64{}
	var cp consumerProgress
	f.js(t, &cp, "consumerProgress", "-g", "ParQ", "-t", "ParT")
	for _, q := range cp.Queues {
		before[q.QueueID] = q.ConsumerOffset
	}
	if before[f.queueID] < 1 {
		t.Fatalf("queue %d of ParT at %d after the reset to now; want its end", f.queueID, before[f.queueID])
	}
	var ro []queueOffset
	f.js(t, &ro, "resetOffsetByTime", "-g", "ParQ", "-t", "ParT", "-s", "now", "-b", f.leader, "-q", strconv.Itoa(f.queueID), "-o", "0")
	if len(ro) != 1 || ro[0].QueueID != f.queueID || ro[0].Offset != 0 {
		t.Fatalf("reset of queue %d to 0: %+v", f.queueID, ro)
	}
	f.js(t, &cp, "consumerProgress", "-g", "ParQ", "-t", "ParT")
	for _, q := range cp.Queues {
		want := before[q.QueueID]
		if q.QueueID == f.queueID {
			want = 0
		}
		if q.ConsumerOffset != want {
			t.Fatalf("after resetting queue %d to 0, queue %d is at %d; want %d", f.queueID, q.QueueID, q.ConsumerOffset, want)
		}
	}
	for _, args := range [][]string{{"-q", "0"}, {"-b", f.leader}, {"-o", "0"}} {
		if _, err := runAdmin(t, append(append([]string{}, f.n...), append([]string{"resetOffsetByTime", "-g", "ParQ", "-t", "ParT", "-s", "now"}, args...)...)...); !errors.Is(err, errAdminUsage) {
			t.Errorf("resetOffsetByTime %v: %v; want a usage error", args, err)
		}
	}
}
