package broker

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestACLLockBatchNeedsSub: LOCK_BATCH_MQ and UNLOCK_BATCH_MQ need SUB on
// the body's consumer group and on each queue's topic, as in RocketMQ 5
// (a retry topic's queues are not checked). A refused lock takes no queue
// and a refused unlock releases none.
func TestACLLockBatchNeedsSub(t *testing.T) {
	pc := startACLCluster(t)
	leader := pc.nodes[pc.leader()]
	pc.createTopic(leader.Addr(), "Forbidden", 1)
	pc.createTopic(leader.Addr(), "AclTopic", 1)
	// A lock names a group the broker knows.
	for _, g := range []string{"AclGroup", "OtherGroup"} {
		b, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig(g))
		if resp := pc.call(leader.Addr(), remoting.RequestUpdateAndCreateSubscriptionGroup, nil, b); resp.Code != remoting.ResponseSuccess {
			t.Fatalf("create group %s: %d %s", g, resp.Code, resp.Remark)
		}
	}
	brokerName := pc.cfgs[0].BrokerName
	mq := func(topic string) wire.MessageQueue {
		return wire.MessageQueue{Topic: topic, BrokerName: brokerName, QueueID: 0}
	}
	body := func(group, client string, mqs ...wire.MessageQueue) []byte {
		b, err := json.Marshal(wire.LockBatchBody{ConsumerGroup: group, ClientID: client, MQSet: mqs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	app := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer app.Close()
	app.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}))
	asApp := func(code int16, b []byte) *remoting.RemotingCommand {
		resp, err := app.InvokeSync(context.Background(), leader.Addr(), remoting.NewRequest(code, nil, b))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// lockedByAdmin locks as the admin account for clientID and returns
	// the queues it got.
	lockedByAdmin := func(group, clientID string, q wire.MessageQueue) []wire.MessageQueue {
		resp := pc.call(leader.Addr(), remoting.RequestLockBatchMQ, nil, body(group, clientID, q))
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("admin lock %s/%s: %d %s", group, q.Topic, resp.Code, resp.Remark)
		}
		var r wire.LockBatchResponse
		if err := json.Unmarshal(resp.Body, &r); err != nil {
			t.Fatal(err)
		}
		return r.LockOKMQSet
	}

	for _, c := range []struct {
		name, group, topic, want string
	}{
		{"a topic without SUB", "AclGroup", "Forbidden", "no SUB permission on topic:Forbidden"},
		{"a group without SUB", "OtherGroup", "AclTopic", "no SUB permission on group:OtherGroup"},
	} {
		resp := asApp(remoting.RequestLockBatchMQ, body(c.group, "app@1", mq(c.topic)))
		wantNoPermission(t, "lock "+c.name, remoting.ResponseError(leader.Addr(), resp), c.want)
		// Had the refused lock been taken, app@1 would hold the queue now.
		if got := lockedByAdmin(c.group, "admin@1", mq(c.topic)); len(got) != 1 {
			t.Fatalf("lock of %s was refused but the queue is held: admin got %v", c.name, got)
		}
	}

	// admin@1 holds AclGroup's Forbidden queue (above): the account may not
	// release it, and it stays held.
	resp := asApp(remoting.RequestUnlockBatchMQ, body("AclGroup", "admin@1", mq("Forbidden")))
	wantNoPermission(t, "unlock a topic without SUB", remoting.ResponseError(leader.Addr(), resp), "no SUB permission on topic:Forbidden")
	resp = asApp(remoting.RequestUnlockBatchMQ, body("OtherGroup", "admin@1", mq("AclTopic")))
	wantNoPermission(t, "unlock a group without SUB", remoting.ResponseError(leader.Addr(), resp), "no SUB permission on group:OtherGroup")
	if got := lockedByAdmin("AclGroup", "admin@2", mq("Forbidden")); len(got) != 0 {
		t.Fatalf("a refused unlock released AclGroup's Forbidden queue: admin@2 got %v", got)
	}
	if got := lockedByAdmin("OtherGroup", "admin@2", mq("AclTopic")); len(got) != 0 {
		t.Fatalf("a refused unlock released OtherGroup's AclTopic queue: admin@2 got %v", got)
	}

	// What the account may read it locks and unlocks; a retry topic's
	// queue is not checked as a topic.
	own := []wire.MessageQueue{mq("AclTopic"), mq(wire.RetryGroupTopicPrefix + "OtherGroup")}
	resp = asApp(remoting.RequestLockBatchMQ, body("AclGroup", "app@1", own...))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("lock AclGroup's queues: %d %s", resp.Code, resp.Remark)
	}
	var r wire.LockBatchResponse
	if err := json.Unmarshal(resp.Body, &r); err != nil || !slices.Contains(r.LockOKMQSet, mq("AclTopic")) {
		t.Fatalf("lock AclGroup's queues: got %s (%v)", resp.Body, err)
	}
	if resp := asApp(remoting.RequestUnlockBatchMQ, body("AclGroup", "app@1", own...)); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("unlock AclGroup's queues: %d %s", resp.Code, resp.Remark)
	}
	if got := lockedByAdmin("AclGroup", "admin@3", mq("AclTopic")); len(got) != 1 {
		t.Fatalf("the account's unlock did not release AclTopic: admin@3 got %v", got)
	}
}

// TestACLBrokerWideReadsNeedAdmin: the requests RocketMQ 5 checks against
// the cluster resource (broker statistics, every producer's connections)
// and GET_BROKER_CLUSTER_ACL_INFO, which its ACL 1.0 lists among the
// admin codes, need an admin account.
func TestACLBrokerWideReadsNeedAdmin(t *testing.T) {
	pc := startACLCluster(t)
	leader := pc.nodes[pc.leader()]
	app := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer app.Close()
	app.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}))
	for _, c := range []struct {
		name string
		code int16
		ext  map[string]string
	}{
		{"GET_BROKER_CLUSTER_ACL_INFO", remoting.RequestGetBrokerACLInfo, nil},
		{"VIEW_BROKER_STATS_DATA", remoting.RequestViewBrokerStatsData, map[string]string{"statsName": "TOPIC_PUT_NUMS", "statsKey": "AclTopic"}},
		{"GET_BROKER_CONSUME_STATS", remoting.RequestGetBrokerConsumeStats, map[string]string{"isOrder": "false"}},
		{"GET_PRODUCER_CONNECTION_LIST", remoting.RequestGetProducerConnectionList, map[string]string{"producerGroup": "PG"}},
		{"GET_ALL_PRODUCER_INFO", remoting.RequestGetAllProducerInfo, nil},
	} {
		req := remoting.NewRequest(c.code, nil, nil)
		for k, v := range c.ext {
			req.ExtFields[k] = v
		}
		resp, err := app.InvokeSync(context.Background(), leader.Addr(), req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wantNoPermission(t, c.name, remoting.ResponseError(leader.Addr(), resp), "needs an admin account")
		if resp := pc.call(leader.Addr(), c.code, c.ext, nil); resp.Code == remoting.ResponseNoPermission {
			t.Fatalf("%s as the admin: %d %s", c.name, resp.Code, resp.Remark)
		}
	}
}
