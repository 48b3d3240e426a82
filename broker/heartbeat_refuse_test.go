package broker

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestHeartbeatRefusesOnlyTheGroupWithTooLongASubscription: a heartbeat
// in which one consumer group subscribes with an expression longer than
// maxPullSubscriptionLength is answered SUBSCRIPTION_PARSE_FAILED naming
// the group and the bound, and that group alone is left out: the
// heartbeat's other consumer groups and its producer group are
// registered (RocketMQ registers every part of a heartbeat). The
// client's earlier registration in the refused group goes, so the group
// does not assign it queues its pulls cannot read.
func TestHeartbeatRefusesOnlyTheGroupWithTooLongASubscription(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "HR", 1)
	const id = "127.0.0.1@refused"
	consumer := func(group, expr string) wire.HeartbeatConsumerData {
		return wire.HeartbeatConsumerData{GroupName: group, ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
			ConsumeFromWhere:    "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "HR", SubString: expr, ExpressionType: wire.ExpressionTypeTag, SubVersion: 1}}}
	}
	heartbeat := func(cds ...wire.HeartbeatConsumerData) *remoting.RemotingCommand {
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: id, ConsumerDataSet: cds,
			ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "HRP"}}})
		return pc.call(addr, remoting.RequestHeartBeat, nil, hb)
	}
	if r := heartbeat(consumer("HRA", "*")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	clients := pc.nodes[0].clients
	if ids := clients.consumerIDs("HRA"); !slices.Equal(ids, []string{id}) {
		t.Fatalf("group HRA lists %v", ids)
	}

	long := strings.Repeat("t || ", maxPullSubscriptionLength/5+1) + "*"
	r := heartbeat(consumer("HRA", long), consumer("HRB", "*"))
	if r.Code != remoting.ResponseSubscriptionParseFailed || !strings.Contains(r.Remark, "HRA") ||
		!strings.Contains(r.Remark, strconv.Itoa(maxPullSubscriptionLength)) {
		t.Fatalf("heartbeat with a %d-byte subscription of HRA: code %d remark %q", len(long), r.Code, r.Remark)
	}
	if ids := clients.consumerIDs("HRB"); !slices.Equal(ids, []string{id}) {
		t.Fatalf("group HRB, subscribed within the bound in the refused heartbeat, lists %v", ids)
	}
	if _, ok := clients.producerChannels()["HRP"]; !ok {
		t.Fatal("the refused heartbeat's producer group HRP is not registered")
	}
	if ids := clients.consumerIDs("HRA"); len(ids) != 0 {
		t.Fatalf("group HRA still lists %v after the client's heartbeat was refused for it", ids)
	}
}

// TestHeartbeatGroupsPerConnectionBounded: one connection's heartbeats
// keep it registered in at most maxClientGroupsPerConnection consumer and
// producer groups. A group past it is left out and the heartbeat answered
// SYSTEM_ERROR naming the key, while the groups it is registered in are
// refreshed; one it leaves makes room; its close frees every count. A
// client ID past 255 bytes is refused: every entry keeps one.
func TestHeartbeatGroupsPerConnectionBounded(t *testing.T) {
	pc, _ := startFakeProc(t, func(c *BrokerConfig) { c.MaxClientGroupsPerConnection = 3 })
	node := pc.nodes[0]
	addr := node.Addr()
	pc.createTopic(addr, "HG", 1)
	cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = cli.Close() })
	const id = "127.0.0.1@many"
	invoke := func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := cli.InvokeSync(ctx, addr, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	heartbeat := func(clientID string, consumers []string, producers ...string) *remoting.RemotingCommand {
		t.Helper()
		hb := wire.HeartbeatData{ClientID: clientID}
		for _, g := range consumers {
			hb.ConsumerDataSet = append(hb.ConsumerDataSet, wire.HeartbeatConsumerData{GroupName: g, ConsumeType: wire.ConsumeTypePush,
				MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
				SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "HG", SubString: "*", SubVersion: 1}}})
		}
		for _, g := range producers {
			hb.ProducerDataSet = append(hb.ProducerDataSet, wire.HeartbeatProducerData{GroupName: g})
		}
		body, _ := json.Marshal(hb)
		return invoke(remoting.NewRequest(remoting.RequestHeartBeat, nil, body))
	}
	registered := func(consumers []string, producers ...string) {
		t.Helper()
		for _, g := range consumers {
			if ids := node.clients.consumerIDs(g); !slices.Equal(ids, []string{id}) {
				t.Fatalf("consumer group %s lists %v", g, ids)
			}
		}
		for _, g := range producers {
			if _, ok := node.clients.producerChannels()[g]; !ok {
				t.Fatalf("producer group %s not registered", g)
			}
		}
	}
	for range 2 { // the groups it holds are refreshed, the next still refused
		r := heartbeat(id, []string{"CA", "CB"}, "PA", "PB")
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "maxClientGroupsPerConnection=3") || !strings.Contains(r.Remark, "PB") {
			t.Fatalf("a fourth group: code %d remark %q", r.Code, r.Remark)
		}
		registered([]string{"CA", "CB"}, "PA")
		if _, ok := node.clients.producerChannels()["PB"]; ok {
			t.Fatal("producer group PB registered past maxClientGroupsPerConnection=3")
		}
	}
	unregister := remoting.NewRequest(remoting.RequestUnregisterClient, &wire.UnregisterClientRequestHeader{ClientID: id, ConsumerGroup: "CA"}, nil)
	if r := invoke(unregister); r.Code != remoting.ResponseSuccess {
		t.Fatalf("unregister: %d %s", r.Code, r.Remark)
	}
	if r := heartbeat(id, []string{"CB", "CC"}, "PA"); r.Code != remoting.ResponseSuccess {
		t.Fatalf("after leaving CA, a heartbeat of CB, CC, PA: code %d remark %q", r.Code, r.Remark)
	}
	registered([]string{"CB", "CC"}, "PA")

	if r := heartbeat(strings.Repeat("c", 256), nil, "PA"); r.Code != remoting.ResponseInvalidParameter || !strings.Contains(r.Remark, "255") {
		t.Fatalf("a 256-byte client ID: code %d remark %q", r.Code, r.Remark)
	}

	_ = cli.Close()
	testutil.WaitFor(t, 5*time.Second, "the connection's entries gone with its close", func() bool {
		node.clients.mu.Lock()
		defer node.clients.mu.Unlock()
		return len(node.clients.entries) == 0 && len(node.clients.consumers) == 0 && len(node.clients.producers) == 0
	})
}

// TestHeartbeatBoundsAGroupsSubscriptions: one heartbeat registers at most
// maxGroupSubscriptions subscriptions of at most maxGroupSubscriptionBytes
// for one consumer group. A group past either is answered
// SUBSCRIPTION_PARSE_FAILED naming it and the bound and left out (its
// earlier registration of the connection dropped), while the heartbeat's
// other groups and its producer group are registered; a group at the
// bound is registered whole.
func TestHeartbeatBoundsAGroupsSubscriptions(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	clients := pc.nodes[0].clients
	const id = "127.0.0.1@subscriber"
	consumer := func(group string, subs int, expr string) wire.HeartbeatConsumerData {
		cd := wire.HeartbeatConsumerData{GroupName: group, ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
			ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET"}
		for i := range subs {
			cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, &wire.SubscriptionData{Topic: "HS" + strconv.Itoa(i),
				SubString: expr, ExpressionType: wire.ExpressionTypeTag, SubVersion: 1})
		}
		return cd
	}
	heartbeat := func(cds ...wire.HeartbeatConsumerData) *remoting.RemotingCommand {
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: id, ConsumerDataSet: cds,
			ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "HSP"}}})
		return pc.call(addr, remoting.RequestHeartBeat, nil, hb)
	}
	subscriptions := func(group string) int {
		g, ok := clients.group(group)
		if !ok {
			return 0
		}
		return len(g.Subscriptions)
	}

	if r := heartbeat(consumer("HSA", maxGroupSubscriptions, "*")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat with %d subscriptions: %d %s", maxGroupSubscriptions, r.Code, r.Remark)
	}
	if n := subscriptions("HSA"); n != maxGroupSubscriptions {
		t.Fatalf("group HSA holds %d subscriptions, want %d", n, maxGroupSubscriptions)
	}

	for _, c := range []struct {
		what  string
		cd    wire.HeartbeatConsumerData
		bound int
	}{
		{"one subscription too many", consumer("HSA", maxGroupSubscriptions+1, "*"), maxGroupSubscriptions},
		{"20 subscriptions of 15 KiB", consumer("HSA", 20, strings.Repeat("x", 15<<10)), maxGroupSubscriptionBytes},
		// Each tag is kept as a string of its own: empty ones, 3 bytes of
		// JSON each, hold 16 bytes apiece.
		{"2 subscriptions of 16384 empty tags", emptyTags(consumer("HSA", 2, "*"), maxPullSubscriptionLength), maxGroupSubscriptionBytes},
	} {
		r := heartbeat(c.cd, consumer("HSB", 1, "*"))
		if r.Code != remoting.ResponseSubscriptionParseFailed || !strings.Contains(r.Remark, "HSA") ||
			!strings.Contains(r.Remark, strconv.Itoa(c.bound)) {
			t.Fatalf("%s: code %d remark %q", c.what, r.Code, r.Remark)
		}
		if ids := clients.consumerIDs("HSA"); len(ids) != 0 || subscriptions("HSA") != 0 {
			t.Fatalf("%s: group HSA still lists %v with %d subscriptions", c.what, ids, subscriptions("HSA"))
		}
		if ids := clients.consumerIDs("HSB"); !slices.Equal(ids, []string{id}) {
			t.Fatalf("%s: group HSB lists %v", c.what, ids)
		}
		if _, ok := clients.producerChannels()["HSP"]; !ok {
			t.Fatalf("%s: producer group HSP not registered", c.what)
		}
	}
}

// emptyTags gives each of cd's subscriptions n empty tags.
func emptyTags(cd wire.HeartbeatConsumerData, n int) wire.HeartbeatConsumerData {
	for _, sd := range cd.SubscriptionDataSet {
		sd.TagsSet = make([]string, n)
	}
	return cd
}
