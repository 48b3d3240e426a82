package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Direct consumption, mqadmin queryMsgById / queryMsgByUniqueKey with
// -g group and -d clientId: instead of printing the message, the tool has
// that client consume it now (DefaultMQAdminExt.consumeMessageDirectly)
// and prints the client's verdict. The request (CONSUME_MESSAGE_DIRECTLY,
// 309) goes to the leader of the broker group storing the message: it
// reads the message by its offset msgId and relays it over the client's
// connection, and clients keep their connections to leaders. mqadmin asks
// the message's store host, which in raftmq may be a follower by now.

// directFlags reports whether -g and -d are both given (mqadmin consumes
// directly only then; either alone is a plain lookup).
func directFlags(in flagValues) bool {
	return in.str("consumerGroup") != "" && in.str("clientId") != ""
}

// consumeDirectly has in's -d client of -g group consume m and returns
// the client's verdict; a client that is not online, or that refuses,
// fails with the broker's remark.
func (s *adminSession) consumeDirectly(ctx context.Context, in flagValues, m *client.MessageExt) (*wire.ConsumeMessageDirectlyResult, error) {
	id, err := wire.ParseMessageID(m.OffsetMsgID)
	if err != nil {
		return nil, fmt.Errorf("message %s: offset msgId %q: %w", m.MsgID, m.OffsetMsgID, err)
	}
	name, err := s.groupOf(ctx, id.Addr.String())
	if err != nil {
		return nil, fmt.Errorf("message %s: %w", m.MsgID, err)
	}
	h := &wire.ConsumeMessageDirectlyResultRequestHeader{ConsumerGroup: in.str("consumerGroup"), ClientID: in.str("clientId"),
		MsgID: m.OffsetMsgID, Topic: m.Topic, BrokerName: name}
	resp, _, err := s.a.LeaderRequest(ctx, name, remoting.RequestConsumeMessageDirectly, h, nil)
	if err != nil {
		return nil, err
	}
	var r wire.ConsumeMessageDirectlyResult
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, fmt.Errorf("consume directly: the answer of client %s does not decode: %w", h.ClientID, err)
	}
	return &r, nil
}

// directView is the view of m, with the verdict of its direct
// consumption when -g and -d ask for one.
func (s *adminSession) directView(ctx context.Context, in flagValues, m *client.MessageExt) (messageView, error) {
	v := viewOf(m)
	if !directFlags(in) {
		return v, nil
	}
	r, err := s.consumeDirectly(ctx, in, m)
	v.Direct = r
	return v, err
}

// tableDirect prints RocketMQ's ConsumeMessageDirectlyResult.toString,
// which mqadmin prints for a direct consumption.
func tableDirect(w *tabwriter.Writer, r *wire.ConsumeMessageDirectlyResult) {
	remark := r.Remark
	if remark == "" {
		remark = "null"
	}
	fmt.Fprintf(w, "ConsumeMessageDirectlyResult [order=%t, autoCommit=%t, consumeResult=%s, remark=%s, spentTimeMills=%d]\n",
		r.Order, r.AutoCommit, r.ConsumeResult, remark, r.SpentTimeMills)
}

// Resending, mqadmin queryMsgById -s true (QueryMsgByIdSubCommand.sendMsg):
// the message found is sent again to its topic by a producer of the
// admin's own group, as Java's producer sends a MessageExt: body, flag,
// tags, keys and properties as stored and the same client msgId, to a
// queue the producer picks. mqadmin's -u unitName only tells that producer
// which unit's name-server list to fetch from an address server (and
// tags its client id); raftmq has no address server, so -u is refused.

// checkResendFlags refuses what mqadmin accepts and then ignores: -u,
// and -s true together with -g -d (mqadmin consumes directly then and
// does not resend).
func checkResendFlags(in flagValues) error {
	if u := in.str("unitName"); u != "" {
		return fmt.Errorf("%w: -u %s: mqadmin's unit name makes the resend producer fetch the name servers of unit %s from an address server; "+
			"raftmq has no address server (name servers come from -n), so -u has no meaning here: leave it out", errAdminUsage, u, u)
	}
	if in.bool("sendMessage") && (in.str("consumerGroup") != "" || in.str("clientId") != "") {
		return fmt.Errorf("%w: -s true resends the message and -g/-d have a client consume it: give one or the other", errAdminUsage)
	}
	return nil
}

// resend sends m, the message -i's id found, again (queryMsgById -s
// true) and returns its view with the send's result.
func (s *adminSession) resend(ctx context.Context, id string, m *client.MessageExt) (messageView, error) {
	v := viewOf(m)
	p, err := s.adminProducer(ctx)
	if err != nil {
		return v, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	res, err := p.Resend(ctx, m)
	if err != nil {
		return v, fmt.Errorf("resend message %s to %s: %w", id, m.Topic, err)
	}
	v.Resend = &sendResult{res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset, res.Status.String(), res.MsgID, res.OffsetMsgID}
	v.resentID = id
	return v, nil
}

// tableResend prints what mqadmin prints for a resend: the id it was
// given, then RocketMQ's SendResult.toString.
func tableResend(w *tabwriter.Writer, v messageView) {
	r := v.Resend
	fmt.Fprintf(w, "prepare resend msg. originalMsgId=%s\n", v.resentID)
	fmt.Fprintf(w, "SendResult [sendStatus=%s, msgId=%s, offsetMsgId=%s, messageQueue=%s, queueOffset=%d]\n",
		r.SendStatus, r.MsgID, r.OffsetMsgID, client.MessageQueue{Topic: v.Topic, BrokerName: r.BrokerName, QueueID: r.QueueID}, r.QueueOffset)
}
