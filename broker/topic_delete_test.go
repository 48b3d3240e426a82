package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// pullAll reads queue q of topic from offset 0 on member n as a consumer
// starting from the first offset does, returning each message's key in
// queue order and failing if the offsets are not 0, 1, 2, ...
func pullAll(t *testing.T, n *testNode, topic string, q int32) []string {
	t.Helper()
	var keys []string
	for off := int64(0); ; {
		r, err := n.g().Store().GetMessage("G", topic, q, off, 32, nil)
		if err != nil {
			t.Fatalf("%s: pull %s/%d at %d: %v", n.id, topic, q, off, err)
		}
		if len(r.Messages) == 0 {
			if r.MinOffset != 0 {
				t.Fatalf("%s: %s/%d starts at offset %d, want 0", n.id, topic, q, r.MinOffset)
			}
			return keys
		}
		for i, b := range r.Messages {
			m, _, err := wire.DecodeMessage(b, false)
			if err != nil {
				t.Fatal(err)
			}
			if r.QueueOffsets[i] != int64(len(keys)) {
				t.Fatalf("%s: %s/%d: %s at offset %d, want %d", n.id, topic, q, m.UniqKey(), r.QueueOffsets[i], len(keys))
			}
			keys = append(keys, m.UniqKey())
		}
		off = r.NextBeginOffset
	}
}

// A deleted topic's messages never come back, on any member: after a
// delete and a create of the same topic, every member's queues hold only
// the new topic's messages from offset 0, the same on every member,
// including one restarted from a snapshot taken before the delete (it
// re-applies the old messages and the delete from its log) and one that
// installs a snapshot taken after it while it still holds the old queues.
func TestDeletedTopicMessagesNeverComeBack(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, segmentSize: 256 << 10})
	c.createTopic("T", 2)
	l := c.leader()
	replayer := c.followerOf(l)
	installer := slices.IndexFunc(c.nodes, func(n *testNode) bool { return n != l && n != c.nodes[replayer] })
	send := func(topic, key string, q int32) ack {
		t.Helper()
		res, err := c.sendRetrying(testMessage(topic, q, key, "", 0, 1024), time.Now().Add(15*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return ack{key: key, PutResult: res}
	}
	for i := 0; i < 20; i++ {
		send("T", fmt.Sprintf("old%d", i), int32(i%2))
	}
	c.waitCaughtUp()
	if got := pullAll(t, l, "T", 0); len(got) != 10 {
		t.Fatalf("before the delete queue 0 holds %v", got)
	}
	// The replayer's newest snapshot is from before the delete and some
	// of the old messages.
	if err := c.nodes[replayer].g().Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 24; i++ {
		send("T", fmt.Sprintf("old%d", i), int32(i%2))
	}
	c.waitCaughtUp()
	c.stop(installer)
	// Enough before the delete that the leader's log, cut before the
	// delete, no longer holds what the stopped member lacks: it installs
	// the leader's snapshot.
	for i := 0; i < 600; i++ {
		send("F", fmt.Sprintf("f%d", i), 0)
	}
	cut := l.g().Raft().LastIndex()

	ctx := context.Background()
	if err := l.g().DeleteTopic(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	deleteIndex := l.g().Raft().LastIndex()
	c.createTopic("T", 2)
	want := map[int32][]string{}
	var acks []ack
	newMsg := func(i int) {
		a := send("T", fmt.Sprintf("new%d", i), int32(i%2))
		acks = append(acks, a)
		want[a.QueueID] = append(want[a.QueueID], a.key)
	}
	for i := 0; i < 6; i++ {
		newMsg(i)
	}
	check := func(n *testNode) {
		t.Helper()
		for q := int32(0); q < 2; q++ {
			if got := pullAll(t, n, "T", q); !slices.Equal(got, want[q]) {
				t.Fatalf("%s: queue %d serves %v, want %v", n.id, q, got, want[q])
			}
		}
		checkAcked(t, n, acks)
	}
	check(l)
	if err := l.g().Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.g().LogStore().DeleteSegmentsBefore(cut); err != nil {
		t.Fatal(err)
	}
	// Killed, the replayer takes no snapshot on the way down: it restarts
	// from the one before the delete and re-applies the rest of its log,
	// with the new topic's queues on disk (flushed as the periodic flush
	// does).
	testutil.WaitFor(t, 15*time.Second, "the replayer applies the new messages", func() bool {
		return c.nodes[replayer].g().FSMAppliedIndex() >= l.g().FSMAppliedIndex()
	})
	if err := c.nodes[replayer].g().Store().FlushLogics(); err != nil {
		t.Fatal(err)
	}
	c.kill(replayer)
	c.start(replayer)
	if s := c.nodes[replayer].g().lastSnapshotIndex(); s == 0 || s >= deleteIndex {
		t.Fatalf("the restarted member starts from snapshot %d, want one before the delete at %d", s, deleteIndex)
	}
	c.start(installer)
	for i := 6; i < 10; i++ {
		newMsg(i)
	}
	c.waitCaughtUp()
	// The installer restarted its queues at the leader's offsets; its
	// catch-up then fills in the units before them.
	testutil.WaitFor(t, 30*time.Second, "every member's queues start at 0", func() bool {
		for _, n := range c.nodes {
			for q := int32(0); q < 2; q++ {
				if cq := n.g().Store().ConsumeQueues().Get("T", q); cq == nil || cq.MinOffset() != 0 {
					return false
				}
			}
		}
		return true
	})
	for _, n := range c.nodes {
		check(n)
	}
	if fi, _ := c.nodes[installer].g().LogStore().FirstIndex(); fi <= 1 {
		t.Fatalf("the stopped member did not install a snapshot (first index %d)", fi)
	}
}

// A version-1 delete entry (written before deletes destroyed queues, and
// still in logs) keeps the topic's queues when applied or re-applied, so
// a member re-applying it gives the topic created after it the offsets
// the others gave it.
func TestVersion1TopicDeleteKeepsQueues(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true})
	c.createTopic("T", 1)
	l := c.leader()
	for i := 0; i < 3; i++ {
		if _, err := c.sendRetrying(testMessage("T", 0, fmt.Sprintf("old%d", i), "", 0, 64), time.Now().Add(15*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.g().proposeCommand(context.Background(), &Command{Type: CmdDeleteTopic, Name: "T"}); err != nil {
		t.Fatal(err)
	}
	c.createTopic("T", 1)
	res, err := c.sendRetrying(testMessage("T", 0, "new", "", 0, 64), time.Now().Add(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res.QueueOffset != 3 {
		t.Fatalf("after a version-1 delete the next message is at offset %d, want 3", res.QueueOffset)
	}
	c.waitCaughtUp()
	for _, n := range c.nodes {
		if got := pullAll(t, n, "T", 0); len(got) != 4 {
			t.Fatalf("%s: queue serves %v", n.id, got)
		}
	}
}
