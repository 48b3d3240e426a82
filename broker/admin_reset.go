package broker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// INVOKE_BROKER_TO_RESET_OFFSET (222), behind mqadmin resetOffsetByTime and
// skipAccumulatedMessage (RocketMQ Broker2Client.resetOffset): the leader
// computes each queue's offset for the timestamp (-1: the queue's end),
// commits the offsets through Raft and tells the group's live consumers
// (RESET_CONSUMER_CLIENT_OFFSET, 220), which restart their queues there;
// without the notice they would commit their own positions over the
// reset. The answer's offsetTable holds the new offsets. RocketMQ 5's
// mqadmin resetOffsetByTime -b -q [-o] names one queue (queueId) and may
// name its new offset: only that queue moves.

// resetNotifyTimeout bounds sending the notice to each consumer (a full
// connection's write queue).
const resetNotifyTimeout = 3 * time.Second

func (c *Controller) processInvokeResetOffset(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	h := wire.ResetOffsetRequestHeader{QueueID: -1, Offset: -1}
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := checkGroup(h.Group); r != nil {
		return r
	}
	if !c.rep.IsLeader() {
		// A follower may not have applied the topic yet.
		return c.notLeader()
	}
	body, r := c.resetOffsets(ctx, &h)
	if r != nil {
		return r
	}
	c.notifyReset(ctx, &h, body)
	r = success()
	r.Body = body
	return r
}

// resetOffsets computes the reset's offsets, replicates them and returns
// the answer's offsetTable body, or the refusal. No delete of the topic
// or group comes between its checks and the replication
// (offsetCoalescer.tables); the consumers' notice is sent after, holding
// no delete up.
func (c *Controller) resetOffsets(ctx context.Context, h *wire.ResetOffsetRequestHeader) ([]byte, *remoting.RemotingCommand) {
	c.offsets.tables.RLock()
	defer c.offsets.tables.RUnlock()
	tc, ok := c.rep.State().Topic(h.Topic)
	if !ok {
		return nil, response(remoting.ResponseTopicNotExist, "topic %s does not exist on broker %s", h.Topic, c.cfg.BrokerName)
	}
	// As RocketMQ (SUBSCRIPTION_GROUP_NOT_EXIST in its server-side reset,
	// "consumer group not exist" in Broker2Client's): a group the broker
	// does not know is most likely a mistyped name, and committing offsets
	// for it would answer success while the real group stays put.
	if _, ok := c.rep.State().SubscriptionGroup(h.Group); !ok {
		if _, ok := c.clients.group(h.Group); !ok {
			return nil, response(remoting.ResponseSubscriptionGroupNotExist,
				"consumer group %s is neither configured nor connected on broker %s: nothing reset (create it with updateSubGroup first)",
				h.Group, c.cfg.BrokerName)
		}
	}
	first, end := int32(0), int32(queueCount(tc.ReadQueueNums))
	if h.QueueID >= 0 {
		if h.QueueID >= end {
			return nil, response(remoting.ResponseInvalidParameter, "queueId %d out of 0..%d of topic %s on broker %s",
				h.QueueID, end-1, h.Topic, c.cfg.BrokerName)
		}
		first, end = h.QueueID, h.QueueID+1
	}
	explicit := h.QueueID >= 0 && h.Offset >= 0
	var commits []OffsetCommit
	body := []byte(`{"offsetTable":{`)
	for q := first; q < end; q++ {
		lo, target, err := c.st.QueueRange(h.Topic, q)
		if err != nil {
			return nil, response(remoting.ResponseSystemError, "offsets of %s/%d: %v", h.Topic, q, err)
		}
		switch {
		case explicit:
			// An offset the operator names is taken as is (RocketMQ's
			// server-side reset), if the queue has it.
			if h.Offset < lo || h.Offset > target {
				return nil, response(remoting.ResponseSystemError, "target offset %d not in consume queue range [%d-%d] of %s/%d",
					h.Offset, lo, target, h.Topic, q)
			}
			target = h.Offset
		case h.Timestamp >= 0:
			off, err := c.st.GetOffsetInQueueByTime(h.Topic, q, h.Timestamp)
			if err != nil {
				return nil, response(remoting.ResponseSystemError, "search %s/%d at %d: %v", h.Topic, q, h.Timestamp, err)
			}
			target = off
		}
		// Without force an offset found by time only moves back (to
		// consume again).
		if cur, ok := c.offsets.lookup(h.Group, h.Topic, q); ok && !h.IsForce && !explicit && target >= cur {
			target = cur
		}
		commits = append(commits, OffsetCommit{Group: h.Group, Topic: h.Topic, QueueID: q, Offset: target})
		if q > first {
			body = append(body, ',')
		}
		body = wire.AppendQueueEntry(body, wire.MessageQueue{Topic: h.Topic, BrokerName: c.cfg.BrokerName, QueueID: q}, target)
	}
	body = append(body, "}}"...)
	// Queued commits of running consumers must not land after the reset,
	// nor the reset itself after it was answered as failed.
	if r := c.offsets.supersede(commits, func() *remoting.RemotingCommand {
		return c.replicate(ctx, "reset offsets", func(wctx context.Context) error { return c.rep.CommitOffsets(wctx, commits) })
	}); r != nil {
		return nil, r
	}
	return body, nil
}

// notifyReset sends RESET_CONSUMER_CLIENT_OFFSET oneway to every live
// consumer of the group, as RocketMQ's Broker2Client.resetOffset: RocketMQ's
// clients (Java, the official Go client) never answer it, so waiting for
// answers would hold the reset for a timeout per consumer, past
// mqadmin's own. A consumer the notice does not reach reads the committed
// offsets when it next rebalances. The notice carries the reset's header
// only, never the request's other fields: those hold the admin's
// AccessKey and Signature, which sign the field values and body but not
// the request code, so a consumer could send them back as any admin
// request those fields satisfy (DELETE_TOPIC_IN_BROKER needs only topic).
func (c *Controller) notifyReset(ctx context.Context, h *wire.ResetOffsetRequestHeader, body []byte) {
	g, ok := c.clients.group(h.Group)
	if !ok {
		return
	}
	for _, ch := range g.Channels {
		n := remoting.NewRequest(remoting.RequestResetConsumerClientOffset, h, body)
		cctx, cancel := context.WithTimeout(ctx, resetNotifyTimeout)
		err := ch.Conn.InvokeOneway(cctx, n)
		cancel()
		if err != nil {
			c.log.Info("reset offset: notice not sent to consumer", zap.String("group", h.Group), zap.String("client", ch.ClientID), zap.Error(err))
		}
	}
}
