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
// reset. The answer's offsetTable holds the new offsets.

// resetNotifyTimeout bounds each consumer's answer to the notice.
const resetNotifyTimeout = 3 * time.Second

func (c *Controller) processInvokeResetOffset(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.ResetOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := checkGroup(h.Group); r != nil {
		return r
	}
	tc, ok := c.rep.State().Topic(h.Topic)
	if !ok {
		return response(remoting.ResponseTopicNotExist, "topic %s does not exist on broker %s", h.Topic, c.cfg.BrokerName)
	}
	if !c.rep.IsLeader() {
		return c.notLeader()
	}
	var commits []OffsetCommit
	body := []byte(`{"offsetTable":{`)
	for i := range queueCount(tc.ReadQueueNums) {
		q := int32(i)
		target := c.st.GetMaxOffsetInQueue(h.Topic, q)
		if h.Timestamp >= 0 {
			off, err := c.st.GetOffsetInQueueByTime(h.Topic, q, h.Timestamp)
			if err != nil {
				return response(remoting.ResponseSystemError, "search %s/%d at %d: %v", h.Topic, q, h.Timestamp, err)
			}
			target = off
		}
		// Without force an offset only moves back (to consume again).
		if cur, ok := c.offsets.lookup(h.Group, h.Topic, q); ok && !h.IsForce && target >= cur {
			target = cur
		}
		commits = append(commits, OffsetCommit{Group: h.Group, Topic: h.Topic, QueueID: q, Offset: target})
		if i > 0 {
			body = append(body, ',')
		}
		body = wire.AppendQueueEntry(body, wire.MessageQueue{Topic: h.Topic, BrokerName: c.cfg.BrokerName, QueueID: q}, target)
	}
	body = append(body, "}}"...)
	// Queued commits of running consumers must not land after the reset.
	for _, oc := range commits {
		c.offsets.add(oc)
	}
	if r := c.replicate(ctx, "reset offsets", func(wctx context.Context) error { return c.rep.CommitOffsets(wctx, commits) }); r != nil {
		return r
	}
	c.notifyReset(ctx, req, body, h.Group)
	r := success()
	r.Body = body
	return r
}

// notifyReset sends RESET_CONSUMER_CLIENT_OFFSET to every live consumer of
// group; one that does not answer is logged (it will read the committed
// offsets when it next rebalances).
func (c *Controller) notifyReset(ctx context.Context, req *remoting.RemotingCommand, body []byte, group string) {
	g, ok := c.clients.group(group)
	if !ok {
		return
	}
	for id, ch := range g.Channels {
		n := remoting.NewRequest(remoting.RequestResetConsumerClientOffset, nil, body)
		n.ExtFields = map[string]string{}
		for k, v := range req.ExtFields {
			n.ExtFields[k] = v
		}
		cctx, cancel := context.WithTimeout(ctx, resetNotifyTimeout)
		_, err := ch.Conn.InvokeSync(cctx, n)
		cancel()
		if err != nil {
			c.log.Info("reset offset: consumer did not take the notice", zap.String("group", group), zap.String("client", id), zap.Error(err))
		}
	}
}
