package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
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

// TestHeartbeatNotHeldByConsumersThatStopReading: a consumer that joins
// a group is answered at once even when other members of the group stopped
// reading their connections (their write queues are full). The membership
// notice to each of them is dropped instead of waited for; the joining
// consumer's heartbeat must not wait a second per stalled member (its
// client gives up after 3 s and the group's rebalance stalls with it).
func TestHeartbeatNotHeldByConsumersThatStopReading(t *testing.T) {
	const stalledMembers = 4
	pc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.WriteTimeout = 10 * time.Minute // nothing here is closed for not reading
		c.MaxWriteQueueBytes = 64 << 10
	})
	node := pc.nodes[0]
	addr := node.Addr()
	pc.createTopic(addr, "ST", 1)
	heartbeatFrame := func(id string) []byte {
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: id, ConsumerDataSet: []wire.HeartbeatConsumerData{{GroupName: "SG",
			ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "ST", SubString: "*", SubVersion: 1}}}}})
		f, err := remoting.EncodeFrame(remoting.NewRequest(remoting.RequestHeartBeat, nil, hb))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for i := range stalledMembers {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		if _, err := nc.Write(heartbeatFrame(fmt.Sprintf("127.0.0.1@stalled%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "the stalled members registered", func() bool {
		return len(node.clients.consumerIDs("SG")) == stalledMembers
	})
	// Fill the members' write queues: oneway frames that find no room
	// fail at once with an expired context. The queue is full for good
	// once it has refused frames for a while: the socket buffers behind
	// it are full too, and the member never reads.
	full, cancel := context.WithCancel(context.Background())
	cancel()
	g, _ := node.clients.group("SG")
	filler := make([]byte, 32<<10)
	for conn := range g.Channels {
		deadline := time.Now().Add(20 * time.Second)
		var refusedSince time.Time
		for refusedSince.IsZero() || time.Since(refusedSince) < 300*time.Millisecond {
			if time.Now().After(deadline) {
				t.Fatal("a member's write queue never stayed full")
			}
			req := remoting.NewRequest(remoting.RequestNotifyConsumerIDsChanged, &wire.ConsumerGroupRequestHeader{ConsumerGroup: "SG"}, filler)
			switch err := conn.InvokeOneway(full, req); {
			case err == nil:
				refusedSince = time.Time{}
			case refusedSince.IsZero():
				refusedSince = time.Now()
			default:
				runtime.Gosched()
			}
		}
	}

	cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = cli.Close() })
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@joiner", ConsumerDataSet: []wire.HeartbeatConsumerData{{GroupName: "SG",
		ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "ST", SubString: "*", SubVersion: 1}}}}})
	ctx, cancelCall := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelCall()
	start := time.Now()
	r, err := cli.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb))
	took := time.Since(start)
	if err != nil || r.Code != remoting.ResponseSuccess {
		t.Fatalf("joining heartbeat: %v %v", r, err)
	}
	if took > 2*time.Second {
		t.Fatalf("the joining heartbeat took %v with %d members not reading: it waited on their notices", took, stalledMembers)
	}
	if ids := node.clients.consumerIDs("SG"); len(ids) != stalledMembers+1 {
		t.Fatalf("group members %v", ids)
	}
}

// TestHeartbeatSubscribedTopicsChangeNotifies: a heartbeat that adds a
// topic to its group's subscriptions, or drops one, sends the group's
// consumers NOTIFY_CONSUMER_IDS_CHANGED, as RocketMQ's ConsumerManager
// does for a membership change or a subscription change alike: a Java
// push consumer that subscribes to a topic while running only heartbeats
// and waits for that notice to rebalance the topic at once.
func TestHeartbeatSubscribedTopicsChangeNotifies(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "ST1", 1)
	tc.createTopic(addr, "ST2", 1)
	var mu sync.Mutex
	notified := 0
	cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = cli.Close() })
	cli.RegisterProcessor(remoting.RequestNotifyConsumerIDsChanged, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		mu.Lock()
		notified++
		mu.Unlock()
		return nil, nil
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return notified
	}
	heartbeat := func(topics ...string) {
		t.Helper()
		cd := wire.HeartbeatConsumerData{GroupName: "SG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
			ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET"}
		for _, topic := range topics {
			cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, &wire.SubscriptionData{Topic: topic, SubString: "*", SubVersion: 1})
		}
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@subscriber", ConsumerDataSet: []wire.HeartbeatConsumerData{cd}})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if r, err := cli.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb)); err != nil || r.Code != remoting.ResponseSuccess {
			t.Fatalf("heartbeat subscribing %v: %v %v", topics, r, err)
		}
	}
	heartbeat("ST1")
	testutil.WaitFor(t, 5*time.Second, "the new member told", func() bool { return count() >= 1 })
	for _, step := range []struct {
		what   string
		topics []string
	}{{"a topic added", []string{"ST1", "ST2"}}, {"a topic dropped", []string{"ST2"}}} {
		before := count()
		heartbeat(step.topics...)
		testutil.WaitFor(t, 5*time.Second, "the group told of "+step.what, func() bool { return count() > before })
	}
}
