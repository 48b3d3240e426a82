package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// TestCatchupOverRemoting runs the catch-up of a wiped member between real
// nodes: CATCHUP_READ over TCP (checksummed chunks), the members' client.
// Afterwards the rebuilt member's log bytes over the leader's retained
// range equal the leader's, and its queues start where the leader's
// retained messages do.
func TestCatchupOverRemoting(t *testing.T) {
	pc := startDiskCluster(t, func(c *BrokerConfig) {
		c.Store.MappedFileSizeCommitLog = 1 << 20
		c.SnapshotBytes = 0
		c.Store.MaxMessageSize = 128 << 10
		c.RaftBatchMaxBytes = 256 << 10
	})
	l := pc.leader()
	lg := pc.groups[l]
	if err := lg.UpdateTopic(context.Background(), wire.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	put := func(from, n int) {
		for i := from; i < from+n; i += 16 {
			var ms []*store.Message
			for j := i; j < i+16; j++ {
				ms = append(ms, testMessage("T", int32(j%2), fmt.Sprintf("k%d", j), "p", int64(j), 1024))
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := pc.groups[pc.leader()].PutMessages(context.Background(), ms)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				waitBriefly()
			}
		}
	}
	put(0, 4000)
	l = pc.leader()
	lg = pc.groups[l]
	f := (l + 1) % 3
	testutil.WaitFor(t, 30*time.Second, "the follower applies everything", func() bool {
		return pc.groups[f].FSMAppliedIndex() >= lg.FSMAppliedIndex()
	})
	pc.stopNode(f)
	if err := os.RemoveAll(pc.cfgs[f].Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}
	put(4000, 400)
	if l = pc.leader(); pc.groups[l] != lg {
		t.Skip("leadership moved while the follower was down; the test needs one leader throughout")
	}
	if err := lg.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	idx, err := lg.LogStore().FirstIndexFrom(lg.LogStore().MinPosition() + 1<<20)
	if err != nil || idx == 0 {
		t.Fatalf("first index: %d, %v", idx, err)
	}
	if _, err := lg.LogStore().DeleteSegmentsBefore(idx); err != nil {
		t.Fatal(err)
	}
	pc.startNode(f)
	fg := pc.groups[f]
	testutil.WaitFor(t, 60*time.Second, "the rebuilt member catches up", func() bool {
		return fg.catchup.completed.Load() > 0 && !fg.catchupBlocksVoting()
	})
	cs := fg.CatchupStatus()
	t.Logf("caught up over CATCHUP_READ: %d bytes, %d units in %d ms", cs.BytesDone, cs.Units, cs.TookMillis)
	lmin := lg.LogStore().MinPosition()
	if cs.BytesDone == 0 || fg.LogStore().MinPosition() != lmin {
		t.Fatalf("rebuilt member's log starts at %d, the leader's at %d (%+v)", fg.LogStore().MinPosition(), lmin, cs)
	}
	end, err := lg.LogStore().EndOf(lg.lastSnapshotIndex())
	if err != nil {
		t.Fatal(err)
	}
	for pos := lmin; pos < end; {
		a, err := lg.LogStore().ReadRange(pos, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fg.LogStore().ReadRange(pos, len(a))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("log bytes at %d differ (%v)", pos, err)
		}
		pos += int64(len(a))
	}
	for q := int32(0); q < 2; q++ {
		lcq, fcq := lg.Store().ConsumeQueues().Get("T", q), fg.Store().ConsumeQueues().Get("T", q)
		u, err := fcq.Get(fcq.MinOffset())
		if err != nil || u.PhyOffset < lmin {
			t.Fatalf("queue %d: rebuilt member's first unit %+v (%v)", q, u, err)
		}
		if lu, err := lcq.Get(fcq.MinOffset()); err != nil || lu != u {
			t.Fatalf("queue %d offset %d: leader %+v, rebuilt %+v (%v)", q, fcq.MinOffset(), lu, u, err)
		}
		if fcq.MinOffset() > 0 {
			if lu, err := lcq.Get(fcq.MinOffset() - 1); err == nil && lu.PhyOffset >= lmin {
				t.Fatalf("queue %d: rebuilt member lacks offset %d, whose message the leader retains", q, fcq.MinOffset()-1)
			}
		}
	}
}
