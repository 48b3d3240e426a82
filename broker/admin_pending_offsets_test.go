package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// TestConsumeStatsSeePendingCommits: an acknowledged offset commit waits
// in the leader's coalescer until its next flush, and every read of that
// offset (QUERY_CONSUMER_OFFSET, consumerProgress) already answers it. The
// reads that list a group's topics must see it too: consumerProgress
// without -t (GET_CONSUME_STATS) and brokerConsumeStats
// (GET_BROKER_CONSUME_STATS) left the group out until the flush.
func TestConsumeStatsSeePendingCommits(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "PT", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("PT", 0, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"PG"}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
		"consumerGroup": "PG", "topic": "PT", "queueId": "0", "commitOffset": "1"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	q := tc.call(addr, remoting.RequestQueryConsumerOffset, map[string]string{"consumerGroup": "PG", "topic": "PT", "queueId": "0"}, nil)
	if q.Code != remoting.ResponseSuccess || q.ExtFields["offset"] != strconv.Itoa(1) {
		t.Fatalf("query offset: %d %v", q.Code, q.ExtFields)
	}
	cs := tc.call(addr, remoting.RequestGetConsumeStats, map[string]string{"consumerGroup": "PG"}, nil)
	if cs.Code != remoting.ResponseSuccess || !strings.Contains(string(cs.Body), `"topic":"PT"`) {
		t.Errorf("GET_CONSUME_STATS of PG without a topic: %d %s; want PT's queue", cs.Code, cs.Body)
	}
	bs := tc.call(addr, remoting.RequestGetBrokerConsumeStats, map[string]string{"isOrder": "false", "timeoutMillis": "3000"}, nil)
	if bs.Code != remoting.ResponseSuccess || !strings.Contains(string(bs.Body), `"PG"`) {
		t.Errorf("GET_BROKER_CONSUME_STATS: %d %s; want group PG", bs.Code, bs.Body)
	}
}
