package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// CONSUME_MESSAGE_DIRECTLY (309): an operator's tool (rocketmq-dashboard's
// resend, DLQ resends included) asks a broker to have this client consume
// one message now; the broker relays the request with the message as the
// body. A push consumer runs its listener on it, outside the queues'
// order and offsets, and answers the verdict (ConsumeMessageDirectlyResult).

func (c *consumerCore) consumeDirectlyHandler(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.ConsumeMessageDirectlyResultRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	switch {
	case h.ConsumerGroup != c.cfg.group:
		return remoting.NewResponse(remoting.ResponseSystemError, "consumer group "+h.ConsumerGroup+" is not consumed by client "+c.clientID), nil
	case c.hooks.direct == nil:
		return remoting.NewResponse(remoting.ResponseSystemError, "a lite pull consumer has no listener to consume a message directly"), nil
	}
	msgs, err := DecodeMessages(req.Body)
	if err != nil || len(msgs) == 0 {
		return remoting.NewResponse(remoting.ResponseSystemError, "consume directly: the relayed message does not decode"), nil
	}
	m := msgs[0]
	// As resetRetryAndNamespace: a message of the group's retry (or
	// dead-letter) topic is seen under its original topic. Elsewhere
	// RETRY_TOPIC is whatever the producer set, not where the message was
	// published.
	if t := m.Properties[wire.PropertyRetryTopic]; t != "" &&
		(m.Topic == wire.RetryTopic(c.cfg.group) || m.Topic == wire.DLQGroupTopicPrefix+c.cfg.group) {
		m.Topic = t
	}
	start := time.Now()
	var res wire.ConsumeMessageDirectlyResult
	c.directCalls.run(nil, func() {
		res = c.hooks.direct(c.ctx, m, MessageQueue{Topic: m.Topic, BrokerName: h.BrokerName, QueueID: int(m.QueueID)})
	})
	res.SpentTimeMills = time.Since(start).Milliseconds()
	resp := remoting.NewResponse(remoting.ResponseSuccess, "")
	resp.Body, _ = json.Marshal(res)
	return resp, nil
}

// consumeDirectly runs the push consumer's listener on one message.
func (p *PushConsumer) consumeDirectly(ctx context.Context, m *MessageExt, mq MessageQueue) wire.ConsumeMessageDirectlyResult {
	r := wire.ConsumeMessageDirectlyResult{AutoCommit: true, ConsumeResult: wire.CMResultSuccess}
	if p.concurrent != nil {
		if p.callConcurrent(ctx, &ConsumeConcurrentlyContext{Queue: mq}, []*MessageExt{m}) != ConsumeSuccess {
			r.ConsumeResult = wire.CMResultLater
		}
		return r
	}
	r.Order = true
	if p.callOrderly(ctx, &ConsumeOrderlyContext{Queue: mq, SuspendTime: p.core.cfg.suspendCurrentTime}, []*MessageExt{m}) != OrderlySuccess {
		r.ConsumeResult = wire.CMResultLater
	}
	return r
}
