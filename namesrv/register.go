package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// versionV3_0_11 is MQVersion.Version.V3_0_11.ordinal(): brokers from this
// version on send a RegisterBrokerBody; older ones a bare topic wrapper.
const versionV3_0_11 = 37

// registerBroker answers REGISTER_BROKER (103).
func (n *NameServer) registerBroker(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.RegisterBrokerRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	if h.BodyCrc32 != 0 && int32(wire.BodyCRC32(req.Body)) != h.BodyCrc32 {
		n.log.Warn("register broker: body crc32 mismatch", zap.String("brokerAddr", h.BrokerAddr),
			zap.String("remote", conn.RemoteAddr()))
		return remoting.NewResponse(remoting.ResponseSystemError, "crc32 not match"), nil
	}

	var body *wire.RegisterBrokerBody
	if req.Version >= versionV3_0_11 {
		b, err := wire.DecodeRegisterBrokerBody(req.Body, h.Compressed)
		if err != nil {
			return nil, err
		}
		body = b
	} else {
		b, err := wire.DecodeLegacyRegisterBody(req.Body)
		if err != nil {
			return nil, err
		}
		body = b
	}

	args := RegisterBrokerArgs{
		Cluster:          h.ClusterName,
		BrokerAddr:       h.BrokerAddr,
		BrokerName:       h.BrokerName,
		BrokerID:         h.BrokerID,
		HAServerAddr:     h.HAServerAddr,
		ZoneName:         req.ExtFields["__ZONE_NAME"], // MixAll.ZONE_NAME
		HeartbeatTimeout: time.Duration(h.HeartbeatTimeoutMillis) * time.Millisecond,
		Topics:           body.TopicConfigSerializeWrapper,
		FilterServerList: body.FilterServerList,
	}
	// enableActingMaster is optional and its absence means "old broker",
	// which the typed header cannot express.
	if v, ok := req.ExtFields["enableActingMaster"]; ok {
		on := v == "true"
		args.EnableActingMaster = &on
	}
	if conn != nil {
		args.Channel = conn
	}
	// An ignored registration still answers SUCCESS, as RocketMQ does,
	// saying so in a field only raftmq's brokers read; RegisterBroker
	// logged why it was ignored.
	res, err := n.routes.RegisterBroker(args)
	ignored := errors.Is(err, ErrRegistrationIgnored)
	if err != nil && !ignored {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error()), nil
	}

	resp := success()
	resp.EncodeHeader(&wire.RegisterBrokerResponseHeader{HAServerAddr: res.HAServerAddr, MasterAddr: res.MasterAddr, Ignored: ignored})
	if n.live().ReturnOrderTopicConfigToBroker {
		if kv, ok := n.kv.List(wire.NamespaceOrderTopicConfig); ok {
			resp.Body, _ = json.Marshal(wire.KVTable{Table: kv})
		}
	}
	return resp, nil
}

// unregisterBroker answers UNREGISTER_BROKER (104). The removal is queued
// for the batch goroutine, as RocketMQ does, so a mass shutdown of brokers
// takes the table lock once per batch rather than once per broker.
func (n *NameServer) unregisterBroker(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.UnregisterBrokerRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	if err := n.submitUnregister(unregistration{req: h}); err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error()), nil
	}
	return success(), nil
}

// brokerHeartbeat answers BROKER_HEARTBEAT (904): liveness only.
func (n *NameServer) brokerHeartbeat(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.BrokerHeartbeatRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	n.routes.UpdateBrokerInfoUpdateTimestamp(h.ClusterName, h.BrokerAddr)
	return success(), nil
}

// queryDataVersion answers QUERY_DATA_VERSION (322): whether the broker's
// topic config changed since it last registered (so it can skip a full
// registration), refreshing its liveness on the way.
func (n *NameServer) queryDataVersion(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.QueryDataVersionRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	changed := true // no body: RocketMQ compares against null, always "changed"
	if len(req.Body) > 0 {
		var dv wire.DataVersion
		if err := json.Unmarshal(req.Body, &dv); err != nil {
			return nil, fmt.Errorf("%w: data version: %v", wire.ErrBadBody, err)
		}
		changed = n.routes.IsBrokerTopicConfigChanged(h.ClusterName, h.BrokerAddr, dv)
	}
	n.routes.UpdateBrokerInfoUpdateTimestamp(h.ClusterName, h.BrokerAddr)
	resp := success()
	if dv, ok := n.routes.QueryBrokerTopicConfig(h.ClusterName, h.BrokerAddr); ok {
		resp.Body, _ = json.Marshal(dv)
	}
	resp.EncodeHeader(&wire.QueryDataVersionResponseHeader{Changed: changed})
	return resp, nil
}
