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

// TestTransferCommitsCoalescedOffsets: a commit the leader answered from its
// coalescing table is replicated before an admin transfer hands leadership
// away; a follower drops what it had coalesced, so without that the new
// leader would answer the older offset and the group re-consume.
func TestTransferCommitsCoalescedOffsets(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) {
		withProdRaftTimings(c)
		c.ConsumerOffsetCommitCoalescer = time.Hour
	})
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TT", 1)
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@tt", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "TTG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "TT", SubString: "*", SubVersion: 1}},
	}}})
	if r := pc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	commit := map[string]string{"consumerGroup": "TTG", "topic": "TT", "queueId": "0", "commitOffset": "7"}
	if r := pc.call(addr, remoting.RequestUpdateConsumerOffset, commit, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	target := (l + 1) % 3
	if r := pc.call(addr, remoting.RequestLeadershipTransfer, map[string]string{"targetId": pc.groups[target].SelfID()}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("transfer: %d %s", r.Code, r.Remark)
	}
	testutil.WaitFor(t, 10*time.Second, "the target leads", func() bool { return pc.groups[target].IsLeader() })
	query := map[string]string{"consumerGroup": "TTG", "topic": "TT", "queueId": "0"}
	r := pc.call(pc.nodes[target].Addr(), remoting.RequestQueryConsumerOffset, query, nil)
	if r.Code != remoting.ResponseSuccess || r.ExtFields["offset"] != "7" {
		t.Fatalf("the new leader answers TTG's offset on TT/0 with %d %q %v; want 7", r.Code, r.Remark, r.ExtFields)
	}
}
