package client

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Requests behind mqadmin's remaining commands (broker stats, connections,
// consumer status, name-server config and KV, write permissions, store
// maintenance): most answers are shown as they come, so Admin offers the
// request itself plus the few lookups that need more than one call.

// NameServerAddrs returns the name servers the Admin was given.
func (a *Admin) NameServerAddrs() []string { return slices.Clone(a.cfg.nameServers) }

// BrokerRequest sends one request to the broker at addr and returns the
// success answer; any other answer is a *BrokerError. A request addr
// refuses as its group leader's (a not-leader answer) goes on to the
// leader, waiting out an election within ctx (10 s when ctx has no
// deadline), and is sent again if a connection closes under it: such a
// request must be safe to repeat.
func (a *Admin) BrokerRequest(ctx context.Context, addr string, code int16, header any, body []byte) (*remoting.RemotingCommand, error) {
	return a.brokerCall(ctx, addr, func() *remoting.RemotingCommand { return remoting.NewRequest(code, header, body) })
}

// LeaderRequest sends one request to the leader of broker group
// brokerName (a name RouteGroups or ClusterGroups returned) and returns
// the success answer and the leader's address; any other answer is a
// *BrokerError. It rides out a leader change as the producer does: a
// not-leader answer is followed to the leader it names, and a group
// without one is waited for, within ctx (10 s when ctx has no deadline).
// A request whose connection closed is sent again, so it must be safe to
// repeat. For requests only a group's leader answers rightly: writes, and
// reads of what only the leader holds (client connections, send
// statistics).
func (a *Admin) LeaderRequest(ctx context.Context, brokerName string, code int16, header any, body []byte) (*remoting.RemotingCommand, string, error) {
	if err := a.knowGroup(ctx, brokerName); err != nil {
		return nil, "", err
	}
	return a.leaderCall(ctx, brokerName, func() *remoting.RemotingCommand { return remoting.NewRequest(code, header, body) })
}

// knowGroup asks the name servers for brokerName's members when the
// routes know none (leaderCall starts from them).
func (a *Admin) knowGroup(ctx context.Context, brokerName string) error {
	if a.routes.brokerAddr(brokerName) != "" {
		return nil
	}
	_, err := a.clusterGroups(ctx, "")
	return err
}

// RouteGroups returns the broker groups holding topic, sorted: the
// targets of LeaderRequest for a topic's brokers. A group whose leader
// is being elected is listed while the name servers list any member.
func (a *Admin) RouteGroups(ctx context.Context, topic string) ([]string, error) {
	return a.routeGroups(ctx, topic)
}

// ClusterGroups returns the broker groups of cluster ("" = every
// cluster), sorted, for LeaderRequest.
func (a *Admin) ClusterGroups(ctx context.Context, cluster string) ([]string, error) {
	return a.clusterGroups(ctx, cluster)
}

// NameServerRequest sends one request to the name servers in turn until
// one answers; a non-success answer is a *BrokerError.
func (a *Admin) NameServerRequest(ctx context.Context, code int16, header any, body []byte) (*remoting.RemotingCommand, error) {
	return a.nameServerCall(ctx, func() *remoting.RemotingCommand { return remoting.NewRequest(code, header, body) })
}

// NameServerRequestAt sends one request to the name server at addr (the
// commands that change every name server: KV config, write permission,
// name-server config).
func (a *Admin) NameServerRequestAt(ctx context.Context, addr string, code int16, header any, body []byte) (*remoting.RemotingCommand, error) {
	cctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
	defer cancel()
	resp, err := a.rc.InvokeSync(cctx, addr, remoting.NewRequest(code, header, body))
	if err != nil {
		return nil, fmt.Errorf("%w (%s): %w", ErrNoNameServer, addr, err)
	}
	if resp.Code != remoting.ResponseSuccess {
		return nil, &BrokerError{Broker: "namesrv", Addr: addr, Code: resp.Code, Remark: resp.Remark}
	}
	return resp, nil
}

// NameServerConfig reads one name server's configuration
// (GET_NAMESRV_CONFIG, 318), answered as Java properties text like
// GET_BROKER_CONFIG.
func (a *Admin) NameServerConfig(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.NameServerRequestAt(ctx, addr, remoting.RequestGetNamesrvConfig, nil, nil)
	if err != nil {
		return nil, err
	}
	return parseConfigAnswer(addr, resp.Body)
}

// ClusterMasters returns brokerName → leader address of every group of
// cluster ("" = every cluster).
func (a *Admin) ClusterMasters(ctx context.Context, cluster string) (map[string]string, error) {
	return a.masters(ctx, cluster)
}

// QueryMessageByUniqueKey finds topic's messages whose client message id
// (UNIQ_KEY, the MsgID applications log) is id, through the brokers'
// index (QUERY_MESSAGE on topic#UNIQ_KEY). ErrMessageNotFound when none.
func (a *Admin) QueryMessageByUniqueKey(ctx context.Context, topic, id string) ([]*MessageExt, error) {
	return a.queryUniqueKey(ctx, nil, topic, id)
}

// QueryMessageByUniqueKeyOn is QueryMessageByUniqueKey asking only those
// of topic's broker groups that are in groups (ClusterGroups of one
// cluster, as RocketMQ's MQAdminImpl asks only its cluster's brokers:
// mqadmin queryMsgById -c).
func (a *Admin) QueryMessageByUniqueKeyOn(ctx context.Context, groups []string, topic, id string) ([]*MessageExt, error) {
	if groups == nil {
		groups = []string{}
	}
	return a.queryUniqueKey(ctx, groups, topic, id)
}

// queryUniqueKey looks id up in topic's groups, only those in groups
// unless groups is nil.
func (a *Admin) queryUniqueKey(ctx context.Context, groups []string, topic, id string) ([]*MessageExt, error) {
	names, err := a.routeGroups(ctx, topic)
	if err != nil {
		return nil, err
	}
	if groups != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(groups, n) })
	}
	h := wire.QueryMessageRequestHeader{Topic: topic, Key: id, MaxNum: 32, EndTimestamp: time.Now().Add(time.Hour).UnixMilli()}
	out, err := a.queryIndex(ctx, names, h, true, func(m *MessageExt) bool { return m.MsgID == id })
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: topic %s unique key %s", ErrMessageNotFound, topic, id)
	}
	return out, nil
}

// PullQueue reads up to maxNums messages of mq from offset for group,
// matching sub (nil: all), without committing anything. It reads where
// the pull consumer does (mqadmin's DefaultMQPullConsumer reads through
// findBrokerAddressInSubscribe): the group's leader, else any member the
// route lists, since raftmq followers answer pulls of what they have
// applied; so it reads while the group has no leader. A follower's answer
// naming the leader moves the next reads there.
func (a *Admin) PullQueue(ctx context.Context, group string, mq MessageQueue, offset int64, maxNums int, sub *SubscriptionData) (*PullResult, error) {
	if err := a.knowQueueGroup(ctx, mq); err != nil {
		return nil, err
	}
	var res *PullResult
	at, err := a.groupCall(ctx, mq.BrokerName, func(ctx context.Context, addr string) (err error) {
		res, err = PullMessage(ctx, a.rc, addr, pullRequest(group, mq, offset, maxNums, sub))
		return err
	})
	if err != nil {
		return nil, err
	}
	if res.LeaderAddr != "" {
		a.routes.follow(mq.BrokerName, at, res.LeaderAddr)
	}
	return res, nil
}

// PullQueueAt is PullQueue at one member, addr, whatever its role.
func (a *Admin) PullQueueAt(ctx context.Context, addr, group string, mq MessageQueue, offset int64, maxNums int, sub *SubscriptionData) (*PullResult, error) {
	cctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
	defer cancel()
	return PullMessage(cctx, a.rc, addr, pullRequest(group, mq, offset, maxNums, sub))
}

// pullRequest is a one-shot pull of the admin's reading commands: not
// suspended, and with no commit offset, so it leaves no offset behind.
func pullRequest(group string, mq MessageQueue, offset int64, maxNums int, sub *SubscriptionData) *PullRequest {
	flag := int32(0)
	if sub != nil {
		flag |= wire.PullFlagSubscription
	}
	return &PullRequest{Group: group, Queue: mq, Offset: offset, MaxMsgNums: maxNums, SysFlag: flag, Subscription: sub}
}

// SearchOffset returns the first offset of mq stored at or after t
// (SEARCH_OFFSET_BY_TIMESTAMP, 29), asked where PullQueue reads.
func (a *Admin) SearchOffset(ctx context.Context, mq MessageQueue, t time.Time) (int64, error) {
	if err := a.knowQueueGroup(ctx, mq); err != nil {
		return 0, err
	}
	var off int64
	_, err := a.groupCall(ctx, mq.BrokerName, func(ctx context.Context, addr string) (err error) {
		off, err = searchOffset(ctx, a.rc, addr, mq, t.UnixMilli())
		return err
	})
	return off, err
}

// knowQueueGroup fetches mq's topic route when the routes know no member
// of mq's broker group (groupCall starts from them).
func (a *Admin) knowQueueGroup(ctx context.Context, mq MessageQueue) error {
	if a.routes.brokerAddr(mq.BrokerName) != "" {
		return nil
	}
	_, err := a.routeGroups(ctx, mq.Topic)
	return err
}
