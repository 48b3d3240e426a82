package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Topic, group and stats commands of mqadmin (rows in admin_parity.go).

func runUpdateTopicPerm(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
	topic, perm := in.str("topic"), in.int("perm")
	if perm != wire.PermRead && perm != wire.PermWrite && perm != wire.PermRead|wire.PermWrite {
		return nil, fmt.Errorf("%w: -p %d: want 2 (write), 4 (read) or 6 (read-write)", errAdminUsage, perm)
	}
	rd, err := s.a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	targets, err := s.groupTargets(ctx, in.str("brokerAddr"), in.str("clusterName"))
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, t := range targets {
		qd, ok := queueDataOf(rd, t.name, t.addr)
		if !ok {
			continue // the topic is not on this group
		}
		spec := client.TopicSpec{Topic: topic, ReadQueueNums: qd.ReadQueueNums, WriteQueueNums: qd.WriteQueueNums, Perm: perm, SysFlag: qd.TopicSysFlag}
		addr := t.addr
		if addr != "" {
			_, err = s.a.CreateTopic(ctx, spec, "", addr)
		} else {
			addr, err = s.a.CreateTopicInGroup(ctx, spec, t.name)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, addr)
	}
	if len(done) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("%w: topic %s has no queues on the chosen broker(s)", errNotFound, topic)
	}
	return done, partial(len(done), errs)
}

// queueDataOf finds the route's queue layout of the group named name, or
// of the group addr belongs to.
func queueDataOf(rd *wire.TopicRouteData, name, addr string) (wire.QueueData, bool) {
	for _, b := range rd.BrokerDatas {
		if (name != "" && b.BrokerName == name) || (addr != "" && slices.Contains(slices.Collect(maps.Values(b.BrokerAddrs)), addr)) {
			for _, q := range rd.QueueDatas {
				if q.BrokerName == b.BrokerName {
					return q, true
				}
			}
		}
	}
	return wire.QueueData{}, false
}

func runTopicClusterList(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
	rd, err := s.a.TopicRoute(ctx, in.str("topic"))
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, b := range rd.BrokerDatas {
		set[b.Cluster] = true
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// consumeStatsRow is one queue of brokerConsumeStats.
type consumeStatsRow struct {
	Topic          string `json:"topic"`
	Group          string `json:"group"`
	BrokerName     string `json:"brokerName"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"`
	Diff           int64  `json:"diff"`
	LastTimestamp  int64  `json:"lastTimestamp"`
}

func runBrokerConsumeStats(ctx context.Context, s *adminSession, in flagValues) ([]consumeStatsRow, error) {
	// Any member answers (consume offsets are replicated), as mqadmin asks
	// the address given.
	resp, err := s.memberRequest(ctx, in.str("brokerAddr"), remoting.RequestGetBrokerConsumeStats,
		&wire.GetConsumeStatsInBrokerHeader{IsOrder: in.bool("order")})
	if err != nil {
		return nil, err
	}
	l, err := wire.DecodeConsumeStatsList(resp.Body)
	if err != nil {
		return nil, err
	}
	out := []consumeStatsRow{}
	for _, m := range l.ConsumeStatsList {
		for group, list := range m {
			for _, cs := range list {
				for k, ow := range cs.OffsetTable {
					mq, err := wire.ParseQueueKey(k)
					if err != nil {
						return nil, err
					}
					diff := ow.BrokerOffset - ow.ConsumerOffset
					if diff < in.int64("level") {
						continue
					}
					out = append(out, consumeStatsRow{mq.Topic, group, mq.BrokerName, mq.QueueID, ow.BrokerOffset, ow.ConsumerOffset, diff, ow.LastTimestamp})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b consumeStatsRow) int {
		return cmpAll(strings.Compare(a.Topic, b.Topic), strings.Compare(a.Group, b.Group), strings.Compare(a.BrokerName, b.BrokerName), int(a.QueueID-b.QueueID))
	})
	return out, nil
}

// cmpAll is the first non-zero comparison.
func cmpAll(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}

// statsRow is one topic/group line of statsAll.
type statsRow struct {
	Topic        string  `json:"topic"`
	Group        string  `json:"group,omitempty"`
	Accumulation int64   `json:"accumulation"`
	InTPS        float64 `json:"inTps"`
	OutTPS       float64 `json:"outTps"`
	InMsg24Hour  int64   `json:"inMsg24Hour"`
	OutMsg24Hour int64   `json:"outMsg24Hour"`
}

// brokerStats reads one VIEW_BROKER_STATS_DATA item of brokerName's
// leader, which counts the group's sends; a key nothing was counted under
// is zero, as mqadmin treats it.
func (s *adminSession) brokerStats(ctx context.Context, brokerName, name, key string) (wire.BrokerStatsData, error) {
	resp, _, err := s.a.LeaderRequest(ctx, brokerName, remoting.RequestViewBrokerStatsData,
		&wire.ViewBrokerStatsDataRequestHeader{StatsName: name, StatsKey: key}, nil)
	var be *client.BrokerError
	if errors.As(err, &be) && be.Code == remoting.ResponseSystemError {
		return wire.BrokerStatsData{}, nil
	}
	if err != nil {
		return wire.BrokerStatsData{}, err
	}
	var d wire.BrokerStatsData
	return d, json.Unmarshal(resp.Body, &d)
}

// runStatsAll is mqadmin statsAll: per topic, its put rate and day count
// summed over its groups' leaders, then per consuming group the same for
// gets and its lag. Like mqadmin it bounds each request, not the command
// (a cluster's topics take as many requests as they take), and a group
// that cannot be read is left out of its topics' sums; unlike mqadmin, a
// group that did not answer is not asked again for the later topics (a
// hung group would cost a timeout per topic), and the command names each
// topic and group left out and exits non-zero after printing the rows.
func runStatsAll(ctx context.Context, s *adminSession, in flagValues) ([]statsRow, error) {
	active := in.bool("activeTopic")
	topics := []string{in.str("topic")}
	if topics[0] == "" {
		rctx, cancel := s.request(ctx)
		var err error
		topics, err = s.a.TopicList(rctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	out := []statsRow{}
	var errs []error
	failed := map[string]string{} // group → the topic it failed for
	for _, t := range topics {
		if strings.HasPrefix(t, wire.RetryGroupTopicPrefix) || strings.HasPrefix(t, wire.DLQGroupTopicPrefix) {
			continue
		}
		rows, err := s.topicStats(ctx, t, active, failed)
		out = append(out, rows...)
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t, err))
		}
	}
	if len(errs) > 0 {
		return out, partialFailure{errors.Join(errs...)}
	}
	return out, nil
}

// request bounds one request of a command that bounds its requests
// rather than the whole command (perRequest).
func (s *adminSession) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.f.timeout)
}

// topicStats is statsAll's rows for topic t, summed over the groups that
// answered, and an error naming each group that did not. A group that
// fails one request is not asked again for t; one that gave no answer
// (down, hung: not a refusal it answered) is recorded in failed (group →
// topic) and not asked again in this run either, so a hung group costs
// one request timeout per command, not one per topic. A topic no group
// answered for has no rows.
func (s *adminSession) topicStats(ctx context.Context, t string, active bool, failed map[string]string) ([]statsRow, error) {
	rctx, cancel := s.request(ctx)
	names, err := s.a.RouteGroups(rctx, t)
	cancel()
	if errors.Is(err, client.ErrNoRoute) {
		return nil, nil // deleted since the topic list: nothing to show
	}
	if err != nil {
		return nil, err
	}
	var errs []error
	unread := map[string]bool{} // of names, for t
	fail := func(name string, err error) {
		unread[name] = true
		var be *client.BrokerError
		if !errors.As(err, &be) {
			failed[name] = t // no answer: down or hung, not a refusal
		}
		errs = append(errs, fmt.Errorf("group %s: %w", name, err))
	}
	for _, name := range names {
		if at, ok := failed[name]; ok {
			unread[name] = true
			errs = append(errs, fmt.Errorf("group %s: not asked, it failed for topic %s", name, at))
		}
	}
	stats := func(name, item, key string) (wire.BrokerStatsData, bool) {
		if unread[name] {
			return wire.BrokerStatsData{}, false
		}
		rctx, cancel := s.request(ctx)
		defer cancel()
		d, err := s.brokerStats(rctx, name, item, key)
		if err != nil {
			fail(name, err)
			return d, false
		}
		return d, true
	}
	base := statsRow{Topic: t}
	groups := map[string]bool{}
	for _, name := range names {
		d, ok := stats(name, wire.StatsTopicPutNums, t)
		if !ok {
			continue
		}
		base.InTPS += d.StatsMinute.Tps
		base.InMsg24Hour += d.StatsDay.Sum
		gl, err := s.consumeByWho(ctx, name, t)
		if err != nil {
			fail(name, err)
			continue
		}
		for _, g := range gl {
			groups[g] = true
		}
	}
	if len(unread) == len(names) {
		return nil, errors.Join(errs...)
	}
	if len(groups) == 0 {
		if !active || base.InMsg24Hour > 0 {
			return []statsRow{base}, errors.Join(errs...)
		}
		return nil, errors.Join(errs...)
	}
	var out []statsRow
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		r := base
		r.Group = g
		for _, name := range names {
			if d, ok := stats(name, wire.StatsGroupGetNums, t+"@"+g); ok {
				r.OutTPS += d.StatsMinute.Tps
				r.OutMsg24Hour += d.StatsDay.Sum
			}
		}
		rctx, cancel := s.request(ctx)
		if qs, err := s.a.ConsumerProgress(rctx, g, t); err == nil {
			for _, q := range qs {
				r.Accumulation += q.Lag
			}
		}
		cancel()
		if !active || r.InMsg24Hour > 0 || r.OutMsg24Hour > 0 {
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// consumeByWho is the consumer groups broker group name knows for topic t
// (QUERY_TOPIC_CONSUME_BY_WHO at its leader).
func (s *adminSession) consumeByWho(ctx context.Context, name, t string) ([]string, error) {
	ctx, cancel := s.request(ctx)
	defer cancel()
	resp, addr, err := s.a.LeaderRequest(ctx, name, remoting.RequestQueryTopicConsumeByWho,
		&wire.QueryTopicConsumeByWhoRequestHeader{Topic: t}, nil)
	if err != nil {
		return nil, err
	}
	var gl wire.GroupList
	if err := json.Unmarshal(resp.Body, &gl); err != nil {
		return nil, fmt.Errorf("QUERY_TOPIC_CONSUME_BY_WHO answer of %s: %w", addr, err)
	}
	return gl.GroupList, nil
}

// subGroupDeletion is deleteSubGroup's result: the addresses the group
// was deleted from. Its JSON is that list alone.
type subGroupDeletion struct {
	group, cluster string // cluster is -c's, "" with -b
	addrs          []string
}

// MarshalJSON encodes the addresses alone.
func (d subGroupDeletion) MarshalJSON() ([]byte, error) { return json.Marshal(d.addrs) }

// tableDeleteSubGroup prints mqadmin's line per broker
// (DeleteSubscriptionGroupCommand): -c's names the cluster too.
func tableDeleteSubGroup(w *tabwriter.Writer, d subGroupDeletion) {
	for _, a := range d.addrs {
		if d.cluster == "" {
			fmt.Fprintf(w, "delete subscription group [%s] from broker [%s] success.\n", d.group, a)
		} else {
			fmt.Fprintf(w, "delete subscription group [%s] from broker [%s] in cluster [%s] success.\n", d.group, a, d.cluster)
		}
	}
}

func runDeleteSubGroup(ctx context.Context, s *adminSession, in flagValues) (subGroupDeletion, error) {
	group := in.str("groupName")
	d := subGroupDeletion{group: group, cluster: in.str("clusterName"), addrs: []string{}}
	targets, err := s.groupTargets(ctx, in.str("brokerAddr"), d.cluster)
	if err != nil {
		return d, err
	}
	var errs []error
	for _, t := range targets {
		_, addr, err := s.leaderRequest(ctx, t, remoting.RequestDeleteSubscriptionGroup, &wire.DeleteSubscriptionGroupRequestHeader{
			GroupName: group, CleanOffset: in.bool("removeOffset")})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.addrs = append(d.addrs, addr)
	}
	// With -c, mqadmin also deletes the group's retry and DLQ topics from
	// the cluster's brokers and the name servers; a group that never had
	// them is fine. With -b it deletes the group's config only: the DLQ
	// may hold messages still to resend, and other brokers' groups may
	// still use both topics.
	if d.cluster == "" {
		return d, partial(len(d.addrs), errs)
	}
	for _, t := range []string{wire.RetryGroupTopicPrefix + group, wire.DLQGroupTopicPrefix + group} {
		if _, err := s.a.TopicRoute(ctx, t); err != nil {
			continue
		}
		if err := s.a.DeleteTopic(ctx, t, d.cluster); err != nil {
			errs = append(errs, err)
		}
	}
	return d, partial(len(d.addrs), errs)
}

// consumerConnection asks addr, or the leaders of the group's retry topic
// in turn (consumers heartbeat to leaders only), for the group's
// connections (GET_CONSUMER_CONNECTION_LIST); it also returns the address
// that answered, which holds those connections.
func (s *adminSession) consumerConnection(ctx context.Context, group, addr string) (*wire.ConsumerConnection, string, error) {
	targets := []groupTarget{{addr: addr}}
	if addr == "" {
		names, err := s.a.RouteGroups(ctx, wire.RetryGroupTopicPrefix+group)
		if err != nil {
			return nil, "", fmt.Errorf("%w: consumer group %s has no retry topic route (never started?): %v", errNotFound, group, err)
		}
		targets = targets[:0]
		for _, n := range names {
			targets = append(targets, groupTarget{name: n})
		}
	}
	var errs []error
	for _, t := range targets {
		resp, a, err := s.leaderRequest(ctx, t, remoting.RequestGetConsumerConnectionList, &wire.ConsumerGroupRequestHeader{ConsumerGroup: group})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var cc wire.ConsumerConnection
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			return nil, "", fmt.Errorf("consumer connection answer of %s: %w", a, err)
		}
		return &cc, a, nil
	}
	return nil, "", errors.Join(errs...)
}

func tableConsumerConnection(w *tabwriter.Writer, cc *wire.ConsumerConnection) {
	for i, c := range cc.ConnectionSet {
		fmt.Fprintf(w, "%03d  %-32s %-22s %-8s %s\n", i+1, c.ClientID, c.ClientAddr, c.Language, versionDesc(c.Version))
	}
	fmt.Fprintln(w, "\nBelow is subscription:")
	i := 0
	for _, t := range slices.Sorted(maps.Keys(cc.SubscriptionTable)) {
		i++
		fmt.Fprintf(w, "%03d  Topic: %-40s SubExpression: %s\n", i, t, cc.SubscriptionTable[t].SubString)
	}
	fmt.Fprintf(w, "\nConsumeType: %s\nMessageModel: %s\nConsumeFromWhere: %s\n", cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere)
}

// versionDesc names a client protocol version ("V4_9_4") when it is one
// raftmq knows, else prints the number.
func versionDesc(v int) string {
	if v == 401 {
		return "V4_9_4"
	}
	return strconv.Itoa(v)
}

func runProducerConnection(ctx context.Context, s *adminSession, in flagValues) (*wire.ProducerConnection, error) {
	group := in.str("producerGroup")
	names, err := s.a.RouteGroups(ctx, in.str("topic"))
	if err != nil {
		return nil, err
	}
	out := &wire.ProducerConnection{ConnectionSet: []wire.Connection{}}
	seen := map[string]bool{}
	var errs []error
	for _, name := range names {
		// Producers heartbeat to leaders only.
		resp, addr, err := s.a.LeaderRequest(ctx, name, remoting.RequestGetProducerConnectionList,
			&wire.GetProducerConnectionListRequestHeader{ProducerGroup: group}, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var pc wire.ProducerConnection
		if err := json.Unmarshal(resp.Body, &pc); err != nil {
			return nil, fmt.Errorf("producer connection answer of %s: %w", addr, err)
		}
		for _, c := range pc.ConnectionSet {
			if !seen[c.ClientID] {
				seen[c.ClientID] = true
				out.ConnectionSet = append(out.ConnectionSet, c)
			}
		}
	}
	if len(out.ConnectionSet) == 0 {
		return nil, fmt.Errorf("%w: no producer of group %s is connected to the brokers of topic %s: %w", errNotFound, group, in.str("topic"), errors.Join(errs...))
	}
	return out, nil
}

// consumerStatus is one client's answer of consumerStatus.
type consumerStatus struct {
	ClientID   string                    `json:"clientId"`
	ClientAddr string                    `json:"clientAddr"`
	Info       *wire.ConsumerRunningInfo `json:"info"`
	Queues     []consumerQueueStatus     `json:"queues"`
}

// consumerQueueStatus is one queue of a client's running info.
type consumerQueueStatus struct {
	Queue wire.MessageQueue     `json:"queue"`
	State wire.ProcessQueueInfo `json:"state"`
}

// runConsumerStatus is mqadmin consumerStatus: the group's connections,
// then each client's (or -i's) GET_CONSUMER_RUNNING_INFO through the
// broker it is connected to.
func runConsumerStatus(ctx context.Context, s *adminSession, in flagValues) ([]consumerStatus, error) {
	group := in.str("consumerGroup")
	cc, broker, err := s.consumerConnection(ctx, group, in.str("brokerAddr"))
	if err != nil {
		return nil, err
	}
	var out []consumerStatus
	for _, c := range cc.ConnectionSet {
		if id := in.str("clientId"); id != "" && id != c.ClientID {
			continue
		}
		ri, err := s.runningInfo(ctx, broker, group, c.ClientID, in.bool("jstack"))
		if err != nil {
			return out, err
		}
		st := consumerStatus{ClientID: c.ClientID, ClientAddr: c.ClientAddr, Info: ri}
		for _, e := range ri.MqTable {
			var pq wire.ProcessQueueInfo
			if err := json.Unmarshal(e.Value, &pq); err != nil {
				return out, fmt.Errorf("running info of %s: queue %v: %w", c.ClientID, e.Queue, err)
			}
			st.Queues = append(st.Queues, consumerQueueStatus{Queue: e.Queue, State: pq})
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: consumer group %s has no client %q online", errNotFound, group, in.str("clientId"))
	}
	return out, nil
}

// runningInfo asks a client of group, through the broker it is connected
// to, for its running info (GET_CONSUMER_RUNNING_INFO, relayed to the
// client).
func (s *adminSession) runningInfo(ctx context.Context, broker, group, clientID string, jstack bool) (*wire.ConsumerRunningInfo, error) {
	resp, err := s.a.BrokerRequest(ctx, broker, remoting.RequestGetConsumerRunningInfo,
		&wire.GetConsumerRunningInfoRequestHeader{ConsumerGroup: group, ClientID: clientID, JstackEnable: jstack}, nil)
	if err != nil {
		return nil, err
	}
	return wire.DecodeConsumerRunningInfo(resp.Body)
}

// queueOwners maps each queue a client of group holds to that client's
// IP, the part of its client id before '@', as mqadmin consumerProgress -s
// builds it from the group's connections and each one's running info. A
// group with no client online holds no queue; a client that does not
// answer for its running info (an SDK without it, or gone meanwhile)
// leaves its queues unknown (N/A) rather than failing the progress, as in
// mqadmin.
func (s *adminSession) queueOwners(ctx context.Context, group string) (map[client.MessageQueue]string, error) {
	cc, broker, err := s.consumerConnection(ctx, group, "")
	var be *client.BrokerError
	if errors.Is(err, errNotFound) || errors.As(err, &be) && be.Code == remoting.ResponseConsumerNotOnline {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	owners := map[client.MessageQueue]string{}
	for _, c := range cc.ConnectionSet {
		ri, err := s.runningInfo(ctx, broker, group, c.ClientID, false)
		if err != nil {
			s.f.logger().Debug("consumerProgress -s: no running info; its queues show N/A",
				zap.String("client", c.ClientID), zap.Error(err))
			continue
		}
		ip, _, _ := strings.Cut(c.ClientID, "@")
		for _, e := range ri.MqTable {
			owners[client.MessageQueue{Topic: e.Queue.Topic, BrokerName: e.Queue.BrokerName, QueueID: int(e.Queue.QueueID)}] = ip
		}
	}
	return owners, nil
}

func tableConsumerStatus(w *tabwriter.Writer, rs []consumerStatus) {
	for i, r := range rs {
		fmt.Fprintf(w, "%03d  %-40s %-22s\n", i+1, r.ClientID, r.ClientAddr)
	}
	for _, r := range rs {
		fmt.Fprintf(w, "\n#Consumer Properties# %s\n", r.ClientID)
		for _, k := range slices.Sorted(maps.Keys(r.Info.Properties)) {
			row(w, k+":", r.Info.Properties[k])
		}
		fmt.Fprintln(w, "\n#Consumer Subscription#")
		for i, sd := range r.Info.SubscriptionSet {
			fmt.Fprintf(w, "%03d Topic: %-40s ClassFilter: %-8v SubExpression: %s\n", i+1, sd.Topic, sd.ClassFilterMode, sd.SubString)
		}
		fmt.Fprintln(w, "\n#Consumer Offset#")
		row(w, "#Topic", "#Broker Name", "#QID", "#Consumer Offset", "#Cached", "#Locked")
		for _, q := range r.Queues {
			row(w, q.Queue.Topic, q.Queue.BrokerName, q.Queue.QueueID, q.State.CommitOffset, q.State.CachedMsgCount, q.State.Locked)
		}
	}
}

func runCloneGroupOffset(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
	names, err := s.a.RouteGroups(ctx, in.str("topic"))
	if err != nil {
		return nil, err
	}
	h := &wire.CloneGroupOffsetRequestHeader{SrcGroup: in.str("srcGroup"), DestGroup: in.str("destGroup"), Topic: in.str("topic"), Offline: in.bool("offline")}
	var done []string
	var errs []error
	for _, name := range names {
		// The clone commits offsets: a replicated write, the leader's.
		resp, addr, err := s.a.LeaderRequest(ctx, name, remoting.RequestCloneGroupOffset, h, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.Remark != "" {
			// The broker leaves out a topic it has no config for and,
			// without -o, one the source group's online consumers do not
			// subscribe to, and says so here.
			errs = append(errs, fmt.Errorf("%s (%s): %s", name, addr, resp.Remark))
			continue
		}
		done = append(done, addr)
	}
	return done, partial(len(done), errs)
}

// runSkipAccumulated is mqadmin skipAccumulatedMessage: a reset to
// timestamp -1, which brokers take as each queue's end.
func runSkipAccumulated(ctx context.Context, s *adminSession, in flagValues) ([]queueOffset, error) {
	offs, err := s.a.ResetOffsetByTime(ctx, in.str("group"), in.str("topic"), time.UnixMilli(-1), in.bool("force"))
	out := []queueOffset{}
	for mq, off := range offs {
		out = append(out, queueOffset{mq.BrokerName, mq.QueueID, off})
	}
	slices.SortFunc(out, func(a, b queueOffset) int {
		return cmpAll(strings.Compare(a.BrokerName, b.BrokerName), a.QueueID-b.QueueID)
	})
	return out, partial(len(out), []error{err})
}

func runAllocateMQ(ctx context.Context, s *adminSession, in flagValues) (map[string][]client.MessageQueue, error) {
	topic := in.str("topic")
	rd, err := s.a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	var mqs []client.MessageQueue
	for _, q := range rd.QueueDatas {
		for i := range q.ReadQueueNums {
			mqs = append(mqs, client.MessageQueue{Topic: topic, BrokerName: q.BrokerName, QueueID: i})
		}
	}
	client.SortQueues(mqs)
	ids := strings.Split(in.str("ipList"), ",")
	slices.Sort(ids)
	out := map[string][]client.MessageQueue{}
	for _, id := range ids {
		got, err := client.AllocateAveragely().Allocate("", id, mqs, ids)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errAdminUsage, err)
		}
		out[id] = got
	}
	return out, nil
}
