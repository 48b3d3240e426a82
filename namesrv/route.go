package namesrv

import (
	"context"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// getRouteInfoByTopic answers GET_ROUTEINFO_BY_TOPIC (105): the topic's
// queue data and the addresses of the brokers serving it, or TOPIC_NOT_EXIST.
func (n *NameServer) getRouteInfoByTopic(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.GetRouteInfoRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	rd := n.routes.PickupTopicRouteData(h.Topic)
	if rd == nil {
		return remoting.NewResponse(remoting.ResponseTopicNotExist,
			"No topic route info in name server for the topic: "+h.Topic+
				" (create it on a broker, or enable autoCreateTopicEnable)"), nil
	}
	if n.live().OrderMessageEnable {
		rd.OrderTopicConf, _ = n.kv.Get(wire.NamespaceOrderTopicConfig, h.Topic)
	}
	resp := success()
	resp.Body = wire.EncodeTopicRouteData(rd, wantsStandardJSON(req, h.AcceptStandardJsonOnly))
	return resp, nil
}

// getBrokerClusterInfo answers GET_BROKER_CLUSTER_INFO (106). RocketMQ
// always writes legacy JSON here; we apply the route rule (standard for
// V4_9_4+ or acceptStandardJsonOnly) so Go tools can ask for plain JSON.
func (n *NameServer) getBrokerClusterInfo(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	standard := req.ExtFields["acceptStandardJsonOnly"] == "true"
	resp := success()
	resp.Body = wire.EncodeClusterInfo(n.routes.ClusterInfo(), wantsStandardJSON(req, standard))
	return resp, nil
}
