package broker

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// A member that installed a snapshot (wiped, or joined as a new member
// past the leader's retained log) restarts its queues at the leader's next
// offsets and fetches the older messages afterwards (catch-up). Until then
// its queues start later than the group's: asked for a queue's minimum
// offset (a consumer starting from the first offset, the SDK asking any
// routed member while the leader is marked down), it must not answer its
// own, which would start that consumer past the retained messages it
// lacks. It names the leader instead.
func TestCatchingUpMemberDoesNotAnswerItsQueueStart(t *testing.T) {
	pc := startDiskCluster(t, func(c *BrokerConfig) {
		c.Store.MappedFileSizeCommitLog = 1 << 20
		c.SnapshotBytes = 0
		c.Store.MaxMessageSize = 128 << 10
		c.RaftBatchMaxBytes = 256 << 10
		// ~3 MB to fetch at 1 MiB/s: pending for seconds.
		c.CatchupBytesPerSecond = 1 << 20
		c.CatchupAdaptive = false
	})
	l := pc.leader()
	lg := pc.groups[l]
	if err := lg.UpdateTopic(context.Background(), wire.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	put := func(from, n int) {
		for i := from; i < from+n; i += 16 {
			var ms []*store.Message
			for j := i; j < i+16; j++ {
				ms = append(ms, testMessage("T", 0, fmt.Sprintf("k%d", j), "p", int64(j), 1024))
			}
			testutil.WaitFor(t, 30*time.Second, "a put", func() bool {
				_, err := pc.groups[pc.leader()].PutMessages(context.Background(), ms)
				return err == nil
			})
		}
	}
	put(0, 3200)
	f := (l + 1) % 3
	pc.wipeBehindSnapshot(t, lg, f, func() { put(3200, 160) })
	leaderMin := lg.Store().GetMinOffsetInQueue("T", 0)
	pc.startNode(f)
	testutil.WaitFor(t, 60*time.Second, "the wiped member's catch-up pending", func() bool {
		return pc.groups[f].catchupBlocksVoting() && pc.groups[f].Store().GetMaxOffsetInQueue("T", 0) > 0
	})
	ext := map[string]string{"topic": "T", "queueId": "0"}
	r := pc.call(pc.nodes[f].Addr(), remoting.RequestGetMinOffset, ext, nil)
	if !pc.groups[f].catchupBlocksVoting() {
		t.Skip("the catch-up ended before the question; the test needs it pending")
	}
	if r.Code == remoting.ResponseSuccess && r.ExtFields["offset"] != strconv.FormatInt(leaderMin, 10) {
		t.Fatalf("catching-up member answers GET_MIN_OFFSET %s; the leader's queue starts at %d", r.ExtFields["offset"], leaderMin)
	}
	if r.Code != remoting.ResponseServiceNotAvailable || r.ExtFields[wire.ExtLeaderAddr] != pc.nodes[l].Addr() {
		t.Fatalf("catching-up member: %d %q, want SERVICE_NOT_AVAILABLE naming leader %s", r.Code, r.Remark, pc.nodes[l].Addr())
	}
}
