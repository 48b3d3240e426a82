package namesrv

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// wipeWritePermOfBroker answers WIPE_WRITE_PERM_OF_BROKER (205): producers
// stop choosing the broker's queues (used before maintenance).
func (n *NameServer) wipeWritePermOfBroker(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.BrokerNameRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	cnt := n.routes.WipeWritePermOfBroker(h.BrokerName)
	n.log.Info("wiped write perm of broker", zap.String("brokerName", h.BrokerName),
		zap.Int("topics", cnt), zap.String("client", conn.RemoteAddr()))
	resp := success()
	resp.EncodeHeader(&wire.WipeWritePermResponseHeader{WipeTopicCount: cnt})
	return resp, nil
}

// addWritePermOfBroker answers ADD_WRITE_PERM_OF_BROKER (327).
func (n *NameServer) addWritePermOfBroker(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.BrokerNameRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	cnt := n.routes.AddWritePermOfBroker(h.BrokerName)
	n.log.Info("added write perm of broker", zap.String("brokerName", h.BrokerName),
		zap.Int("topics", cnt), zap.String("client", conn.RemoteAddr()))
	resp := success()
	resp.EncodeHeader(&wire.AddWritePermResponseHeader{AddTopicCount: cnt})
	return resp, nil
}

// getAllTopicList answers GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).
func (n *NameServer) getAllTopicList(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	if !n.live().EnableAllTopicList {
		return remoting.NewResponse(remoting.ResponseSystemError, "disable"), nil
	}
	return topicListResponse(n.routes.AllTopics()), nil
}

// getTopicsByCluster answers GET_TOPICS_BY_CLUSTER (224).
func (n *NameServer) getTopicsByCluster(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	if !n.live().EnableTopicList {
		return remoting.NewResponse(remoting.ResponseSystemError, "disable"), nil
	}
	var h wire.GetTopicsByClusterRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	return topicListResponse(n.routes.TopicsByCluster(h.Cluster)), nil
}

// getSystemTopicList answers GET_SYSTEM_TOPIC_LIST_FROM_NS (304), which
// rocketmq-dashboard's topic page sends on every load. RocketMQ names a
// broker in brokerAddr, which sends the Java client on to ask that broker
// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305); raftmq brokers refuse that code,
// so the name server lists the broker-side system topics it routes itself
// and names no broker: the client takes its list as the whole answer.
func (n *NameServer) getSystemTopicList(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	return topicListResponse(n.routes.SystemTopics()), nil
}

// unitTopicList answers the unit topic lists (RocketMQ 5 gates them with
// enableTopicList): GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST
// (312) and GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313).
func (n *NameServer) unitTopicList(match func(flag int) bool) remoting.HandlerFunc {
	return func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		if !n.live().EnableTopicList {
			return remoting.NewResponse(remoting.ResponseSystemError, "disable"), nil
		}
		return topicListResponse(n.routes.TopicsBySysFlag(match)), nil
	}
}

func hasUnitFlag(f int) bool    { return f&wire.TopicSysFlagUnit != 0 }
func hasUnitSubFlag(f int) bool { return f&wire.TopicSysFlagUnitSub != 0 }

func topicListResponse(topics []string) *remoting.RemotingCommand {
	if topics == nil {
		topics = []string{}
	}
	resp := success()
	resp.Body, _ = json.Marshal(wire.TopicList{TopicList: topics})
	return resp
}

// deleteTopicInNamesrv answers DELETE_TOPIC_IN_NAMESRV (216).
func (n *NameServer) deleteTopicInNamesrv(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.DeleteTopicFromNamesrvRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	n.routes.DeleteTopic(h.Topic, h.ClusterName)
	return success(), nil
}

// registerTopicInNamesrv answers REGISTER_TOPIC_IN_NAMESRV (217): the body's
// queue data is recorded for brokers that are already registered. Like
// RocketMQ it answers SUCCESS even when nothing was applied.
func (n *NameServer) registerTopicInNamesrv(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.RegisterTopicRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	if len(req.Body) > 0 {
		rd, err := wire.DecodeTopicRouteData(req.Body)
		if err != nil {
			return nil, err
		}
		n.routes.RegisterTopic(h.Topic, rd.QueueDatas)
	}
	return success(), nil
}
