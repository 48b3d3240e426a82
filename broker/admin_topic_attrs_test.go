package broker

import (
	"maps"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestUpdateTopicAttributes: UPDATE_AND_CREATE_TOPIC's attributes (RocketMQ
// 5's `mqadmin updateTopic -a`, the dashboard's message type) are applied
// as RocketMQ's TopicConfigManager applies them: stored on create, altered
// (+key=value, -key) on update, kept when an update names none. An
// attribute asking for storage or delivery raftmq does not have (compacted
// topics, batch consume queues, a topic's own retention, MIXED) is refused
// at the request, naming it, with RocketMQ's code for a refused topic
// update (SYSTEM_ERROR), instead of creating a plain topic that keeps and
// deletes messages by other rules.
func TestUpdateTopicAttributes(t *testing.T) {
	pc := startRealCluster(t, nil)
	addr := pc.nodes[pc.leader()].Addr()
	update := func(topic, attrs string) *remoting.RemotingCommand {
		ext := map[string]string{"topic": topic, "defaultTopic": wire.TopicAutoCreate, "readQueueNums": "2",
			"writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
		if attrs != "" {
			ext["attributes"] = attrs
		}
		return pc.call(addr, remoting.RequestUpdateAndCreateTopic, ext, nil)
	}
	stored := func(topic string) map[string]string {
		t.Helper()
		tc, ok := pc.groups[pc.leader()].State().Topic(topic)
		if !ok {
			t.Fatalf("topic %s not stored", topic)
		}
		return tc.Attributes
	}
	ok := func(topic, attrs string, want map[string]string) {
		t.Helper()
		if r := update(topic, attrs); r.Code != remoting.ResponseSuccess {
			t.Fatalf("updateTopic %s -a %q: %d %s", topic, attrs, r.Code, r.Remark)
		}
		if got := stored(topic); !maps.Equal(got, want) {
			t.Fatalf("updateTopic %s -a %q: attributes %v, want %v", topic, attrs, got, want)
		}
	}
	refused := func(topic, attrs, inRemark string) {
		t.Helper()
		r := update(topic, attrs)
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, inRemark) {
			t.Fatalf("updateTopic %s -a %q: %d %q; want SYSTEM_ERROR naming %q", topic, attrs, r.Code, r.Remark, inRemark)
		}
		if _, ok := pc.groups[pc.leader()].State().Topic(topic); ok && strings.HasPrefix(topic, "New") {
			t.Fatalf("updateTopic %s -a %q was refused but created the topic", topic, attrs)
		}
	}

	// What raftmq does anyway is accepted and stored.
	ok("A1", "+message.type=FIFO,+queue.type=SimpleCQ,+cleanup.policy=DELETE",
		map[string]string{"message.type": "FIFO", "queue.type": "SimpleCQ", "cleanup.policy": "DELETE"})
	ok("A1", "", map[string]string{"message.type": "FIFO", "queue.type": "SimpleCQ", "cleanup.policy": "DELETE"})
	ok("A1", "+message.type=NORMAL", map[string]string{"message.type": "NORMAL", "queue.type": "SimpleCQ", "cleanup.policy": "DELETE"})
	ok("A2", "+message.type=DELAY", map[string]string{"message.type": "DELAY"})
	ok("A2", "-message.type,+queue.type=SimpleCQ", map[string]string{"queue.type": "SimpleCQ"})
	ok("A3", "+reserve.time=-1", map[string]string{"reserve.time": "-1"}) // RocketMQ's default: the broker's retention

	// What it does not do is refused, on create and on update.
	refused("NewCompacted", "+cleanup.policy=COMPACTION", "cleanup.policy=COMPACTION")
	refused("NewBatchCQ", "+queue.type=BatchCQ", "queue.type=BatchCQ")
	refused("NewReserve", "+reserve.time=72", "reserve.time")
	refused("NewMixed", "+message.type=MIXED", "message.type=MIXED")
	refused("A1", "+cleanup.policy=COMPACTION", "cleanup.policy")
	// RocketMQ's own rules: known keys and values, + on create, - of an existing key, no changing the queue type.
	refused("NewUnknown", "+retention.ms=5", "retention.ms")
	refused("NewBadValue", "+message.type=ORDERED", "message.type")
	refused("NewDelete", "-message.type", "message.type")
	refused("NewFormat", "message.type=FIFO", "message.type")
	refused("A1", "-cleanup.policy", "cleanup.policy")
	refused("A1", "+queue.type=BatchCQ", "queue.type")
	if got := stored("A1"); !maps.Equal(got, map[string]string{"message.type": "NORMAL", "queue.type": "SimpleCQ", "cleanup.policy": "DELETE"}) {
		t.Fatalf("refused updates changed A1's attributes: %v", got)
	}
}
