package broker

import (
	"context"
	"encoding/json"
	"strings"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/acl"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// ACL administration (RocketMQ 4.x's AdminBrokerProcessor for codes
// 50-53): each rewrites this member's plain_acl.yml, which then reloads.
// Every member of a group holds its own file; `raftmq admin` sends each
// change to every member and clusterAclConfigVersion compares their
// content hashes (docs/adr: ACL rules per member, checked for agreement).

// aclSecretKeyField is the header field of UPDATE_AND_CREATE_ACL_CONFIG
// (PlainAccessConfig's secretKey) that carries an account's secret key.
const aclSecretKeyField = "secretKey"

// aclOff answers an ACL command on a broker without aclEnable.
func aclOff() *remoting.RemotingCommand {
	return response(remoting.ResponseSystemError, "ACL is off on this broker (aclEnable=false in broker.conf)")
}

// splitList splits RocketMQ's comma-separated header lists (UtilAll.split).
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// processUpdateACLConfig answers UPDATE_AND_CREATE_ACL_CONFIG (50)
// (wire.CreateAccessConfigRequestHeader). The fields are read one by one:
// an absent topicPerms, groupPerms or whiteRemoteAddress keeps the stored
// value, an empty one clears it, as in RocketMQ.
func (c *Controller) processUpdateACLConfig(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	if c.acl == nil {
		return aclOff(), nil
	}
	ext := func(k string) string { v, _ := req.ExtValue(k); return v }
	a := acl.Account{
		AccessKey:          ext("accessKey"),
		SecretKey:          ext(aclSecretKeyField),
		WhiteRemoteAddress: ext("whiteRemoteAddress"),
		Admin:              ext("admin") == "true",
		DefaultTopicPerm:   ext("defaultTopicPerm"),
		DefaultGroupPerm:   ext("defaultGroupPerm"),
	}
	// A present list replaces the stored one, an empty one too (non-nil,
	// unlike splitList's answer for ""): Update keeps a nil list.
	if v, ok := req.ExtValue("topicPerms"); ok {
		a.TopicPerms = append([]string{}, splitList(v)...)
	}
	if v, ok := req.ExtValue("groupPerms"); ok {
		a.GroupPerms = append([]string{}, splitList(v)...)
	}
	if a.AccessKey == "" {
		return response(remoting.ResponseUpdateACLConfigFailed, "accessKey is required"), nil
	}
	_, setWhite := req.ExtValue("whiteRemoteAddress")
	if err := c.acl.Update(a, setWhite); err != nil {
		return response(remoting.ResponseUpdateACLConfigFailed, "update ACL account %s: %v", a.AccessKey, err), nil
	}
	c.log.Info("ACL account updated", zap.String("accessKey", a.AccessKey), zap.String("remote", conn.RemoteAddr()))
	return success(), nil
}

// processDeleteACLConfig answers DELETE_ACL_CONFIG (51).
func (c *Controller) processDeleteACLConfig(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	if c.acl == nil {
		return aclOff(), nil
	}
	ak, _ := req.ExtValue("accessKey")
	if err := c.acl.Delete(ak); err != nil {
		return response(remoting.ResponseDeleteACLConfigFailed, "delete ACL account %s: %v", ak, err), nil
	}
	c.log.Info("ACL account deleted", zap.String("accessKey", ak), zap.String("remote", conn.RemoteAddr()))
	return success(), nil
}

// processUpdateGlobalWhiteAddrs answers UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
// (53). aclFileFullPath, when given, must name this broker's file: raftmq
// reads one file per broker, not RocketMQ's conf/acl directory.
func (c *Controller) processUpdateGlobalWhiteAddrs(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	if c.acl == nil {
		return aclOff(), nil
	}
	if p, _ := req.ExtValue("aclFileFullPath"); p != "" && p != c.acl.Path() {
		return response(remoting.ResponseSystemError, "aclFileFullPath %s: this broker's ACL file is %s", p, c.acl.Path()), nil
	}
	addrs, _ := req.ExtValue("globalWhiteAddrs")
	if err := c.acl.SetGlobalWhite(splitList(addrs)); err != nil {
		return response(remoting.ResponseSystemError, "update global white addresses: %v", err), nil
	}
	c.log.Info("ACL global white addresses updated", zap.String("addrs", addrs), zap.String("remote", conn.RemoteAddr()))
	return success(), nil
}

// processGetBrokerACLInfo answers GET_BROKER_CLUSTER_ACL_INFO (52) with
// GetBrokerAclConfigResponseHeader's fields plus raftmq's aclEnable and
// aclHash (the rules' content hash, which members of a group compare).
func (c *Controller) processGetBrokerACLInfo(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	h := wire.GetBrokerAclConfigResponseHeader{BrokerName: c.cfg.BrokerName, BrokerAddr: c.addr, ClusterName: c.cfg.BrokerClusterName}
	if c.acl != nil {
		rules := c.acl.Rules()
		v := wire.DataVersion{Counter: rules.Version.Counter, Timestamp: rules.Version.Timestamp}
		vj, _ := json.Marshal(v)
		all, _ := json.Marshal(map[string]wire.DataVersion{c.acl.Path(): v})
		h.Version, h.AllAclFileVersion, h.AclEnable, h.AclHash = string(vj), string(all), true, rules.Hash
	}
	r := success()
	r.EncodeHeader(&h)
	return r, nil
}
