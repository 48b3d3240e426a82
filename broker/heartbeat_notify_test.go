package broker

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestNotifyConsumerIdsChangedEnable: a group whose
// notifyConsumerIdsChangedEnable is false (mqadmin updateSubGroup -a
// false) gets no NOTIFY_CONSUMER_IDS_CHANGED when its membership changes
// (RocketMQ's DefaultConsumerIdsChangeListener); its consumers rebalance
// on their own timer. A group with the default still gets it.
func TestNotifyConsumerIdsChangedEnable(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "NT", 1)
	sg := wire.DefaultSubscriptionGroupConfig("QUIET")
	sg.NotifyConsumerIdsChangedEnable = false
	body, _ := json.Marshal(sg)
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup -a false: %d %s", r.Code, r.Remark)
	}

	var mu sync.Mutex
	notified := map[string]int{}
	first := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = first.Close() })
	first.RegisterProcessor(remoting.RequestNotifyConsumerIDsChanged, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		var h wire.ConsumerGroupRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			t.Errorf("notify header: %v", err)
		}
		mu.Lock()
		notified[h.ConsumerGroup]++
		mu.Unlock()
		return nil, nil
	})
	second := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = second.Close() })
	heartbeat := func(cli *remoting.Client, id string) {
		t.Helper()
		var cds []wire.HeartbeatConsumerData
		for _, g := range []string{"QUIET", "LOUD"} { // QUIET's notification, if any, goes first
			cds = append(cds, wire.HeartbeatConsumerData{GroupName: g, ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
				ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "NT", SubString: "*", SubVersion: 1}}})
		}
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: id, ConsumerDataSet: cds})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if r, err := cli.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb)); err != nil || r.Code != remoting.ResponseSuccess {
			t.Fatalf("heartbeat of %s: %v %v", id, r, err)
		}
	}
	heartbeat(first, "127.0.0.1@first")
	heartbeat(second, "127.0.0.1@second")
	testutil.WaitFor(t, 5*time.Second, "LOUD's first consumer told of the second", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return notified["LOUD"] > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if notified["QUIET"] != 0 {
		t.Fatalf("group QUIET (notifyConsumerIdsChangedEnable=false) was notified %d times", notified["QUIET"])
	}
}

// TestUnregisterClientOnlyItsOwnConnection: UNREGISTER_CLIENT removes the
// registrations of the connection it comes on, as RocketMQ's channel-keyed
// tables do. Another connection naming a registered client's ID (a
// stranger, or a client's earlier incarnation) leaves that client in its
// consumer and producer groups; the client's own request removes it.
func TestUnregisterClientOnlyItsOwnConnection(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "UT", 1)
	const id = "10.0.0.7@victim"
	invoke := func(cli *remoting.Client, code int16, ext map[string]string, body []byte) *remoting.RemotingCommand {
		t.Helper()
		req := remoting.NewRequest(code, nil, body)
		for k, v := range ext {
			req.ExtFields[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := cli.InvokeSync(ctx, addr, req)
		if err != nil {
			t.Fatalf("code %d: %v", code, err)
		}
		return r
	}
	victim := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = victim.Close() })
	other := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = other.Close() })
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: id,
		ConsumerDataSet: []wire.HeartbeatConsumerData{{GroupName: "UG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
			ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "UT", SubString: "*", SubVersion: 1}}}},
		ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "UP"}}})
	if r := invoke(victim, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	registered := func() (consumer, producer bool) {
		t.Helper()
		r := invoke(other, remoting.RequestGetConsumerListByGroup, map[string]string{"consumerGroup": "UG"}, nil)
		consumer = r.Code == remoting.ResponseSuccess && strings.Contains(string(r.Body), id)
		r = invoke(other, remoting.RequestGetProducerConnectionList, map[string]string{"producerGroup": "UP"}, nil)
		producer = r.Code == remoting.ResponseSuccess && strings.Contains(string(r.Body), id)
		return consumer, producer
	}
	if c, p := registered(); !c || !p {
		t.Fatalf("after the heartbeat: consumer %v, producer %v registered", c, p)
	}
	unregister := map[string]string{"clientID": id, "consumerGroup": "UG", "producerGroup": "UP"}
	if r := invoke(other, remoting.RequestUnregisterClient, unregister, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("unregister from another connection: %d %s", r.Code, r.Remark)
	}
	if c, p := registered(); !c || !p {
		t.Fatalf("another connection's UNREGISTER_CLIENT dropped the client: consumer %v, producer %v still registered", c, p)
	}
	if r := invoke(victim, remoting.RequestUnregisterClient, unregister, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("unregister: %d %s", r.Code, r.Remark)
	}
	if c, p := registered(); c || p {
		t.Fatalf("the client's own UNREGISTER_CLIENT: consumer %v, producer %v still registered", c, p)
	}
}
