package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// bigBody is a body of n bytes that starts with name.
func bigBody(name string, n int) []byte {
	return append([]byte(name), bytes.Repeat([]byte{'.'}, n-len(name))...)
}

// TestTimerReputFitsRaftBatch: due timer messages whose bodies fit one
// re-put request (1 MiB of bodies) but whose stored bytes exceed
// raftBatchMaxBytes (1 MiB here, as whenever maxMessageSize is 1 MiB or
// less) are re-put in requests the group takes. The group refused the
// request as too large at every round: the timer service stopped at them
// for good, and no later timer message was delivered.
func TestTimerReputFitsRaftBatch(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TF", 1)
	const size = 524_250 // two bodies: below 1 MiB; two stored messages: above
	due := time.Now().UnixMilli() + 1500
	for _, name := range []string{"first", "second"} {
		props := timerProps(wire.PropertyTimerDeliverMs, due)
		if r := pc.call(addr, remoting.RequestSendMessage, sendExt("TF", 0, props), bigBody(name, size)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send timer %s: %d %s", name, r.Code, r.Remark)
		}
	}
	testutil.WaitFor(t, 15*time.Second, "both timer messages in TF", func() bool {
		return pc.groups[l].Store().GetMaxOffsetInQueue("TF", 0) == 2
	})
	if n := pc.groups[l].Store().GetMaxOffsetInQueue(wire.TopicTimer, 0); n != 2 {
		t.Fatalf("the timer topic holds %d messages, want 2", n)
	}
}
