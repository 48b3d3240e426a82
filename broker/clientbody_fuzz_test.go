package broker

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/acl"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// followerPathReplica is a pathReplica that is not the leader, so a
// heartbeat registers its client without writing a group config.
type followerPathReplica struct{ *pathReplica }

func (followerPathReplica) IsLeader() bool { return false }

// liveConn is the server side of a real loopback connection, the one a
// heartbeat arrives on.
func liveConn(tb testing.TB) *remoting.Conn {
	tb.Helper()
	got := make(chan *remoting.Conn, 1)
	srv := remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	srv.Register(remoting.RequestHeartBeat, func(_ context.Context, c *remoting.Conn, _ *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		got <- c
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	cl := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	tb.Cleanup(func() {
		_ = cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.InvokeSync(ctx, srv.Addr().String(), remoting.NewRequest(remoting.RequestHeartBeat, nil, nil)); err != nil {
		tb.Fatal(err)
	}
	return <-got
}

// heartbeatSeeds are HEART_BEAT bodies as the SDK sends them, and shapes
// they may take from other clients.
func heartbeatSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	hb := wire.HeartbeatData{ClientID: "10.0.0.1@1",
		ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "PG"}},
		ConsumerDataSet: []wire.HeartbeatConsumerData{{GroupName: "CG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING",
			ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET", SubscriptionDataSet: []*wire.SubscriptionData{
				{Topic: "T", SubString: "a || b", TagsSet: []string{"a", "b"}, SubVersion: 1},
				{Topic: "S", SubString: "x > 1 AND y IN ('a')", ExpressionType: "SQL92", SubVersion: 2}}}}}
	b, err := json.Marshal(hb)
	if err != nil {
		tb.Fatal(err)
	}
	return [][]byte{b, []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[null,{"topic":"t"}]}]}`),
		[]byte(`{"clientID":"c","consumerDataSet":[{"groupName":"%RETRY%g"}],"producerDataSet":[{"groupName":""}]}`), []byte(`{}`), []byte(`null`)}
}

// FuzzHeartbeatBody: a HEART_BEAT body of any bytes is answered (success,
// or a refusal with a remark), never a panic; after a success every
// consumer group of the body lists the client.
func FuzzHeartbeatBody(f *testing.F) {
	for _, b := range heartbeatSeeds(f) {
		f.Add(b)
	}
	c := newPathController(f, followerPathReplica{newPathReplica()})
	c.cfg.EnablePropertyFilter = true
	conn := liveConn(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := c.processHeartbeat(context.Background(), conn, remoting.NewRequest(remoting.RequestHeartBeat, nil, body))
		if err != nil || resp == nil {
			t.Fatalf("heartbeat answered %v, %v", resp, err)
		}
		if resp.Code != remoting.ResponseSuccess {
			if resp.Remark == "" {
				t.Fatalf("refusal %d without a remark", resp.Code)
			}
			return
		}
		var hb wire.HeartbeatData
		if err := json.Unmarshal(body, &hb); err != nil {
			t.Fatalf("accepted a body that does not decode: %v", err)
		}
		for _, cd := range hb.ConsumerDataSet {
			if ids := c.clients.consumerIDs(cd.GroupName); !slices.Contains(ids, hb.ClientID) {
				t.Fatalf("group %q lists %q, not the client %q", cd.GroupName, ids, hb.ClientID)
			}
		}
	})
}

// FuzzACLRequest: the resources the ACL checks are read from any request
// (before it is authenticated): any code, fields and body give a request
// or an error, never a panic, and every resource is named.
func FuzzACLRequest(f *testing.F) {
	codes := []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2, remoting.RequestSendBatchMessage,
		remoting.RequestSendReplyMessageV2, remoting.RequestEndTransaction, remoting.RequestConsumerSendMsgBack,
		remoting.RequestPullMessage, remoting.RequestQueryMessage, remoting.RequestHeartBeat, remoting.RequestUnregisterClient,
		remoting.RequestUpdateConsumerOffset, remoting.RequestLockBatchMQ, remoting.RequestUnlockBatchMQ, remoting.RequestUpdateBrokerConfig}
	lock, _ := json.Marshal(wire.LockBatchBody{ConsumerGroup: "g", ClientID: "c",
		MQSet: []wire.MessageQueue{{Topic: "T", BrokerName: "b", QueueID: 1}, {Topic: "%RETRY%g", BrokerName: "b"}}})
	for i, b := range append(heartbeatSeeds(f), lock) {
		f.Add(uint8(i), "10.0.0.1:5", "topic", "T", "b", "%RETRY%g", b)
	}
	f.Add(uint8(0), "[::1]:1", "a", "PG", "b", "T", []byte(nil))
	f.Fuzz(func(t *testing.T, code uint8, remote, k1, v1, k2, v2 string, body []byte) {
		req := remoting.NewRequest(codes[int(code)%len(codes)], map[string]string{k1: v1, k2: v2}, body)
		q, err := aclRequest(remote, req)
		if err != nil {
			return
		}
		if q.Code != req.Code {
			t.Fatalf("request code %d read as %d", req.Code, q.Code)
		}
		for _, r := range q.Resources {
			if r.Name == "" || r.Perm&^(acl.Pub|acl.Sub) != 0 {
				t.Fatalf("resource %+v", r)
			}
		}
	})
}

// FuzzLockBatchBody: LOCK_BATCH_MQ and UNLOCK_BATCH_MQ bodies of any bytes
// are answered, never a panic; the queues granted are queues the body
// asked for that this broker group has, another client is then granted none of them, and after the
// holder's unlock it is granted all of them.
func FuzzLockBatchBody(f *testing.F) {
	b, _ := json.Marshal(wire.LockBatchBody{ConsumerGroup: "g", ClientID: "c1",
		MQSet: []wire.MessageQueue{{Topic: "T", BrokerName: "broker-a", QueueID: 0}, {Topic: "T", BrokerName: "broker-a", QueueID: 1}}})
	f.Add(b)
	f.Add([]byte(`{"consumerGroup":"g","clientId":"c1","mqSet":[{"topic":"T","brokerName":"broker-a","queueId":0},{"topic":"T","brokerName":"broker-a","queueId":0}]}`))
	f.Add([]byte(`{"consumerGroup":"g","clientId":"c1","mqSet":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"U","brokerName":"broker-a","queueId":2}]}`))
	f.Add([]byte(`{"mqSet":null}`))
	f.Add([]byte(`{"consumerGroup":"","clientId":"","mqSet":[{}]}`))
	r := newPathReplica(wire.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: wire.PermRead | wire.PermWrite})
	r.st.groups["g"] = wire.DefaultSubscriptionGroupConfig("g")
	c := newPathController(f, r)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte) {
		defer c.locks.reset()
		resp, err := c.processLockBatch(ctx, nil, remoting.NewRequest(remoting.RequestLockBatchMQ, nil, body))
		if err != nil || resp == nil {
			t.Fatalf("lock answered %v, %v", resp, err)
		}
		if resp.Code != remoting.ResponseSuccess {
			if resp.Remark == "" {
				t.Fatalf("refusal %d without a remark", resp.Code)
			}
			return
		}
		var req wire.LockBatchBody
		var got wire.LockBatchResponse
		if json.Unmarshal(body, &req) != nil || json.Unmarshal(resp.Body, &got) != nil {
			t.Fatalf("lock of %q answered %q", body, resp.Body)
		}
		for _, mq := range got.LockOKMQSet {
			if !slices.Contains(req.MQSet, mq) {
				t.Fatalf("granted %+v, not asked for", mq)
			}
			if mq.BrokerName != c.cfg.BrokerName || mq.Topic != "T" || mq.QueueID < 0 || mq.QueueID > 1 {
				t.Fatalf("granted %+v, a queue broker %s does not have", mq, c.cfg.BrokerName)
			}
		}
		other := req
		other.ClientID += "-other"
		if l := c.locks.tryLockBatch(other.ConsumerGroup, other.ClientID, got.LockOKMQSet); len(l) != 0 {
			t.Fatalf("%+v held by %q granted to %q too", l, req.ClientID, other.ClientID)
		}
		if r, err := c.processUnlockBatch(ctx, nil, remoting.NewRequest(remoting.RequestUnlockBatchMQ, nil, body)); err != nil || r.Code != remoting.ResponseSuccess {
			t.Fatalf("unlock answered %v, %v", r, err)
		}
		if l := c.locks.tryLockBatch(other.ConsumerGroup, other.ClientID, got.LockOKMQSet); len(l) != len(got.LockOKMQSet) {
			t.Fatalf("after the unlock %q granted %d of %d", other.ClientID, len(l), len(got.LockOKMQSet))
		}
	})
}
