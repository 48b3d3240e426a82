package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestBrokerOwnTopicsNotDeletedOrChanged: DELETE_TOPIC_IN_BROKER and
// UPDATE_AND_CREATE_TOPIC refuse the topics the broker keeps acknowledged
// messages in (delayed and timer messages, transaction halves and their op
// records) and TBW102, with SYSTEM_ERROR naming the topic, as RocketMQ 5's
// validateSystemTopicWhenUpdateTopic does: deleted, a pending delayed
// message is never delivered. The delayed message sent before the refused
// delete is delivered.
func TestBrokerOwnTopicsNotDeletedOrChanged(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "DLY", 1)
	if r := pc.call(addr, remoting.RequestSendMessage, sendExt("DLY", 0, wire.PropertyDelayTimeLevel+"\x011\x02"), []byte("later")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delayed send: %d %s", r.Code, r.Remark)
	}
	for _, topic := range []string{wire.TopicSchedule, wire.TopicTimer, wire.TopicTransHalf, wire.TopicTransOpHalf, wire.TopicAutoCreate} {
		r := pc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": topic}, nil)
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, topic) {
			t.Errorf("delete %s: %d %q; want SYSTEM_ERROR naming it", topic, r.Code, r.Remark)
		}
		r = pc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{"topic": topic, "readQueueNums": "1",
			"writeQueueNums": "1", "perm": "4"}, nil)
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, topic) {
			t.Errorf("update %s: %d %q; want SYSTEM_ERROR naming it", topic, r.Code, r.Remark)
		}
	}
	waitBodies(t, pc, "DLY", 1, map[string]int{"later": 1})
}
