package broker

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestResetNoticeCarriesNoAdminSignature: the RESET_CONSUMER_CLIENT_OFFSET
// notice a reset sends the group's consumers carries the reset's header
// only, as RocketMQ's Broker2Client builds it. It carried a copy of the
// admin's signed request fields, AccessKey and Signature included, and a
// signature covers the fields' values and the body but not the request
// code: any consumer of the group could send those fields back as an
// admin's DELETE_TOPIC_IN_BROKER and delete the topic with its messages.
func TestResetNoticeCarriesNoAdminSignature(t *testing.T) {
	pc := startACLCluster(t)
	leader := pc.nodes[pc.leader()].Addr()
	pc.createTopic(leader, "AclTopic", 1)
	if r := pc.call(leader, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"AclGroup"}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}

	// A consumer of AclGroup with the application account (SUB on the
	// group and the topic, no admin rights).
	var mu sync.Mutex
	var notice map[string]string
	cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = cli.Close() })
	cli.RegisterProcessor(remoting.RequestResetConsumerClientOffset, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		var h wire.ResetOffsetRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			t.Errorf("notice header: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		notice = maps.Clone(req.ExtFields)
		return nil, nil
	})
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@app", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "AclGroup", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "AclTopic", SubString: "*", SubVersion: 1}},
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Signed by hand: a signing hook would also sign the notice this
	// client receives.
	hbReq := remoting.NewRequest(remoting.RequestHeartBeat, nil, hb)
	remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}.Sign(hbReq)
	if r, err := cli.InvokeSync(ctx, leader, hbReq); err != nil || r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %v %+v", err, r)
	}

	// The admin resets the group (pc's client signs as the admin).
	if r := pc.call(leader, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "AclTopic", "group": "AclGroup", "timestamp": "-1", "isForce": "true"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("reset: %d %s", r.Code, r.Remark)
	}
	testutil.WaitFor(t, 10*time.Second, "the reset notice", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return notice != nil
	})
	mu.Lock()
	got := notice
	mu.Unlock()
	for _, k := range []string{remoting.ExtAccessKey, remoting.ExtSignature, remoting.ExtSecurityToken} {
		if _, ok := got[k]; ok {
			t.Errorf("the reset notice to a consumer carries the admin's %s: %v", k, got)
		}
	}
	if got["topic"] != "AclTopic" || got["group"] != "AclGroup" || got["timestamp"] != "-1" {
		t.Errorf("the reset notice's header: %v; want topic AclTopic, group AclGroup, timestamp -1", got)
	}

	// Sent back unsigned by the consumer's own account, the notice's
	// fields do not make an admin request.
	raw := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = raw.Close() })
	replay := remoting.NewRequest(remoting.RequestDeleteTopicInBroker, nil, nil)
	maps.Copy(replay.ExtFields, got)
	r, err := raw.InvokeSync(ctx, leader, replay)
	if err != nil {
		t.Fatal(err)
	}
	if r.Code == remoting.ResponseSuccess {
		t.Errorf("DELETE_TOPIC_IN_BROKER with the reset notice's fields: answered success")
	}
	if r := pc.call(leader, remoting.RequestGetTopicConfig, map[string]string{"topic": "AclTopic"}, nil); r.Code != remoting.ResponseSuccess {
		t.Errorf("AclTopic after replaying the notice's fields: %d %s; want it still there", r.Code, r.Remark)
	}
}
