package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
	"go.uber.org/zap"
)

// TestRemoveMemberNeedsAnID: REMOVE_RAFT_MEMBER with an empty memberId is
// refused, not answered as the removal of a member that is not there.
func TestRemoveMemberNeedsAnID(t *testing.T) {
	p := &memberAdminProcessor{log: zap.NewNop()}
	resp, err := p.remove(context.Background(), nil, remoting.NewRequest(remoting.RequestRemoveRaftMember, &wire.RaftMemberRequestHeader{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.ResponseInvalidParameter || !strings.Contains(resp.Remark, "memberId") {
		t.Fatalf("removeMember without an id: %d %q, want INVALID_PARAMETER naming memberId", resp.Code, resp.Remark)
	}
}
