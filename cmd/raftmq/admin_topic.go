package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// topicUpdate is updateTopic's result.
type topicUpdate struct {
	Topic          string   `json:"topic"`
	ReadQueueNums  int      `json:"readQueueNums"`
	WriteQueueNums int      `json:"writeQueueNums"`
	Perm           int      `json:"perm"`
	Order          bool     `json:"order"`
	SysFlag        int      `json:"topicSysFlag"`
	Attributes     string   `json:"attributes,omitempty"`
	Brokers        []string `json:"brokers"`
	// OrderConf is the order config -o true wrote on the name servers
	// (admin_order.go); cluster tells which of mqadmin's lines prints it.
	OrderConf string `json:"orderConf,omitempty"`
	cluster   bool
}

// runUpdateTopic is mqadmin updateTopic.
func runUpdateTopic(ctx context.Context, s *adminSession, in flagValues) (topicUpdate, error) {
	r := topicUpdate{Topic: in.str("topic"), ReadQueueNums: in.int("readQueueNums"), WriteQueueNums: in.int("writeQueueNums"),
		Perm: in.int("perm"), Order: in.bool("order"), Attributes: in.str("attributes")}
	// TopicSysFlag.buildSysFlag(-u, -s).
	if in.bool("unit") {
		r.SysFlag |= wire.TopicSysFlagUnit
	}
	if in.bool("hasUnitSub") {
		r.SysFlag |= wire.TopicSysFlagUnitSub
	}
	spec := client.TopicSpec{Topic: r.Topic, ReadQueueNums: r.ReadQueueNums, WriteQueueNums: r.WriteQueueNums, Perm: r.Perm, Order: r.Order,
		SysFlag: r.SysFlag, Attributes: r.Attributes}
	var err error
	r.Brokers, err = s.a.CreateTopic(ctx, spec, in.str("clusterName"), in.str("brokerAddr"))
	if err != nil || !r.Order {
		return r, partial(len(r.Brokers), []error{err})
	}
	r.cluster = in.str("clusterName") != ""
	r.OrderConf, err = s.putOrderConf(ctx, r.Topic, r.WriteQueueNums, in.str("clusterName"), in.str("brokerAddr"))
	return r, partial(len(r.Brokers), []error{err})
}

func tableUpdateTopic(w *tabwriter.Writer, r topicUpdate) {
	if r.OrderConf != "" && !r.cluster {
		fmt.Fprintf(w, "set broker orderConf. isOrder=true, orderConf=[%s]\n", r.OrderConf)
	}
	for _, a := range r.Brokers {
		fmt.Fprintf(w, "create topic to %s success.\n", a)
	}
	if r.OrderConf != "" && r.cluster {
		fmt.Fprintf(w, "set cluster orderConf. isOrder=true, orderConf=[%s]\n", r.OrderConf)
	}
	attrs := ""
	if r.Attributes != "" {
		// RocketMQ 5's TopicConfig.toString, with the map mqadmin parsed -a into.
		attrs = ", attributes={" + r.Attributes + "}"
	}
	fmt.Fprintf(w, "TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%d, topicSysFlag=%d, order=%t%s]\n",
		r.Topic, r.ReadQueueNums, r.WriteQueueNums, r.Perm, r.SysFlag, r.Order, attrs)
}

// topicDeletion is deleteTopic's result (fields in the JSON key order).
type topicDeletion struct {
	Cluster string `json:"cluster"`
	Result  string `json:"result"`
	Topic   string `json:"topic"`
}

// runDeleteTopic is mqadmin deleteTopic.
func runDeleteTopic(ctx context.Context, s *adminSession, in flagValues) (topicDeletion, error) {
	topic, cluster := in.str("topic"), in.str("clusterName")
	if err := s.a.DeleteTopic(ctx, topic, cluster); err != nil {
		return topicDeletion{}, err
	}
	return topicDeletion{Cluster: cluster, Result: "deleted", Topic: topic}, nil
}

// topicList is topicList's result; with -c, Rows holds mqadmin's
// cluster / topic / consumer group lines.
type topicList struct {
	TopicList []string          `json:"topicList"`
	Rows      []topicClusterRow `json:"clusterModel,omitempty"`
	cluster   bool
}

// topicClusterRow is one line of topicList -c.
type topicClusterRow struct {
	Cluster       string `json:"cluster"`
	Topic         string `json:"topic"`
	ConsumerGroup string `json:"consumerGroup"`
}

// runTopicList is mqadmin topicList [-c]: with -c, every topic except
// retry and DLQ ones with its cluster and each group consuming it
// (QUERY_TOPIC_CONSUME_BY_WHO), one line per group.
func runTopicList(ctx context.Context, s *adminSession, in flagValues) (topicList, error) {
	topics, err := s.a.TopicList(ctx)
	if err != nil {
		return topicList{}, err
	}
	if topics == nil {
		topics = []string{}
	}
	r := topicList{TopicList: topics, cluster: in.bool("clusterModel")}
	if !r.cluster {
		return r, nil
	}
	r.Rows = []topicClusterRow{}
	for _, t := range topics {
		if strings.HasPrefix(t, wire.RetryGroupTopicPrefix) || strings.HasPrefix(t, wire.DLQGroupTopicPrefix) {
			continue
		}
		cluster, groups := "", map[string]bool{}
		if rd, err := s.a.TopicRoute(ctx, t); err == nil && len(rd.BrokerDatas) > 0 {
			cluster = rd.BrokerDatas[0].Cluster
			for _, b := range rd.BrokerDatas {
				addr := b.BrokerAddrs[wire.MasterID]
				if addr == "" {
					continue
				}
				resp, err := s.a.BrokerRequest(ctx, addr, remoting.RequestQueryTopicConsumeByWho, &wire.QueryTopicConsumeByWhoRequestHeader{Topic: t}, nil)
				if err != nil {
					continue // as mqadmin: a topic whose groups cannot be read prints without
				}
				var gl wire.GroupList
				if json.Unmarshal(resp.Body, &gl) == nil {
					for _, g := range gl.GroupList {
						groups[g] = true
					}
				}
			}
		}
		if len(groups) == 0 {
			groups[""] = true
		}
		for _, g := range slices.Sorted(maps.Keys(groups)) {
			r.Rows = append(r.Rows, topicClusterRow{cluster, t, g})
		}
	}
	return r, nil
}

func tableTopicList(w *tabwriter.Writer, r topicList) {
	if !r.cluster {
		for _, t := range r.TopicList {
			fmt.Fprintln(w, t)
		}
		return
	}
	// mqadmin's fixed-width columns, not tab-aligned ones.
	fmt.Fprintf(w, "%-20s  %-48s  %-48s\n", "#Cluster Name", "#Topic", "#Consumer Group")
	for _, x := range r.Rows {
		fmt.Fprintf(w, "%-20s  %-64s  %-64s\n", x.Cluster, x.Topic, x.ConsumerGroup)
	}
}

// topicRoute is topicRoute's result; its JSON is the route data alone.
type topicRoute struct {
	rd   *wire.TopicRouteData
	list bool // -l: mqadmin's list format
}

// MarshalJSON encodes the route data.
func (r topicRoute) MarshalJSON() ([]byte, error) { return json.Marshal(r.rd) }

// tableTopicRoute prints what mqadmin topicRoute prints: the route data as
// indented JSON (scripts parse it), or with -l the list format.
func tableTopicRoute(w *tabwriter.Writer, r topicRoute) {
	if r.list {
		tableTopicRouteList(w, r.rd)
		return
	}
	b, err := json.MarshalIndent(r.rd, "", "  ")
	if err != nil {
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}

// topicRouteListFormat is TopicRouteSubCommand's list format.
const topicRouteListFormat = "%-45s %-32s %-50s %-10s %-11s %-5s\n"

// tableTopicRouteList is mqadmin topicRoute -l: one line per broker group
// with its members as Java prints a Map, a rule of 158 dashes, then the
// number of groups and the queue totals.
func tableTopicRouteList(w io.Writer, rd *wire.TopicRouteData) {
	queues := map[string]wire.QueueData{}
	for _, q := range rd.QueueDatas {
		queues[q.BrokerName] = q
	}
	fmt.Fprintf(w, topicRouteListFormat, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
	brokers := slices.SortedFunc(slices.Values(rd.BrokerDatas), func(a, b wire.BrokerData) int { return strings.Compare(a.BrokerName, b.BrokerName) })
	read, write := 0, 0
	for _, b := range brokers {
		q, ok := queues[b.BrokerName]
		if !ok {
			continue // no queue data for this group: nothing to print or count
		}
		read, write = read+q.ReadQueueNums, write+q.WriteQueueNums
		addrs := make([]string, 0, len(b.BrokerAddrs))
		for _, id := range slices.Sorted(maps.Keys(b.BrokerAddrs)) {
			addrs = append(addrs, fmt.Sprintf("%d=%s", id, b.BrokerAddrs[id]))
		}
		fmt.Fprintf(w, topicRouteListFormat, b.Cluster, b.BrokerName, "{"+strings.Join(addrs, ", ")+"}",
			strconv.Itoa(q.ReadQueueNums), strconv.Itoa(q.WriteQueueNums), strconv.Itoa(q.Perm))
	}
	fmt.Fprintln(w, strings.Repeat("-", 158))
	fmt.Fprintf(w, topicRouteListFormat, "Total:", strconv.Itoa(len(queues)), "", strconv.Itoa(read), strconv.Itoa(write), "")
}

// queueStatus is one row of topicStatus.
type queueStatus struct {
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	MinOffset  int64  `json:"minOffset"`
	MaxOffset  int64  `json:"maxOffset"`
	LastUpdate int64  `json:"lastUpdateTimestamp"`
}

// runTopicStatus is mqadmin topicStatus, sorted by broker and queue.
func runTopicStatus(ctx context.Context, s *adminSession, in flagValues) ([]queueStatus, error) {
	stats, err := s.a.TopicStatus(ctx, in.str("topic"))
	if err != nil {
		return nil, err
	}
	out := []queueStatus{}
	for _, q := range stats {
		out = append(out, queueStatus{q.Queue.BrokerName, q.Queue.QueueID, q.MinOffset, q.MaxOffset, max(q.LastUpdate.UnixMilli(), 0)})
	}
	slices.SortFunc(out, func(a, b queueStatus) int {
		if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
			return c
		}
		return a.QueueID - b.QueueID
	})
	return out, nil
}

// clusterMember is one row of clusterList.
type clusterMember struct {
	Cluster    string `json:"cluster"`
	BrokerName string `json:"brokerName"`
	BrokerID   int64  `json:"brokerId"`
	Addr       string `json:"addr"`
	Role       string `json:"role"`
}

// clusterMembers flattens the name server's cluster table, sorted by
// cluster, brokerName, brokerId.
func clusterMembers(ci *wire.ClusterInfo, cluster string) []clusterMember {
	out := []clusterMember{}
	for _, c := range slices.Sorted(maps.Keys(ci.ClusterAddrTable)) {
		if cluster != "" && c != cluster {
			continue
		}
		names := slices.Clone(ci.ClusterAddrTable[c])
		slices.Sort(names)
		for _, n := range names {
			bd := ci.BrokerAddrTable[n]
			for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
				role := "FOLLOWER"
				if id == wire.MasterID {
					role = "LEADER"
				}
				out = append(out, clusterMember{Cluster: c, BrokerName: n, BrokerID: id, Addr: bd.BrokerAddrs[id], Role: role})
			}
		}
	}
	return out
}

// memberTable is one broker member's key/value table (its config or its
// runtime facts); leader is its group's routed leader ("" with -b).
type memberTable struct {
	addr, leader string
	kv           map[string]string
}

// memberTables is the result of getBrokerConfig and brokerStatus: one
// member's table with -b (its JSON is the table alone), every registered
// member's with -c (JSON: address → table).
type memberTables struct {
	rows    []memberTable
	cluster bool
}

// MarshalJSON encodes the table alone (-b) or the tables by address (-c).
func (m memberTables) MarshalJSON() ([]byte, error) {
	if !m.cluster {
		if len(m.rows) == 0 {
			return json.Marshal(map[string]string{})
		}
		return json.Marshal(m.rows[0].kv)
	}
	out := map[string]map[string]string{}
	for _, r := range m.rows {
		out[r.addr] = r.kv
	}
	return json.Marshal(out)
}

// readMembers runs read on -b's broker, or with -c on every registered
// member of the cluster (leaders first, as mqadmin lists masters before
// their slaves). With -c a member that fails does not hide the others:
// they are printed and the command still fails naming it.
func readMembers(ctx context.Context, s *adminSession, in flagValues,
	read func(ctx context.Context, s *adminSession, addr string) (map[string]string, error)) (memberTables, error) {
	cluster := in.str("clusterName")
	if cluster == "" {
		kv, err := read(ctx, s, in.str("brokerAddr"))
		return memberTables{rows: []memberTable{{addr: in.str("brokerAddr"), kv: kv}}}, err
	}
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return memberTables{}, err
	}
	members := clusterMembers(ci, cluster)
	if len(members) == 0 {
		return memberTables{}, fmt.Errorf("%w: cluster %q has no registered broker", errNotFound, cluster)
	}
	r := memberTables{cluster: true}
	var errs []error
	for _, m := range members {
		kv, err := read(ctx, s, m.Addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Addr, err))
			continue
		}
		r.rows = append(r.rows, memberTable{addr: m.Addr, leader: ci.BrokerAddrTable[m.BrokerName].BrokerAddrs[wire.MasterID], kv: kv})
	}
	if len(errs) > 0 {
		return r, partialFailure{errors.Join(errs...)}
	}
	return r, nil
}

// tableBrokerConfig prints each member's config under mqadmin's heading:
// the address with -b; with -c "Master: addr" for a group's leader and
// "My Master: leader=====Slave: addr" for its followers.
func tableBrokerConfig(w *tabwriter.Writer, r memberTables) {
	for _, m := range r.rows {
		switch {
		case !r.cluster:
			fmt.Fprintf(w, "============%s============\n", m.addr)
		case m.addr == m.leader:
			fmt.Fprintf(w, "============Master: %s============\n", m.addr)
		default:
			fmt.Fprintf(w, "============My Master: %s=====Slave: %s============\n", m.leader, m.addr)
		}
		for _, k := range slices.Sorted(maps.Keys(m.kv)) {
			row(w, k, "=", m.kv[k])
		}
	}
}

// tableBrokerStatus prints "key: value" lines, with -c each prefixed by
// the member's address (mqadmin's layout).
func tableBrokerStatus(w *tabwriter.Writer, r memberTables) {
	for _, m := range r.rows {
		for _, k := range slices.Sorted(maps.Keys(m.kv)) {
			if r.cluster {
				row(w, m.addr, k+":", m.kv[k])
			} else {
				row(w, k+":", m.kv[k])
			}
		}
	}
}

// runBrokerStatus is mqadmin brokerStatus: the broker's runtime KVTable
// (GET_BROKER_RUNTIME_INFO, 28), each member's own, so asked of the
// address as mqadmin does.
func runBrokerStatus(ctx context.Context, s *adminSession, addr string) (map[string]string, error) {
	resp, err := s.memberRequest(ctx, addr, remoting.RequestGetBrokerRuntimeInfo, nil)
	if err != nil {
		return nil, err
	}
	var kv wire.KVTable
	if err := json.Unmarshal(resp.Body, &kv); err != nil {
		return nil, fmt.Errorf("brokerStatus: broker %s answered an unreadable table: %w", addr, err)
	}
	if kv.Table == nil {
		kv.Table = map[string]string{}
	}
	return kv.Table, nil
}

// clusterListing is clusterList's result: the members, or with -m
// mqadmin's "more stats" rows; its JSON is the list shown.
type clusterListing struct {
	members []clusterMember
	more    []clusterMoreStats
	isMore  bool
}

// MarshalJSON encodes the rows shown.
func (c clusterListing) MarshalJSON() ([]byte, error) {
	if c.isMore {
		return json.Marshal(c.more)
	}
	return json.Marshal(c.members)
}

// clusterMoreStats is one member's line of clusterList -m: messages in and
// out yesterday and today, from its runtime info day marks.
type clusterMoreStats struct {
	Cluster       string `json:"cluster"`
	BrokerName    string `json:"brokerName"`
	Addr          string `json:"addr"`
	InTotalYest   int64  `json:"inTotalYest"`
	OutTotalYest  int64  `json:"outTotalYest"`
	InTotalToday  int64  `json:"inTotalToday"`
	OutTotalToday int64  `json:"outTotalToday"`
}

func runClusterList(ctx context.Context, s *adminSession, in flagValues) (clusterListing, error) {
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return clusterListing{}, err
	}
	r := clusterListing{members: clusterMembers(ci, in.str("clusterName")), isMore: in.bool("moreStats")}
	if !r.isMore {
		return r, nil
	}
	r.more = []clusterMoreStats{}
	for _, m := range r.members {
		row := clusterMoreStats{Cluster: m.Cluster, BrokerName: m.BrokerName, Addr: m.Addr}
		resp, err := s.memberRequest(ctx, m.Addr, remoting.RequestGetBrokerRuntimeInfo, nil)
		if err == nil {
			var kv wire.KVTable
			if json.Unmarshal(resp.Body, &kv) == nil {
				n := func(k string) int64 { v, _ := strconv.ParseInt(kv.Table[k], 10, 64); return v }
				row.InTotalYest = n("msgPutTotalTodayMorning") - n("msgPutTotalYesterdayMorning")
				row.OutTotalYest = n("msgGetTotalTodayMorning") - n("msgGetTotalYesterdayMorning")
				row.InTotalToday = n("msgPutTotalTodayNow") - n("msgPutTotalTodayMorning")
				row.OutTotalToday = n("msgGetTotalTodayNow") - n("msgGetTotalTodayMorning")
			}
		}
		// As mqadmin, a member that does not answer shows zeros.
		r.more = append(r.more, row)
	}
	return r, nil
}

func tableClusterList(w *tabwriter.Writer, r clusterListing) {
	if !r.isMore {
		columns([]any{"#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Role"}, func(m clusterMember) []any {
			return []any{m.Cluster, m.BrokerName, m.BrokerID, m.Addr, m.Role}
		})(w, r.members)
		return
	}
	fmt.Fprintf(w, "%-16s  %-32s %14s %14s %14s %14s\n", "#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
	for _, m := range r.more {
		fmt.Fprintf(w, "%-16s  %-32s %14d %14d %14d %14d\n", m.Cluster, m.BrokerName, m.InTotalYest, m.OutTotalYest, m.InTotalToday, m.OutTotalToday)
	}
}
