package abuse

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// helpersFollowLeaderChange: leadership moves after a case found its
// target (a loaded host can miss a Raft lease mid-case); the case's
// requests reach the new leader and the case targets it from then on.
// TestAbuseSuite runs it on its cluster after the attacks.
func (e *env) helpersFollowLeaderChange(t *testing.T) {
	parent := e.t
	e.t = t // the helpers fail this subtest, not the suite
	defer func() { e.t = parent }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := e.currentLeader(ctx)
	if old == "" {
		t.Fatal("no member leads")
	}
	e.setLeader(old)
	resp, err := e.rc.InvokeSync(ctx, old, remoting.NewRequest(remoting.RequestLeadershipTransfer, &wire.LeadershipTransferRequestHeader{}, nil))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("leadership transfer: %v %v", resp, err)
	}
	e.createTopic("MOVED", 1)
	if e.leaderAddr() == old {
		t.Fatalf("the case still targets %s after leadership moved", old)
	}
	if resp, err := e.call(e.leaderAddr(), remoting.RequestSendMessage, sendExt("MOVED", 0, ""), []byte("x")); err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send to the new leader: %v %v", resp, err)
	}
}
