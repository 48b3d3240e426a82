package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Request checks a RocketMQ 4.9 broker makes and raftmq must make too:
// what RocketMQ refuses, a client must not see served.

// TestSendToForbiddenSystemTopic: RocketMQ refuses a send to any topic of
// TopicValidator's not-allowed-send set with NO_PERMISSION, even when the
// topic exists: TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC and
// OFFSET_MOVED_EVENT are the broker's own, like the schedule and half
// topics raftmq already refused.
func TestSendToForbiddenSystemTopic(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	for _, topic := range []string{wire.TopicTransCheckMaxTime, wire.TopicSelfTest, wire.TopicOffsetMovedEvent} {
		if r := tc.tryCreateTopic(addr, topic, 1); r.Code != remoting.ResponseSuccess {
			t.Fatalf("updateTopic %s: %d %s", topic, r.Code, r.Remark)
		}
		r := tc.call(addr, remoting.RequestSendMessage, sendExt(topic, 0, ""), []byte("m"))
		if r.Code != remoting.ResponseNoPermission || !strings.Contains(r.Remark, topic) {
			t.Errorf("send to %s answered %d %q; want NO_PERMISSION naming the topic", topic, r.Code, r.Remark)
		}
	}
}
