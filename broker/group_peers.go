package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// newMemberClient is the broker's client to its name servers and to the
// other members of its group: TLS as the tls* keys say, and every request
// signed with the cluster account (clusterAuth*) when it is set, so that
// members running aclEnable accept it.
func newMemberClient(cfg BrokerConfig, log *zap.Logger) (*remoting.Client, error) {
	_, _, nsTLS, err := cfg.remotingTLS()
	if err != nil {
		return nil, err
	}
	creds, err := cfg.ClusterCredentials()
	if err != nil {
		return nil, err
	}
	ncfg := remoting.DefaultClientConfig()
	ncfg.TLS = nsTLS
	cl := remoting.NewClient(ncfg, log)
	if !creds.IsZero() {
		cl.AddHook(remoting.SigningHook(creds))
	}
	return cl, nil
}

// groupPeers reaches the other members of this broker group over
// remoting, as the name servers route them: the route lookup and the
// RAFT_STATUS ask that the removal watch, the leader's follower-lag and
// learner probes, config forwarding, the shutdown hand-off and an empty
// member's join check share.
type groupPeers struct {
	client      *remoting.Client
	nameServers []string
	brokerName  string
}

// route is the first answering name server's address table of this
// broker group (brokerId → remoting address); nil when none answers,
// empty when it routes no member of the group. Each name server gets
// each, within ctx.
func (p groupPeers) route(ctx context.Context, each time.Duration) map[int64]string {
	for _, ns := range p.nameServers {
		cctx, cancel := context.WithTimeout(ctx, each)
		addrs, ok := p.routeFrom(cctx, ns)
		cancel()
		if ok {
			return addrs
		}
	}
	return nil
}

// routeFrom is name server ns's address table of this broker group
// (empty when it routes no member); ok is false when ns does not answer
// within ctx or answers something else.
func (p groupPeers) routeFrom(ctx context.Context, ns string) (map[int64]string, bool) {
	resp, err := p.client.InvokeSync(ctx, ns, remoting.NewRequest(remoting.RequestGetBrokerClusterInfo, nil, nil))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		return nil, false
	}
	ci, err := wire.DecodeClusterInfo(resp.Body)
	if err != nil {
		return nil, false
	}
	if bd, ok := ci.BrokerAddrTable[p.brokerName]; ok && bd.BrokerAddrs != nil {
		return bd.BrokerAddrs, true
	}
	return map[int64]string{}, true
}

// master is the address routed as the group's brokerId 0, "" when none
// is or no name server answers by deadline.
func (p groupPeers) master(deadline time.Time) string {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return p.route(ctx, time.Until(deadline))[wire.MasterID]
}

// status asks the member at addr for RAFT_STATUS.
func (p groupPeers) status(ctx context.Context, addr string) (*RaftStatus, error) {
	resp, err := p.client.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestRaftStatus, nil, nil))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.ResponseSuccess {
		return nil, fmt.Errorf("raft status from %s: code %d %s", addr, resp.Code, resp.Remark)
	}
	var st RaftStatus
	if err := json.Unmarshal(resp.Body, &st); err != nil {
		return nil, fmt.Errorf("raft status from %s: %w", addr, err)
	}
	return &st, nil
}
