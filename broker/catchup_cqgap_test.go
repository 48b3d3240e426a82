package broker

import (
	"context"
	"testing"

	"go.uber.org/zap"
)

// TestCatchupQueueOverLeaderQueueFileGap: a leader whose ConsumeQueue has
// a file missing between others (it opens such a queue) serves a catch-up
// the units after the gap, and the member catching up backfills those:
// its queue ends at the snapshot's offset without a hole. Refused, the
// member's catch-up would fail at every retry, and it would never stand
// for election again.
func TestCatchupQueueOverLeaderQueueFileGap(t *testing.T) {
	smallQueues := queueFileGap(t) // T/0: 35 messages, the file of units [10, 20) lost
	lead := newFakeReplica(t, "127.0.0.1:10911", smallQueues)
	leader := &Group{ms: lead.st, log: zap.NewNop()}

	// The member installed a snapshot taken at queue offset 30: its queue
	// starts there, and it holds the CommitLog (the same bytes as the
	// leader's; the log phase fetched them).
	fol := newFakeReplica(t, "127.0.0.1:10912")
	if err := fol.st.ConsumeQueues().StartQueueAt("T", 0, 30); err != nil {
		t.Fatal(err)
	}
	cq := fol.st.ConsumeQueues().Get("T", 0)
	g := &Group{ms: fol.st, segQ: lead.segs, log: zap.NewNop()}
	src := groupSource{r: leader}
	if err := g.catchupQueue(context.Background(), src, cq, g.newFetchPace(context.Background(), src)); err != nil {
		t.Fatalf("catch-up of a queue over the leader's missing file: %v", err)
	}
	if got := cq.MinOffset(); got != 20 {
		t.Fatalf("queue minimum %d after the catch-up, want 20 (the first unit after the leader's gap)", got)
	}
	for off := int64(20); off < 30; off++ {
		want, err := lead.st.ConsumeQueues().Get("T", 0).Get(off)
		if err != nil {
			t.Fatal(err)
		}
		if u, err := cq.Get(off); err != nil || u != want {
			t.Fatalf("unit at %d: %+v %v, want the leader's %+v", off, u, err, want)
		}
	}
}
