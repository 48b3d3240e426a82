package broker

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestHeartbeatRegistrationsPerConnection: a HEART_BEAT naming a live
// client's ID from another connection adds a registration of that
// connection and leaves the client's own in place, as RocketMQ's
// channel-keyed tables do. When the stranger's connection closes, the
// client is still a member of its group (GET_CONSUMER_LIST_BY_GROUP lists
// it, once, throughout) and a membership change is still told to it on
// its own connection. A client reconnecting under its ID is listed once
// and its old, closed connection's registration goes.
func TestHeartbeatRegistrationsPerConnection(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "HC", 1)
	const id = "10.0.0.7@victim"
	newClient := func(notified *atomic.Int32) *remoting.Client {
		cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
		t.Cleanup(func() { _ = cli.Close() })
		if notified != nil {
			cli.RegisterProcessor(remoting.RequestNotifyConsumerIDsChanged, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
				notified.Add(1)
				return nil, nil
			})
		}
		return cli
	}
	heartbeat := func(cli *remoting.Client, clientID string) {
		t.Helper()
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: clientID,
			ConsumerDataSet: []wire.HeartbeatConsumerData{{GroupName: "HG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
				ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "HC", SubString: "*", SubVersion: 1}}}}})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if r, err := cli.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb)); err != nil || r.Code != remoting.ResponseSuccess {
			t.Fatalf("heartbeat of %s: %v %v", clientID, r, err)
		}
	}
	members := func() []string {
		t.Helper()
		r := tc.call(addr, remoting.RequestGetConsumerListByGroup, map[string]string{"consumerGroup": "HG"}, nil)
		if r.Code != remoting.ResponseSuccess {
			return nil
		}
		var body wire.ConsumerListBody
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		return body.ConsumerIDList
	}

	var victimNotified, strangerNotified atomic.Int32
	victim := newClient(&victimNotified)
	heartbeat(victim, id)
	stranger := newClient(&strangerNotified)
	heartbeat(stranger, id)
	if got := members(); !slices.Equal(got, []string{id}) {
		t.Fatalf("after the stranger's heartbeat the group lists %v, want [%s] once", got, id)
	}

	// A third client joins: the change is told on the victim's connection.
	before := victimNotified.Load()
	heartbeat(newClient(nil), "10.0.0.8@third")
	testutil.WaitFor(t, 5*time.Second, "the victim told of the third client", func() bool { return victimNotified.Load() > before })

	_ = stranger.Close()
	testutil.WaitFor(t, 5*time.Second, "the broker saw the stranger's connection close", func() bool {
		g, _ := tc.nodes[0].clients.group("HG")
		return len(g.Channels) == 2
	})
	if got := members(); !slices.Equal(got, []string{id, "10.0.0.8@third"}) {
		t.Fatalf("after the stranger's connection closed the group lists %v; the victim still heartbeats", got)
	}

	// The victim reconnects on a new connection under its ID.
	_ = victim.Close()
	again := newClient(nil)
	heartbeat(again, id)
	testutil.WaitFor(t, 5*time.Second, "the victim's old connection's registration gone", func() bool {
		g, _ := tc.nodes[0].clients.group("HG")
		return len(g.Channels) == 2
	})
	if got := members(); !slices.Equal(got, []string{id, "10.0.0.8@third"}) {
		t.Fatalf("after the reconnect the group lists %v", got)
	}
}

// TestHeartbeatReadBeforeItsConnectionClosed: a heartbeat read from a
// connection that closes before a worker processes it (the consumer
// shutting down with a heartbeat in flight) registers nothing: the close's
// removal has run, and the consumer would otherwise stay a member of its
// group, assigned queues nobody consumes, until it expired.
func TestHeartbeatReadBeforeItsConnectionClosed(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	node := tc.nodes[0]
	addr := node.Addr()
	tc.createTopic(addr, "HL", 1)
	cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = cli.Close() })
	cd := wire.HeartbeatConsumerData{GroupName: "HLG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
		ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "HL", SubString: "*", SubVersion: 1}}}
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@leaving", ConsumerDataSet: []wire.HeartbeatConsumerData{cd},
		ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "HLP"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := cli.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb)); err != nil || r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %v %v", r, err)
	}
	g, _ := node.clients.group("HLG")
	var conn *remoting.Conn
	for c := range g.Channels {
		conn = c
	}
	_ = cli.Close()
	testutil.WaitFor(t, 5*time.Second, "the broker saw the connection close", func() bool { return !node.clients.hasGroup("HLG") })

	// The same heartbeat, processed now.
	req := remoting.NewRequest(remoting.RequestHeartBeat, nil, hb)
	if r, err := node.processHeartbeat(context.Background(), conn, req); err != nil || r.Code != remoting.ResponseSuccess {
		t.Fatalf("late heartbeat: %v %v", r, err)
	}
	if ids := node.clients.consumerIDs("HLG"); len(ids) != 0 {
		t.Fatalf("a heartbeat processed after its connection closed made %v members of the group", ids)
	}
	if _, ok := node.clients.producerChannels()["HLP"]; ok {
		t.Fatal("a heartbeat processed after its connection closed registered its producer group")
	}
}
