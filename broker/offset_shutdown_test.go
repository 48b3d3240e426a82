package broker

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestShutdownFlushesCommitsAnsweredWhileStopping: Shutdown lets running
// requests answer, so an offset commit still being handled when it began
// is answered success; it must be replicated before Shutdown returns, or
// the leader acknowledged a commit it then forgets (a single-member group,
// or one whose leadership hand-off failed, restarts at the older offset).
func TestShutdownFlushesCommitsAnsweredWhileStopping(t *testing.T) {
	pc, rep := startFakeProc(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	c := pc.nodes[0]
	addr := c.Addr()
	pc.createTopic(addr, "ST", 1)
	// The group connects (its heartbeat creates its config and retry
	// topic); both are deleted again, so its next commit re-creates them:
	// the retry topic's creation is where the commit is held below.
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@sd", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "SDG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "ST", SubString: "*", SubVersion: 1}},
	}}})
	if r := pc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "SDG"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group config: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": wire.RetryGroupTopicPrefix + "SDG"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete retry topic: %d %s", r.Code, r.Remark)
	}
	gate := make(chan struct{})
	rep.mu.Lock()
	rep.topicGate = gate
	rep.mu.Unlock()
	writes := rep.topicWrites.Load()

	type answer struct {
		r   *remoting.RemotingCommand
		err error
	}
	committed := make(chan answer, 1)
	go func() {
		req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: "SDG", Topic: "ST", QueueID: 0, CommitOffset: 7}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := pc.client.InvokeSync(ctx, addr, req)
		committed <- answer{r, err}
	}()
	testutil.WaitFor(t, 10*time.Second, "the commit handled (creating the retry topic)", func() bool { return rep.topicWrites.Load() > writes })

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- c.Shutdown(ctx)
	}()
	// Once the listener is closed, Shutdown is waiting for the running
	// requests to answer.
	testutil.WaitFor(t, 10*time.Second, "the listener closed", func() bool {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	close(gate)
	a := <-committed
	if a.err != nil || a.r.Code != remoting.ResponseSuccess {
		t.Fatalf("the commit handled while the broker stopped: %v %+v; want success", a.err, a.r)
	}
	if err := <-stopped; err != nil {
		t.Logf("shutdown: %v", err)
	}
	if off, ok := rep.State().ConsumerOffset("SDG", "ST", 0); !ok || off != 7 {
		t.Fatalf("a commit answered success during Shutdown was not replicated: SDG's offset on ST/0 is %d (found %v); want 7", off, ok)
	}
}
