package broker

import (
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// A send failed because its member is shutting down is answered as a
// not-leader without a leader named: clients (ours and RocketMQ's, which
// retry SERVICE_NOT_AVAILABLE) wait for the next leader instead of
// failing the send at this address, and no hint sends them back here.
func TestWriteErrorGroupClosedIsNotLeader(t *testing.T) {
	r := (&Controller{}).writeError("send", fmt.Errorf("propose: %w", ErrGroupClosed))
	if r.Code != remoting.ResponseServiceNotAvailable || !wire.IsNotLeaderRemark(r.Remark) {
		t.Fatalf("answer %d %q, want SERVICE_NOT_AVAILABLE with the not-leader remark", r.Code, r.Remark)
	}
	if leader := r.ExtFields[wire.ExtLeaderAddr]; leader != "" {
		t.Fatalf("answer names leader %q", leader)
	}
}
