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
