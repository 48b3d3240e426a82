package broker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// notifyLeadership tells every consumer connected to this node (consumers
// heartbeat every member of a group) that it now leads its broker group:
// a oneway NOTIFY_CONSUMER_IDS_CHANGED (40) per consumer group and
// connection, with wire.ExtLeaderOf and wire.ExtLeaderAddr. A consumer
// whose long polls are parked at a frozen or partitioned old leader, whose
// connection stays open, would otherwise hold them until its route refresh
// or poll timeout (30 s each); the SDK moves them here at once. RocketMQ
// clients ignore the keys and rebalance, which changes nothing.
func (c *Controller) notifyLeadership() {
	for _, group := range c.clients.groups() {
		g, ok := c.clients.group(group)
		if !ok {
			continue
		}
		for _, ch := range g.Channels {
			if ch.Conn.Closed() {
				continue
			}
			req := remoting.NewRequest(remoting.RequestNotifyConsumerIDsChanged, &wire.ConsumerGroupRequestHeader{ConsumerGroup: group}, nil)
			if req.ExtFields == nil {
				req.ExtFields = map[string]string{}
			}
			req.ExtFields[wire.ExtLeaderOf] = c.cfg.BrokerName
			req.ExtFields[wire.ExtLeaderAddr] = c.addr
			req.Flag |= remoting.FlagOneway
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := ch.Conn.InvokeOneway(ctx, req); err != nil {
				c.log.Debug("leadership notice to a consumer failed", zap.String("group", group), zap.String("client", ch.ClientID), zap.Error(err))
			}
			cancel()
		}
	}
}
