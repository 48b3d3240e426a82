package main

import (
	"testing"
)

// TestAdminConsumerProgressBeforeFirstCommit: consumerProgress -g -t of a
// group that has not committed an offset on the topic yet (just created,
// or its consumers stuck before their first commit) shows every queue of
// the topic with consumer offset 0 and the whole backlog as its lag, as
// RocketMQ's GET_CONSUME_STATS answers for a named topic. An empty table
// with "Diff Total: 0" would tell the operator in an incident that the
// group has nothing left to consume.
func TestAdminConsumerProgressBeforeFirstCommit(t *testing.T) {
	f := startParity(t)
	f.run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "ParFresh")
	var cp consumerProgress
	f.js(t, &cp, "consumerProgress", "-g", "ParFresh", "-t", "ParT")
	if len(cp.Queues) != 4 || cp.DiffTotal != parityMsgs {
		t.Fatalf("consumerProgress of a group with no offsets on ParT: %d queues, diff total %d; want 4 queues and the %d messages as lag",
			len(cp.Queues), cp.DiffTotal, parityMsgs)
	}
	for _, q := range cp.Queues {
		if q.ConsumerOffset != 0 || q.Diff != q.BrokerOffset {
			t.Fatalf("queue %+v: want consumer offset 0 and the queue's messages as lag", q)
		}
	}
}
