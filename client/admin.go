package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Admin is the administration client behind `raftmq admin` (RocketMQ's
// MQAdminExt): topics, clusters, consumer progress, message lookup, offset
// resets and broker config. Name-server calls rotate over the configured
// name servers; broker calls go to group masters (raftmq Raft leaders)
// and follow a "not leader" answer to the leader it names. Every call
// takes a context; failures are typed (*BrokerError, ErrNoRoute,
// ErrNoBroker, ErrMessageNotFound).
type Admin struct {
	cfg    commonConfig
	log    *zap.Logger
	rc     *remoting.Client
	routes *routeManager
}

// NewAdmin validates the options (NameServers is required) and returns a
// ready client; Close releases its connections.
func NewAdmin(opts ...Opt) (*Admin, error) {
	cfg := defaultCommonConfig()
	for _, o := range opts {
		if o != nil {
			o.applyCommon(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := refuseTrace(cfg, "Admin"); err != nil {
		return nil, err
	}
	a := &Admin{cfg: cfg, log: cfg.log.Named("admin")}
	a.rc = remoting.NewClient(remoting.ClientConfig{DefaultTimeout: cfg.requestTimeout, TLS: cfg.tls.cfg}, cfg.log)
	cfg.sign(a.rc)
	a.routes = newRouteManager(a.rc, a.log, cfg.nameServers, cfg.requestTimeout, cfg.now)
	return a, nil
}

// Close closes the admin client's connections (calls in progress fail).
// Admin runs no background work, so there is nothing for ctx to bound; it
// is taken so that every SDK client closes alike.
func (a *Admin) Close(ctx context.Context) error { return a.rc.Close() }

// nameServerCall sends req to the name servers in turn until one answers.
func (a *Admin) nameServerCall(ctx context.Context, newReq func() *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var errs []error
	for _, addr := range a.cfg.nameServers {
		cctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
		resp, err := a.rc.InvokeSync(cctx, addr, newReq())
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			errs = append(errs, err)
			continue
		}
		if resp.Code != remoting.ResponseSuccess {
			return nil, &BrokerError{Broker: "namesrv", Addr: addr, Code: resp.Code, Remark: resp.Remark}
		}
		return resp, nil
	}
	return nil, fmt.Errorf("%w (tried %v): %w", ErrNoNameServer, a.cfg.nameServers, errors.Join(errs...))
}

// brokerCall sends the request newReq builds to addr, a broker the
// caller named, and returns the success answer; any other answer is a
// *BrokerError. A request any member answers is answered there. One the
// member refuses as its group leader's (a not-leader answer) goes on to
// that group's leader as leaderCall sends it: following the leader the
// answer names, or waiting out an election, within ctx (leaderFollowWait
// in all when ctx has no deadline). Such a request must be safe to
// repeat: one whose connection closed is sent again. An address that
// cannot be reached fails the call: nothing says the request was for its
// group's leader rather than for that member.
func (a *Admin) brokerCall(ctx context.Context, addr string, newReq func() *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	ctx, cancel := leaderWait(ctx, a.cfg.leaderFollowWait)
	defer cancel()
	cctx, ccancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
	resp, err := invokeOK(cctx, a.rc, "", addr, newReq())
	ccancel()
	if !notLeaderAnswer(err) {
		return resp, err
	}
	name, gerr := a.groupOf(ctx, addr)
	if gerr != nil {
		return nil, fmt.Errorf("%w (and its group's leader cannot be looked up: %w)", err, gerr)
	}
	a.routes.noteFailure(name, addr, err)
	resp, _, err = a.leaderCall(ctx, name, newReq)
	return resp, err
}

// groupOf returns the broker group the name servers list addr in, and
// teaches the routes the members of every group (leaderCall).
func (a *Admin) groupOf(ctx context.Context, addr string) (string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return "", err
	}
	a.storeGroups(ci)
	for name, bd := range ci.BrokerAddrTable {
		for _, member := range bd.BrokerAddrs {
			if member == addr {
				return name, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no name server lists %s in a broker group", ErrNoBroker, addr)
}

// hopCall sends req to addr and follows not-leader answers naming the
// leader (up to maxBrokerHops), each hop bounded by timeout, without
// waiting out an election: for a request that must not reach whichever
// member an election picks (LEADERSHIP_TRANSFER would move leadership off
// it again).
func (a *Admin) hopCall(ctx context.Context, timeout time.Duration, brokerName, addr string, newReq func() *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	for hop := 0; ; hop++ {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := invokeOK(cctx, a.rc, brokerName, addr, newReq())
		cancel()
		var be *BrokerError
		if err != nil && hop < maxBrokerHops && errors.As(err, &be) && be.LeaderAddr != "" && be.LeaderAddr != addr {
			addr = be.LeaderAddr
			continue
		}
		return resp, err
	}
}

// ClusterInfo returns the clusters and broker groups the name servers
// know (GET_BROKER_CLUSTER_INFO, 106).
func (a *Admin) ClusterInfo(ctx context.Context) (*wire.ClusterInfo, error) {
	resp, err := a.nameServerCall(ctx, func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestGetBrokerClusterInfo, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	return wire.DecodeClusterInfo(resp.Body)
}

// TopicList returns every topic the name servers know (206), sorted.
func (a *Admin) TopicList(ctx context.Context) ([]string, error) {
	resp, err := a.nameServerCall(ctx, func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestGetAllTopicListFromNameserver, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	var tl wire.TopicList
	if err := json.Unmarshal(resp.Body, &tl); err != nil {
		return nil, fmt.Errorf("client: topic list: %w", err)
	}
	slices.Sort(tl.TopicList)
	return tl.TopicList, nil
}

// TopicRoute returns topic's route (GET_ROUTEINFO_BY_TOPIC, 105);
// ErrNoRoute when no name server knows it.
func (a *Admin) TopicRoute(ctx context.Context, topic string) (*wire.TopicRouteData, error) {
	rd, _, err := a.routes.fetchRoute(ctx, topic)
	return rd, err
}

// clusterNames returns the broker groups of cluster ("" = every cluster)
// in ci.
func clusterNames(ci *wire.ClusterInfo, cluster string) ([]string, error) {
	if cluster == "" {
		return slices.Sorted(maps.Keys(ci.BrokerAddrTable)), nil
	}
	names, ok := ci.ClusterAddrTable[cluster]
	if !ok {
		return nil, fmt.Errorf("%w: cluster %q is unknown (clusters: %v)", ErrNoBroker, cluster, slices.Sorted(maps.Keys(ci.ClusterAddrTable)))
	}
	return slices.Sorted(slices.Values(names)), nil
}

// masters returns brokerName → master address of cluster's groups; ""
// means every cluster.
func (a *Admin) masters(ctx context.Context, cluster string) (map[string]string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	names, err := clusterNames(ci, cluster)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var missing []string
	for _, n := range names {
		if addr := ci.BrokerAddrTable[n].BrokerAddrs[wire.MasterID]; addr != "" {
			out[n] = addr
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("%w: broker groups %v have no master (leader election under way?)", ErrNoBroker, missing)
	}
	return out, nil
}

// clusterGroups returns the broker groups of cluster ("" = every
// cluster), sorted, and teaches the routes their members (leaderCall).
func (a *Admin) clusterGroups(ctx context.Context, cluster string) ([]string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	names, err := clusterNames(ci, cluster)
	if err != nil {
		return nil, err
	}
	a.storeGroups(ci)
	return names, nil
}

// storeGroups teaches the routes the members of every group of ci.
func (a *Admin) storeGroups(ci *wire.ClusterInfo) {
	bds := make([]wire.BrokerData, 0, len(ci.BrokerAddrTable))
	for _, bd := range ci.BrokerAddrTable {
		bds = append(bds, bd)
	}
	a.routes.storeGroups(bds)
}

// routeGroups returns the broker groups of topic's route, sorted, and
// teaches the routes their members (leaderCall).
func (a *Admin) routeGroups(ctx context.Context, topic string) ([]string, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	a.routes.storeGroups(rd.BrokerDatas)
	var names []string
	for _, bd := range rd.BrokerDatas {
		if len(bd.BrokerAddrs) > 0 {
			names = append(names, bd.BrokerName)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: topic %q has no broker group in its route", ErrNoBroker, topic)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// leaderCall sends the request newReq builds to the leader of brokerName
// (a group clusterGroups or routeGroups returned) and returns the success
// answer and the address that gave it. It rides out a leader change as
// the producer does (onLeader), asking the name servers for the group's
// members between tries, within ctx (leaderFollowWait when ctx has no
// deadline). For idempotent requests only: one whose connection closed is
// sent again.
func (a *Admin) leaderCall(ctx context.Context, brokerName string, newReq func() *remoting.RemotingCommand) (*remoting.RemotingCommand, string, error) {
	var resp *remoting.RemotingCommand
	at, err := a.groupCall(ctx, brokerName, func(ctx context.Context, addr string) (err error) {
		resp, err = invokeOK(ctx, a.rc, brokerName, addr, newReq())
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return resp, at, nil
}

// groupCall runs call at the member of brokerName the routes choose
// (routeManager.brokerAddr: the leader, else the route's master, else any
// member) and returns the address that answered. A request only the
// leader answers thus reaches the leader; one any member answers (a pull,
// an offset lookup) is answered by a follower while the group has no
// leader. It rides out members that are down or electing as leaderCall
// does.
func (a *Admin) groupCall(ctx context.Context, brokerName string, call func(ctx context.Context, addr string) error) (string, error) {
	var at string
	err := onLeader(ctx, a.routes, brokerName, a.cfg.requestTimeout, a.cfg.leaderFollowWait, a.groupFailed(brokerName),
		func(ctx context.Context, addr string) error {
			at = addr
			return call(ctx, addr)
		})
	return at, err
}

// groupFailed is onLeader's failure hook for brokerName's calls: it
// records what the failure says about the group's leader and, when
// another try may do better, refreshes the members from the name servers.
func (a *Admin) groupFailed(brokerName string) func(ctx context.Context, addr string, err error) bool {
	return func(ctx context.Context, addr string, err error) bool {
		_, retry := a.routes.noteFailure(brokerName, addr, err)
		if retry {
			if ci, cerr := a.ClusterInfo(ctx); cerr == nil {
				a.storeGroups(ci)
			}
		}
		return retry
	}
}

// eachLeader sends the request newReq builds to the leader of every group
// of names side by side, all under one wait for elections (leaderWait): a
// group without a leader must not spend the time of the groups after it.
// It returns the addresses that answered and the errors, both in names'
// order.
func (a *Admin) eachLeader(ctx context.Context, names []string, newReq func() *remoting.RemotingCommand) ([]string, error) {
	ctx, cancel := leaderWait(ctx, a.cfg.leaderFollowWait)
	defer cancel()
	addrs := make([]string, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { _, addrs[i], errs[i] = a.leaderCall(ctx, name, newReq) })
	}
	wg.Wait()
	var done []string
	for i := range names {
		if errs[i] == nil {
			done = append(done, addrs[i])
		}
	}
	return done, errors.Join(errs...)
}

// TopicSpec describes a topic to create or update.
type TopicSpec struct {
	// Topic is the topic's name (Validators.checkTopic rules).
	Topic string
	// ReadQueueNums and WriteQueueNums are the queues consumers read and
	// producers write; equal unless queues are being added or retired.
	ReadQueueNums, WriteQueueNums int
	// Perm is the wire.Perm* bits (default 6, read-write).
	Perm int
	// Order marks an ordered topic.
	Order bool
	// SysFlag is the topic's wire.TopicSysFlag* bits (mqadmin updateTopic
	// -u and -s); brokers store and route them.
	SysFlag int
	// Attributes alters RocketMQ 5's topic attributes (mqadmin updateTopic
	// -a): "+key=value,…" adds or changes, "-key" deletes; empty leaves
	// them. Brokers refuse what raftmq does not implement (docs/admin.md).
	Attributes string
}

// CreateTopic creates or updates a topic (UPDATE_AND_CREATE_TOPIC, 17) on
// the master of every broker group of cluster (mqadmin updateTopic -c),
// or only at brokerAddr when it is set (-b). It returns the addresses
// that accepted; failures are joined.
func (a *Admin) CreateTopic(ctx context.Context, spec TopicSpec, cluster, brokerAddr string) ([]string, error) {
	newReq, err := topicRequest(spec)
	if err != nil {
		return nil, err
	}
	if brokerAddr != "" {
		if _, err := a.brokerCall(ctx, brokerAddr, newReq); err != nil {
			return nil, err
		}
		return []string{brokerAddr}, nil
	}
	names, err := a.clusterGroups(ctx, cluster)
	if err != nil {
		return nil, err
	}
	// The request replaces the topic's whole config, so a group that
	// applied it before its answer was lost takes it again unchanged.
	return a.eachLeader(ctx, names, newReq)
}

// CreateTopicInGroup creates or updates a topic on the leader of broker
// group brokerName (a name RouteGroups or ClusterGroups returned), riding
// out an election as LeaderRequest does, and returns the leader's
// address.
func (a *Admin) CreateTopicInGroup(ctx context.Context, spec TopicSpec, brokerName string) (string, error) {
	newReq, err := topicRequest(spec)
	if err != nil {
		return "", err
	}
	if err := a.knowGroup(ctx, brokerName); err != nil {
		return "", err
	}
	_, addr, err := a.leaderCall(ctx, brokerName, newReq)
	return addr, err
}

// topicRequest validates spec and returns the UPDATE_AND_CREATE_TOPIC
// request it makes.
func topicRequest(spec TopicSpec) (func() *remoting.RemotingCommand, error) {
	if err := validateTopic(spec.Topic); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	if spec.ReadQueueNums <= 0 || spec.WriteQueueNums <= 0 {
		return nil, fmt.Errorf("%w: queue numbers must be > 0 (read %d, write %d)", ErrInvalidOption, spec.ReadQueueNums, spec.WriteQueueNums)
	}
	if spec.Perm == 0 {
		spec.Perm = wire.PermRead | wire.PermWrite
	}
	h := &wire.CreateTopicRequestHeader{Topic: spec.Topic, DefaultTopic: wire.TopicAutoCreate, ReadQueueNums: spec.ReadQueueNums,
		WriteQueueNums: spec.WriteQueueNums, Perm: spec.Perm, TopicFilterType: "SINGLE_TAG", TopicSysFlag: spec.SysFlag, Order: spec.Order,
		Attributes: spec.Attributes}
	return func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestUpdateAndCreateTopic, h, nil)
	}, nil
}

// DeleteTopic deletes topic from the masters of cluster ("" = every
// cluster; DELETE_TOPIC_IN_BROKER, 215), then from every name server
// (DELETE_TOPIC_IN_NAMESRV, 216), as mqadmin deleteTopic. As there, a
// broker's failure or refusal (the brokers' own topics) ends it before
// the name servers: they would drop the route of a topic a broker still
// holds, until its next registration brings it back.
func (a *Admin) DeleteTopic(ctx context.Context, topic, cluster string) error {
	names, err := a.clusterGroups(ctx, cluster)
	if err != nil {
		return err
	}
	if _, err := a.eachLeader(ctx, names, func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestDeleteTopicInBroker, &wire.TopicRequestHeader{Topic: topic}, nil)
	}); err != nil {
		return err
	}
	var errs []error
	for _, ns := range a.cfg.nameServers {
		cctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
		_, err := invokeOK(cctx, a.rc, "namesrv", ns, remoting.NewRequest(remoting.RequestDeleteTopicInNamesrv,
			&wire.DeleteTopicFromNamesrvRequestHeader{Topic: topic, ClusterName: cluster}, nil))
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// QueueStat is one queue's offsets in a topic status (TopicOffset).
type QueueStat struct {
	// Queue is the queue described.
	Queue MessageQueue
	// MinOffset is the oldest offset still stored, MaxOffset the next one
	// to be written: the queue holds MaxOffset-MinOffset messages.
	MinOffset, MaxOffset int64
	// LastUpdate is the store time of the last message (zero if none).
	LastUpdate time.Time
}

// TopicStatus returns the min/max offsets of every queue of topic
// (GET_TOPIC_STATS_INFO, 202, to each master of its route).
func (a *Admin) TopicStatus(ctx context.Context, topic string) ([]QueueStat, error) {
	names, err := a.routeGroups(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []QueueStat
	for _, name := range names {
		resp, _, err := a.leaderCall(ctx, name, func() *remoting.RemotingCommand {
			return remoting.NewRequest(remoting.RequestGetTopicStatsInfo, &wire.TopicRequestHeader{Topic: topic}, nil)
		})
		if err != nil {
			return nil, err
		}
		entries, err := decodeQueueTable(resp.Body, "offsetTable")
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			var v wire.TopicOffset
			if err := json.Unmarshal(e.Value, &v); err != nil {
				return nil, fmt.Errorf("client: topic stats from %s: %w", name, err)
			}
			out = append(out, QueueStat{Queue: e.Queue, MinOffset: v.MinOffset, MaxOffset: v.MaxOffset, LastUpdate: time.UnixMilli(v.LastUpdateTimestamp)})
		}
	}
	return out, nil
}

// QueueProgress is one queue's consume progress (OffsetWrapper).
type QueueProgress struct {
	// Queue is the queue described.
	Queue MessageQueue
	// BrokerOffset is the queue's max offset, ConsumerOffset the group's
	// committed one; Lag their difference.
	BrokerOffset, ConsumerOffset, Lag int64
	// LastTimestamp is the store time of the last consumed message, when
	// the broker reports it.
	LastTimestamp time.Time
}

// ConsumerProgress returns group's progress on every queue (GET_CONSUME_STATS,
// 208) of topic, or of every topic the group consumes when topic is ""
// (asked of the brokers of the group's retry topic, as mqadmin
// consumerProgress does).
func (a *Admin) ConsumerProgress(ctx context.Context, group, topic string) ([]QueueProgress, error) {
	routeTopic := topic
	if routeTopic == "" {
		routeTopic = wire.RetryTopic(group)
	}
	names, err := a.routeGroups(ctx, routeTopic)
	if err != nil {
		return nil, err
	}
	var out []QueueProgress
	for _, name := range names {
		resp, _, err := a.leaderCall(ctx, name, func() *remoting.RemotingCommand {
			return remoting.NewRequest(remoting.RequestGetConsumeStats, &wire.ConsumeStatsRequestHeader{ConsumerGroup: group, Topic: topic}, nil)
		})
		if err != nil {
			return nil, err
		}
		entries, err := decodeQueueTable(resp.Body, "offsetTable")
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			var v wire.OffsetWrapper
			if err := json.Unmarshal(e.Value, &v); err != nil {
				return nil, fmt.Errorf("client: consume stats from %s: %w", name, err)
			}
			qp := QueueProgress{Queue: e.Queue, BrokerOffset: v.BrokerOffset, ConsumerOffset: v.ConsumerOffset, Lag: max(v.BrokerOffset-v.ConsumerOffset, 0)}
			if v.LastTimestamp > 0 {
				qp.LastTimestamp = time.UnixMilli(v.LastTimestamp)
			}
			out = append(out, qp)
		}
	}
	return out, nil
}

// ViewMessage fetches a message by its offset msgId, which names the
// store host and CommitLog offset (VIEW_MESSAGE_BY_ID, 33).
func (a *Admin) ViewMessage(ctx context.Context, offsetMsgID string) (*MessageExt, error) {
	id, err := wire.ParseMessageID(offsetMsgID)
	if err != nil {
		return nil, err
	}
	addr := id.Addr.String()
	resp, err := a.brokerCall(ctx, addr, func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestViewMessageByID, &wire.ViewMessageRequestHeader{Offset: id.Offset}, nil)
	})
	if err != nil {
		var be *BrokerError
		if errors.As(err, &be) && be.Code == remoting.ResponseQueryNotFound {
			return nil, fmt.Errorf("%w: %s: %w", ErrMessageNotFound, offsetMsgID, err)
		}
		return nil, err
	}
	msgs, err := DecodeMessages(resp.Body)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrMessageNotFound, offsetMsgID)
	}
	return msgs[0], nil
}

// QueryMessageByKey finds messages of topic with key stored in [begin,
// end] (QUERY_MESSAGE, 12, to every master of the route); at most maxNum
// per broker group. ErrMessageNotFound when none has any.
func (a *Admin) QueryMessageByKey(ctx context.Context, topic, key string, maxNum int, begin, end time.Time) ([]*MessageExt, error) {
	return a.queryKey(ctx, nil, topic, key, maxNum, begin, end)
}

// QueryMessageByKeyOn is QueryMessageByKey asking only those of topic's
// broker groups that are in groups (ClusterGroups of one cluster, as
// RocketMQ's MQAdminImpl asks only its cluster's brokers: mqadmin
// queryMsgByKey -c).
func (a *Admin) QueryMessageByKeyOn(ctx context.Context, groups []string, topic, key string, maxNum int, begin, end time.Time) ([]*MessageExt, error) {
	if groups == nil {
		groups = []string{}
	}
	return a.queryKey(ctx, groups, topic, key, maxNum, begin, end)
}

// queryKey looks key up in topic's groups, only those in groups unless
// groups is nil.
func (a *Admin) queryKey(ctx context.Context, groups []string, topic, key string, maxNum int, begin, end time.Time) ([]*MessageExt, error) {
	names, err := a.routeGroups(ctx, topic)
	if err != nil {
		return nil, err
	}
	if groups != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(groups, n) })
	}
	if maxNum <= 0 {
		maxNum = 32
	}
	h := wire.QueryMessageRequestHeader{Topic: topic, Key: key, MaxNum: int32(maxNum),
		BeginTimestamp: begin.UnixMilli(), EndTimestamp: end.UnixMilli()}
	// The index is by hash: keep exact matches only.
	out, err := a.queryIndex(ctx, names, h, false, func(m *MessageExt) bool { return slices.Contains(m.Keys, key) })
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: topic %s key %q", ErrMessageNotFound, topic, key)
	}
	return out, nil
}

// queryIndex sends QUERY_MESSAGE (12) with h to the leader of each of
// names (groups routeGroups returned) and keeps the messages of h.Topic
// that match; a group that finds nothing is skipped. unique marks a
// UNIQ_KEY lookup (_UNIQUE_KEY_QUERY, as RocketMQ's client marks it).
func (a *Admin) queryIndex(ctx context.Context, names []string, h wire.QueryMessageRequestHeader, unique bool, match func(*MessageExt) bool) ([]*MessageExt, error) {
	var out []*MessageExt
	for _, name := range names {
		resp, _, err := a.leaderCall(ctx, name, func() *remoting.RemotingCommand {
			hc := h
			req := remoting.NewRequest(remoting.RequestQueryMessage, &hc, nil)
			if unique {
				req.ExtFields["_UNIQUE_KEY_QUERY"] = "true"
			}
			return req
		})
		var be *BrokerError
		if errors.As(err, &be) && be.Code == remoting.ResponseQueryNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		msgs, err := DecodeMessages(resp.Body)
		if err != nil && len(msgs) == 0 {
			return nil, err
		}
		for _, m := range msgs {
			if m.Topic == h.Topic && match(m) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// ResetOffsetByTime moves group's offsets on topic to the first message
// stored at or after ts. It asks each master to do it and tell the live
// consumers (INVOKE_BROKER_TO_RESET_OFFSET, 222, which brokers relay as
// RESET_CONSUMER_CLIENT_OFFSET, 220); a broker that does not support that
// gets the old way: SEARCH_OFFSET_BY_TIMESTAMP (29) and
// UPDATE_CONSUMER_OFFSET (15) per queue — then running consumers must be
// stopped first, or they commit their own offsets over the reset. With
// force false an offset only moves backwards (to re-consume), as mqadmin.
func (a *Admin) ResetOffsetByTime(ctx context.Context, group, topic string, ts time.Time, force bool) (map[MessageQueue]int64, error) {
	names, err := a.routeGroups(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[MessageQueue]int64{}
	for _, name := range names {
		// Resetting to a time is idempotent: a repeat finds the same offsets.
		resp, _, err := a.leaderCall(ctx, name, func() *remoting.RemotingCommand {
			return remoting.NewRequest(remoting.RequestInvokeBrokerToResetOffset, &wire.ResetOffsetRequestHeader{Topic: topic, Group: group, Timestamp: ts.UnixMilli(), IsForce: force, QueueID: -1, Offset: -1}, nil)
		})
		var be *BrokerError
		if errors.As(err, &be) && be.Code == remoting.ResponseRequestCodeNotSupported {
			if err := a.resetOffsetDirect(ctx, name, be.Addr, group, topic, ts, force, out); err != nil {
				return out, err
			}
			continue
		}
		if err != nil {
			return out, err
		}
		entries, err := decodeQueueTable(resp.Body, "offsetTable")
		if err != nil {
			return out, err
		}
		for _, e := range entries {
			off, err := strconv.ParseInt(string(e.Value), 10, 64)
			if err != nil {
				return out, fmt.Errorf("client: reset offset answer from %s: %w", name, err)
			}
			out[e.Queue] = off
		}
	}
	return out, nil
}

func (a *Admin) resetOffsetDirect(ctx context.Context, brokerName, addr, group, topic string, ts time.Time, force bool, out map[MessageQueue]int64) error {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return err
	}
	store := NewRemoteOffsetStore(group, a.rc, func(string) string { return addr })
	for _, mq := range subscribeQueues(topic, rd) {
		if mq.BrokerName != brokerName {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
		target, err := searchOffset(cctx, a.rc, addr, mq, ts.UnixMilli())
		cancel()
		if err != nil {
			return err
		}
		if !force {
			cur, err := store.Read(ctx, mq, ReadFromStore)
			if err == nil && cur <= target {
				continue
			}
		}
		store.Update(mq, target, false)
		if err := store.Persist(ctx, []MessageQueue{mq}); err != nil {
			return err
		}
		out[mq] = target
	}
	return nil
}

// BrokerConfig reads a broker's configuration (GET_BROKER_CONFIG, 26),
// which brokers answer as Java properties text.
func (a *Admin) BrokerConfig(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.brokerCall(ctx, addr, func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestGetBrokerConfig, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	return parseConfigAnswer(addr, resp.Body)
}

// UpdateBrokerConfig sends key=value updates (UPDATE_BROKER_CONFIG, 25)
// as properties text (ConfigUpdateBody). A broker refuses a key it cannot
// change at runtime with a *BrokerError naming the keys it can.
func (a *Admin) UpdateBrokerConfig(ctx context.Context, addr string, kv map[string]string) error {
	body, err := ConfigUpdateBody(kv)
	if err != nil {
		return err
	}
	_, err = a.brokerCall(ctx, addr, func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestUpdateBrokerConfig, nil, body)
	})
	return err
}

// ConfigUpdateBody is the body of UPDATE_BROKER_CONFIG or
// UPDATE_NAMESRV_CONFIG: kv as Java properties text, escaped so the
// server's Properties.load reads every value back as given. A key or
// value with a line break is ErrInvalidOption: RocketMQ writes its config
// answers and its stored config file unescaped (MixAll.properties2String),
// so a RocketMQ server would keep such a value cut at the line break.
func ConfigUpdateBody(kv map[string]string) ([]byte, error) {
	for k, v := range kv {
		if strings.ContainsAny(k+v, "\r\n") {
			return nil, fmt.Errorf("%w: config %s=%q: a line break cannot be carried in RocketMQ's config text", ErrInvalidOption, k, v)
		}
	}
	var b bytes.Buffer
	if err := config.WriteProperties(&b, kv); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// parseConfigAnswer reads a GET_BROKER_CONFIG or GET_NAMESRV_CONFIG body,
// Java properties text as RocketMQ's tools read it
// (MixAll.string2Properties).
func parseConfigAnswer(addr string, body []byte) (map[string]string, error) {
	kv, err := config.ParseProperties(body)
	if err != nil {
		return nil, fmt.Errorf("client: config answer from %s is not properties text: %w", addr, err)
	}
	return kv, nil
}

// UpdateSubscriptionGroup creates or updates a subscription group
// (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 200) on every master of cluster,
// or only at brokerAddr when set, and returns the addresses that accepted
// (failures are joined), as CreateTopic does. sg replaces the whole group
// config: start from wire.DefaultSubscriptionGroupConfig, since a zero
// ConsumeEnable disables the group's pulls.
func (a *Admin) UpdateSubscriptionGroup(ctx context.Context, sg wire.SubscriptionGroupConfig, cluster, brokerAddr string) ([]string, error) {
	if sg.GroupName == "" {
		return nil, fmt.Errorf("%w: subscription group without a name", ErrInvalidOption)
	}
	body, _ := json.Marshal(&sg)
	newReq := func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body)
	}
	if brokerAddr != "" {
		if _, err := a.brokerCall(ctx, brokerAddr, newReq); err != nil {
			return nil, err
		}
		return []string{brokerAddr}, nil
	}
	names, err := a.clusterGroups(ctx, cluster)
	if err != nil {
		return nil, err
	}
	// sg replaces the group's whole config: a repeat changes nothing.
	return a.eachLeader(ctx, names, newReq)
}
