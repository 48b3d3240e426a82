package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestSendBelowDedupWindowRefused: an idempotent send whose sequence is
// below its queue's dedup window is not acknowledged. Nothing is stored
// for it, and it may be a first send overtaken by a window of later ones
// (retries reordered by a failover), so SEND_OK would acknowledge a
// message no queue holds. A retry of a sequence the window still holds
// is answered as the stored copy.
func TestSendBelowDedupWindowRefused(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { c.DedupWindow = 4 })
	l := pc.createTopicOnLeader("DW", 1)
	addr := pc.nodes[l].Addr()
	send := func(seq int64) *remoting.RemotingCommand {
		props := wire.EncodeProperties(map[string]string{wire.PropertyProducerID: "dw-producer", wire.PropertySequence: strconv.FormatInt(seq, 10)})
		return pc.call(addr, remoting.RequestSendMessage, sendExt("DW", 0, props), []byte(fmt.Sprint("m", seq)))
	}
	// Sequence 1 is never sent before the window moves past it: the
	// window keeps up to twice its size before it forgets.
	var last *remoting.RemotingCommand
	for seq := int64(2); seq <= 12; seq++ {
		if last = send(seq); last.Code != remoting.ResponseSuccess {
			t.Fatalf("send %d: %d %s", seq, last.Code, last.Remark)
		}
	}
	if r := send(12); r.Code != remoting.ResponseSuccess || r.ExtFields["queueOffset"] != last.ExtFields["queueOffset"] {
		t.Fatalf("retry of the newest: %d %s, queue offset %s, want the stored copy's %s", r.Code, r.Remark, r.ExtFields["queueOffset"], last.ExtFields["queueOffset"])
	}
	r := send(1)
	if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "dedup window") {
		t.Fatalf("send below the dedup window: %d %q, want SYSTEM_ERROR naming the dedup window", r.Code, r.Remark)
	}
	if n := pc.groups[l].Store().GetMaxOffsetInQueue("DW", 0); n != 11 {
		t.Fatalf("queue holds %d messages, want the 11 sends of sequences 2..12", n)
	}
}
