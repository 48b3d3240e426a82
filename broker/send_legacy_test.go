package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestSendLegacyQueueCounts: a topic stored by an older version may claim
// no write queue or more queues than maxQueueNums. A send that lets the
// broker pick the queue is refused naming the topic (not a handler panic),
// and no queue id past maxQueueNums is written.
func TestSendLegacyQueueCounts(t *testing.T) {
	pc, rep := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	rep.mu.Lock()
	rep.topics["NOWRITE"] = wire.TopicConfig{TopicName: "NOWRITE", ReadQueueNums: 4, WriteQueueNums: 0, Perm: wire.PermRead | wire.PermWrite}
	rep.topics["HUGE"] = wire.TopicConfig{TopicName: "HUGE", ReadQueueNums: 1 << 30, WriteQueueNums: 1 << 30, Perm: wire.PermRead | wire.PermWrite}
	rep.mu.Unlock()
	if r := pc.call(addr, remoting.RequestSendMessage, sendExt("NOWRITE", -1, ""), []byte("x")); r.Code != remoting.ResponseSystemError ||
		!strings.Contains(r.Remark, "no write queues") {
		t.Errorf("send to a topic without write queues: code %d remark %q", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestSendMessage, sendExt("HUGE", maxQueueNums, ""), []byte("x")); r.Code != remoting.ResponseSystemError ||
		!strings.Contains(r.Remark, "is illegal") {
		t.Errorf("send to queue %d of a topic claiming 2^30 queues: code %d remark %q", maxQueueNums, r.Code, r.Remark)
	}
	if cq := pc.nodes[0].st.ConsumeQueues().Get("HUGE", maxQueueNums); cq != nil {
		t.Error("a ConsumeQueue past maxQueueNums was created")
	}
	if r := pc.call(addr, remoting.RequestSendMessage, sendExt("HUGE", -1, ""), []byte("x")); r.Code != remoting.ResponseSuccess {
		t.Errorf("send to a broker-picked queue of HUGE: code %d remark %q", r.Code, r.Remark)
	}
}
