package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Requests consumers send to brokers besides pulls and offsets: heartbeat,
// group membership, queue locks, send-back and offset lookups. Each is a
// small function over a remoting.Client so the push consumer, the lite
// pull consumer and the admin client share them.

func toWire(mqs []MessageQueue) []wire.MessageQueue {
	out := make([]wire.MessageQueue, len(mqs))
	for i, mq := range mqs {
		out[i] = wire.MessageQueue{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: int32(mq.QueueID)}
	}
	return out
}

// invokeOK sends req and turns any answer but SUCCESS into a *BrokerError.
func invokeOK(ctx context.Context, rc *remoting.Client, brokerName, addr string, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	resp, err := rc.InvokeSync(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.ResponseSuccess {
		return nil, &BrokerError{Broker: brokerName, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: resp.ExtFields[wire.ExtLeaderAddr]}
	}
	return resp, nil
}

// sendHeartbeat sends hb to addr; a connection it dials gets no other
// heartbeat (conn_heartbeat.go).
func sendHeartbeat(ctx context.Context, rc *remoting.Client, brokerName, addr string, hb *wire.HeartbeatData) error {
	body, err := json.Marshal(hb)
	if err != nil {
		return err
	}
	_, err = invokeOK(heartbeatCall(ctx), rc, brokerName, addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, body))
	return err
}

// checkClientConfig asks addr whether it can serve a subscription
// (CHECK_CLIENT_CONFIG, 46); a refusal is a *BrokerError with the reason.
func checkClientConfig(ctx context.Context, rc *remoting.Client, brokerName, addr string, body *wire.CheckClientRequestBody) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = invokeOK(ctx, rc, brokerName, addr, remoting.NewRequest(remoting.RequestCheckClientConfig, nil, b))
	return err
}

// consumerIDs asks addr for the client ids of group (GET_CONSUMER_LIST_BY_GROUP, 38).
func consumerIDs(ctx context.Context, rc *remoting.Client, brokerName, addr, group string) ([]string, error) {
	resp, err := invokeOK(ctx, rc, brokerName, addr, remoting.NewRequest(remoting.RequestGetConsumerListByGroup, &wire.ConsumerGroupRequestHeader{ConsumerGroup: group}, nil))
	if err != nil {
		return nil, err
	}
	var body wire.ConsumerListBody
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("client: consumer list of %s from %s: %w", group, addr, err)
	}
	return body.ConsumerIDList, nil
}

// lockQueues asks addr to lock mqs for clientID (LOCK_BATCH_MQ, 41) and
// returns the queues it granted.
func lockQueues(ctx context.Context, rc *remoting.Client, brokerName, addr, group, clientID string, mqs []MessageQueue) ([]MessageQueue, error) {
	body, _ := json.Marshal(&wire.LockBatchBody{ConsumerGroup: group, ClientID: clientID, MQSet: toWire(mqs)})
	resp, err := invokeOK(ctx, rc, brokerName, addr, remoting.NewRequest(remoting.RequestLockBatchMQ, nil, body))
	if err != nil {
		return nil, err
	}
	var lr wire.LockBatchResponse
	if err := json.Unmarshal(resp.Body, &lr); err != nil {
		return nil, fmt.Errorf("client: lock answer from %s: %w", addr, err)
	}
	out := make([]MessageQueue, len(lr.LockOKMQSet))
	for i, w := range lr.LockOKMQSet {
		out[i] = MessageQueue{Topic: w.Topic, BrokerName: w.BrokerName, QueueID: int(w.QueueID)}
	}
	return out, nil
}

// unlockQueues releases mqs at addr (UNLOCK_BATCH_MQ, 42).
func unlockQueues(ctx context.Context, rc *remoting.Client, brokerName, addr, group, clientID string, mqs []MessageQueue) error {
	body, _ := json.Marshal(&wire.LockBatchBody{ConsumerGroup: group, ClientID: clientID, MQSet: toWire(mqs)})
	_, err := invokeOK(ctx, rc, brokerName, addr, remoting.NewRequest(remoting.RequestUnlockBatchMQ, nil, body))
	return err
}

// unregisterClient tells addr the client leaves group (UNREGISTER_CLIENT,
// 35), so the broker notifies the other members at once.
func unregisterClient(ctx context.Context, rc *remoting.Client, brokerName, addr, clientID, group string) error {
	_, err := invokeOK(ctx, rc, brokerName, addr, remoting.NewRequest(remoting.RequestUnregisterClient,
		&wire.UnregisterClientRequestHeader{ClientID: clientID, ConsumerGroup: group}, nil))
	return err
}

// offsetAnswer reads the "offset" extField of a SUCCESS answer.
func offsetAnswer(addr string, resp *remoting.RemotingCommand) (int64, error) {
	off, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("client: offset answer from %s: %q is not a number", addr, resp.ExtFields["offset"])
	}
	return off, nil
}

// queueOffset asks for a queue's max (GET_MAX_OFFSET, 30) or min
// (GET_MIN_OFFSET, 31) offset.
func queueOffset(ctx context.Context, rc *remoting.Client, addr string, code int16, mq MessageQueue) (int64, error) {
	resp, err := invokeOK(ctx, rc, mq.BrokerName, addr, remoting.NewRequest(code,
		&wire.QueueOffsetRequestHeader{Topic: mq.Topic, QueueID: int32(mq.QueueID), BrokerName: mq.BrokerName}, nil))
	if err != nil {
		return 0, err
	}
	return offsetAnswer(addr, resp)
}

// searchOffset finds the first offset of mq stored at or after ts
// (SEARCH_OFFSET_BY_TIMESTAMP, 29).
func searchOffset(ctx context.Context, rc *remoting.Client, addr string, mq MessageQueue, tsMillis int64) (int64, error) {
	resp, err := invokeOK(ctx, rc, mq.BrokerName, addr, remoting.NewRequest(remoting.RequestSearchOffsetByTimestamp,
		&wire.SearchOffsetRequestHeader{Topic: mq.Topic, QueueID: int32(mq.QueueID), Timestamp: tsMillis, BrokerName: mq.BrokerName}, nil))
	if err != nil {
		return 0, err
	}
	return offsetAnswer(addr, resp)
}
