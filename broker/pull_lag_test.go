package broker

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
)

// A leader whose FSM has not yet applied committed entries (here its
// ConsumeQueue write is failing and being retried) is behind a follower
// that applied them. A consumer that read the newest message from that
// follower then pulls past the leader's queue end: the leader must not
// answer OFFSET_MOVED, which would move the consumer back (to 0 while the
// queue's minimum is 0) and make it consume the queue again.
func TestPullLeaderBehindCommittedDoesNotMoveOffset(t *testing.T) {
	pc := startRealCluster(t, func(cfg *BrokerConfig) {
		cfg.Store.MappedFileSizeConsumeQueue = 4 * store.CQUnitSize
		cfg.ApplyRetryTimeout = time.Minute
	})
	l := pc.createTopicOnLeader("T", 1)
	leaderAddr := pc.nodes[l].Addr()
	for range 4 {
		pc.sendAt(leaderAddr, "T", []byte("m"))
	}
	f := (l + 1) % 3
	testutil.WaitFor(t, 10*time.Second, "the follower applied offsets 0..3", func() bool {
		return pc.groups[f].Store().GetMaxOffsetInQueue("T", 0) == 4
	})

	// The leader cannot create the queue's next file: it keeps retrying
	// the apply of message 4, which the followers apply.
	fsys := pc.parts[l].FS.(*storage.FaultFS)
	fsys.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if op == storage.OpOpen && strings.Contains(name, "consumequeue") {
			return unix.EIO
		}
		return nil
	})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		req := remoting.NewRequest(remoting.RequestSendMessage, nil, []byte("m"))
		for k, v := range sendExt("T", 0, "") {
			req.ExtFields[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pc.client.InvokeSync(ctx, leaderAddr, req)
	}()
	testutil.WaitFor(t, 10*time.Second, "the follower applied offset 4", func() bool {
		return pc.groups[f].Store().GetMaxOffsetInQueue("T", 0) == 5
	})
	if got := pc.groups[l].Store().GetMaxOffsetInQueue("T", 0); got != 4 || !pc.groups[l].IsLeader() {
		t.Fatalf("setup: the leader's queue ends at %d (want 4, its apply blocked), leader %v", got, pc.groups[l].IsLeader())
	}

	resp := pc.call(leaderAddr, remoting.RequestPullMessage, pullExt("G", "T", 0, 5, 0), nil)
	next, _ := strconv.ParseInt(resp.ExtFields["nextBeginOffset"], 10, 64)
	if resp.Code == remoting.ResponsePullOffsetMoved || next < 5 {
		t.Fatalf("pull at 5 from a leader that has not applied offset 4: code %d, nextBeginOffset %d (%s)", resp.Code, next, resp.Remark)
	}

	fsys.SetFaultFunc(nil)
	<-sent
	resp = pc.call(leaderAddr, remoting.RequestPullMessage, pullExt("G", "T", 0, 4, 0), nil)
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("pull at 4 once the leader applied it: code %d %s", resp.Code, resp.Remark)
	}
}
