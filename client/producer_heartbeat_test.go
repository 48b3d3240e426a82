package client

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

// TestPlainProducerHeartbeatsLeaderOnly: a producer that only sends
// heartbeats the member it sends to, not the group's followers, as
// RocketMQ's producer-only clients heartbeat brokerId 0 only
// (MQClientInstance.sendHeartbeatToAllBroker): a follower would cost a
// connection per producer for nothing, the producer reaching a new leader
// through its next send, which heartbeats that new connection.
func TestPlainProducerHeartbeatsLeaderOnly(t *testing.T) {
	ns := startNameServer(t)
	members := [2]*fakeBroker{startFakeBroker(t, "b", &requestLog{}), startFakeBroker(t, "b", &requestLog{})}
	var beats [2]atomic.Int32
	for i, fb := range members {
		fb.srv.Register(remoting.RequestHeartBeat, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
			beats[i].Add(1)
			return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
		}, 1, 16)
	}
	members[0].register(t, ns, 0, 1, map[string]int{"T": 1})
	members[1].register(t, ns, 1, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	ctx := context.Background()
	if _, err := p.SendSync(ctx, NewMessage("T", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	p.sendHeartbeats(ctx)
	if beats[0].Load() == 0 || beats[1].Load() != 0 {
		t.Fatalf("heartbeats: leader %d, follower %d; want the leader only", beats[0].Load(), beats[1].Load())
	}
}
