package namesrv

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
)

// AuthConfig authenticates brokers' registrations. RocketMQ 4.9's name
// server has no ACL: any process that reaches it may register as brokerId
// 0 of any group and take its clients. With both keys set, the requests
// by which a broker enters, refreshes or leaves the route tables
// (REGISTER_BROKER, UNREGISTER_BROKER, BROKER_HEARTBEAT,
// QUERY_DATA_VERSION) must carry this access key and a valid signature by
// the secret key, computed as RocketMQ's ACL clients sign requests;
// brokers configured with the same pair sign them. Only authenticated
// registrations then reach the stale-broker check, so a body's
// StateVersion is never taken from an unknown sender. The name server's
// other writes to routes and config (write-permission wipes, topic route
// deletes and registrations, KV config, UPDATE_NAMESRV_CONFIG) need the
// same account: an operator signs them with it (raftmq admin
// --aclAccessKey/--aclSecretKey). Route lookups stay open, as in
// RocketMQ.
type AuthConfig struct {
	ClusterAuthAccessKey string `prop:"clusterAuthAccessKey"`
	ClusterAuthSecretKey string `prop:"clusterAuthSecretKey"`
}

// authCodes are the requests that need the cluster credentials.
var authCodes = map[int16]string{
	remoting.RequestRegisterBroker:   "REGISTER_BROKER",
	remoting.RequestUnregisterBroker: "UNREGISTER_BROKER",
	remoting.RequestBrokerHeartbeat:  "BROKER_HEARTBEAT",
	remoting.RequestQueryDataVersion: "QUERY_DATA_VERSION",

	remoting.RequestPutKVConfig:            "PUT_KV_CONFIG",
	remoting.RequestDeleteKVConfig:         "DELETE_KV_CONFIG",
	remoting.RequestWipeWritePermOfBroker:  "WIPE_WRITE_PERM_OF_BROKER",
	remoting.RequestAddWritePermOfBroker:   "ADD_WRITE_PERM_OF_BROKER",
	remoting.RequestDeleteTopicInNamesrv:   "DELETE_TOPIC_IN_NAMESRV",
	remoting.RequestRegisterTopicInNamesrv: "REGISTER_TOPIC_IN_NAMESRV",
	remoting.RequestUpdateNamesrvConfig:    "UPDATE_NAMESRV_CONFIG",
}

// initAuth installs the registration check (New).
func (n *NameServer) initAuth() error {
	ak, sk := n.cfg.ClusterAuthAccessKey, n.cfg.ClusterAuthSecretKey
	if err := (remoting.Credentials{AccessKey: ak, SecretKey: sk}).CheckConfigured("clusterAuthAccessKey", "clusterAuthSecretKey"); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if ak == "" {
		n.log.Warn("broker registration is not authenticated (clusterAuthAccessKey unset): any process that reaches this port can register brokers")
		return nil
	}
	n.srv.SetGuard(func(c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		name, ok := authCodes[req.Code]
		if !ok {
			return nil
		}
		why := ""
		switch got, _ := req.ExtValue(remoting.ExtAccessKey); {
		case got == "":
			why = "it is not signed: brokers need clusterAuthAccessKey and clusterAuthSecretKey in broker.conf set to this name server's pair; " +
				"operators sign with that account (raftmq admin --aclAccessKey/--aclSecretKey)"
		case got != ak:
			why = fmt.Sprintf("accessKey=%s is not the cluster's (clusterAuthAccessKey)", got)
		case !remoting.VerifySignature(req, remoting.ExtPairs(req), sk):
			why = fmt.Sprintf("signature check failed for accessKey=%s (clusterAuthSecretKey differs?)", got)
		default:
			return nil
		}
		n.log.Warn("broker request refused", zap.String("code", name), zap.String("remote", c.RemoteAddr()), zap.String("why", why))
		return remoting.NewResponse(remoting.ResponseNoPermission, name+" refused: "+why)
	})
	return nil
}
