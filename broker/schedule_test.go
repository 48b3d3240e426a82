package broker

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestZeroDelayLevelDeliversAtOnce: a "0s" level in messageDelayLevel is
// accepted, as RocketMQ's parseDelayLevel does; a message sent at that
// level still goes through SCHEDULE_TOPIC_XXXX and the schedule service
// re-puts it to its real topic on its next round, without the DELAY
// property (ScheduleMessageService: store time + 0 is due at once).
func TestZeroDelayLevelDeliversAtOnce(t *testing.T) {
	tc, rep := startFakeProc(t, func(c *BrokerConfig) { c.MessageDelayLevel = "0s 1h" })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "TZ", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("TZ", 0, "DELAY\x011\x02"), []byte("zero")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send at level 1 (0s): %d %s", r.Code, r.Remark)
	}
	if n := rep.st.GetMaxOffsetInQueue(wire.TopicSchedule, 0); n != 1 {
		t.Fatalf("schedule queue 0 holds %d messages, want the one sent at level 1", n)
	}
	var got *store.Message
	testutil.WaitFor(t, 10*time.Second, "the 0s-level message in TZ", func() bool {
		res, err := rep.st.GetMessage("", "TZ", 0, 0, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != store.Found {
			return false
		}
		if got, _, err = wire.DecodeMessage(res.Messages[0], true); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if string(got.Body) != "zero" || got.Properties[wire.PropertyDelayTimeLevel] != "" || got.Properties[wire.PropertyRealTopic] != "" {
		t.Fatalf("delivered %q with properties %v", got.Body, got.Properties)
	}
}
