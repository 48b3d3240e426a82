package client

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// GET_CONSUMER_RUNNING_INFO (307): a broker forwards an operator's request
// (mqadmin consumerStatus, the dashboard's client view) to this consumer,
// which answers its configuration, subscriptions and per-queue state
// (RocketMQ's ConsumerRunningInfo). The SDK does not time pulls or
// listener calls, so statusTable carries zeros for the RT and TPS fields.

func (c *consumerCore) runningInfoHandler(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.GetConsumerRunningInfoRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	if h.ConsumerGroup != c.cfg.group {
		return remoting.NewResponse(remoting.ResponseSystemError, "consumer group "+h.ConsumerGroup+" is not consumed by client "+c.clientID), nil
	}
	resp := remoting.NewResponse(remoting.ResponseSuccess, "")
	resp.Body = wire.EncodeConsumerRunningInfo(c.runningInfo())
	return resp, nil
}

func (c *consumerCore) runningInfo() *wire.ConsumerRunningInfo {
	consumeType := "CONSUME_ACTIVELY"
	if c.hooks.consumeType == wire.ConsumeTypePush {
		consumeType = "CONSUME_PASSIVELY"
	}
	ri := &wire.ConsumerRunningInfo{
		Properties: map[string]string{
			wire.PropNamesrvAddr:        strings.Join(c.cfg.common.nameServers, ";"),
			wire.PropConsumeType:        consumeType,
			wire.PropConsumeOrderly:     strconv.FormatBool(c.hooks.orderly),
			wire.PropThreadPoolCoreSize: strconv.Itoa(c.cfg.consumeGoroutines),
			wire.PropClientVersion:      "raftmq-go",
			"consumerGroup":             c.cfg.group,
			"messageModel":              c.cfg.model.String(),
			"consumeFromWhere":          c.cfg.fromWhere.String(),
			"clientId":                  c.clientID,
		},
		StatusTable: map[string]wire.ConsumeStatus{},
	}
	if !c.startedAt.IsZero() {
		ri.Properties[wire.PropConsumerStartTimestamp] = strconv.FormatInt(c.startedAt.UnixMilli(), 10)
	}
	c.mu.Lock()
	for topic, sd := range c.subs {
		ri.SubscriptionSet = append(ri.SubscriptionSet, *sd)
		ri.StatusTable[topic] = wire.ConsumeStatus{}
	}
	pqs := make([]*processQueue, 0, len(c.pqs))
	for _, pq := range c.pqs {
		pqs = append(pqs, pq)
	}
	c.mu.Unlock()
	slices.SortFunc(pqs, func(a, b *processQueue) int { return CompareQueues(a.mq, b.mq) })
	for _, pq := range pqs {
		info := pq.info()
		if c.store != nil {
			if off, err := c.store.Read(c.ctx, pq.mq, ReadFromMemory); err == nil {
				info.CommitOffset = off
			}
		}
		v, _ := json.Marshal(info)
		ri.MqTable = append(ri.MqTable, wire.QueueEntry{
			Queue: wire.MessageQueue{Topic: pq.mq.Topic, BrokerName: pq.mq.BrokerName, QueueID: int32(pq.mq.QueueID)},
			Value: v,
		})
	}
	return ri
}

// info is the queue's ProcessQueueInfo (without the commit offset).
func (q *processQueue) info() wire.ProcessQueueInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	pi := wire.ProcessQueueInfo{
		CachedMsgCount:     len(q.msgs) + len(q.consuming),
		CachedMsgSizeInMiB: int(q.size >> 20),
		Locked:             q.locked,
		Droped:             q.dropped.Load(),
	}
	if !q.lockedAt.IsZero() {
		pi.LastLockTimestamp = q.lockedAt.UnixMilli()
	}
	first := true
	for _, m := range []map[int64]*MessageExt{q.msgs, q.consuming} {
		for off := range m {
			if first || off < pi.CachedMsgMinOffset {
				pi.CachedMsgMinOffset = off
			}
			if first || off > pi.CachedMsgMaxOffset {
				pi.CachedMsgMaxOffset = off
			}
			first = false
		}
	}
	return pi
}
