package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestResetOffsetDoesNotWaitForConsumers: RocketMQ's clients (Java, and
// the official Go client) never answer RESET_CONSUMER_CLIENT_OFFSET:
// RocketMQ's broker sends it oneway (Broker2Client.resetOffset). A broker
// that waits for each consumer's answer holds INVOKE_BROKER_TO_RESET_OFFSET
// for its timeout per consumer, so with a few of them online mqadmin's
// resetOffsetByTime (5 s timeout) fails although the offsets were reset.
// The reset must answer promptly with three official consumers online,
// and they must still start over from the new offsets.
func TestResetOffsetDoesNotWaitForConsumers(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startRealCluster(t, nil)
	const topic, group = "RN", "CG_RN"
	p := officialProducer(t, pc.nsAddr)
	for i := range 8 {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("m%d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	seen := newBodySet()
	var redelivered = newBodySet()
	resetDone := make(chan struct{})
	for range 3 {
		officialPushConsumer(t, pc.nsAddr, group, topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			select {
			case <-resetDone:
				redelivered.add(msgs...)
			default:
				seen.add(msgs...)
			}
			return consumer.ConsumeSuccess, nil
		})
	}
	testutil.WaitFor(t, 30*time.Second, "8 messages consumed", func() bool { return seen.len() == 8 })
	leader := pc.nodes[pc.leader()].Addr()
	testutil.WaitFor(t, 30*time.Second, "3 consumers connected to the leader", func() bool {
		r := pc.call(leader, remoting.RequestGetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
		var cc wire.ConsumerConnection
		return r.Code == remoting.ResponseSuccess && json.Unmarshal(r.Body, &cc) == nil && len(cc.ConnectionSet) == 3
	})
	close(resetDone)
	start := time.Now()
	r := pc.call(leader, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": topic, "group": group, "timestamp": "0", "isForce": "true"}, nil)
	took := time.Since(start)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("reset: %d %s", r.Code, r.Remark)
	}
	if took > 2*time.Second {
		t.Fatalf("reset with 3 official consumers online answered after %v; want it at once (mqadmin gives up after 5 s)", took)
	}
	testutil.WaitFor(t, 30*time.Second, "the 8 messages consumed again after the reset", func() bool { return redelivered.len() == 8 })
}
