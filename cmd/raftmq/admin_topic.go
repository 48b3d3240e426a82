package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	Brokers        []string `json:"brokers"`
}

// runUpdateTopic is mqadmin updateTopic.
func runUpdateTopic(ctx context.Context, s *adminSession, in flagValues) (topicUpdate, error) {
	r := topicUpdate{Topic: in.str("topic"), ReadQueueNums: in.int("readQueueNums"), WriteQueueNums: in.int("writeQueueNums"),
		Perm: in.int("perm"), Order: in.bool("order")}
	spec := client.TopicSpec{Topic: r.Topic, ReadQueueNums: r.ReadQueueNums, WriteQueueNums: r.WriteQueueNums, Perm: r.Perm, Order: r.Order}
	var err error
	r.Brokers, err = s.a.CreateTopic(ctx, spec, in.str("clusterName"), in.str("brokerAddr"))
	return r, err
}

func tableUpdateTopic(w *tabwriter.Writer, r topicUpdate) {
	for _, a := range r.Brokers {
		fmt.Fprintf(w, "create topic to %s success.\n", a)
	}
	fmt.Fprintf(w, "TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%d, order=%t]\n",
		r.Topic, r.ReadQueueNums, r.WriteQueueNums, r.Perm, r.Order)
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

// topicList is topicList's result.
type topicList struct {
	TopicList []string `json:"topicList"`
}

// runTopicList is mqadmin topicList [-c].
func runTopicList(ctx context.Context, s *adminSession, in flagValues) (topicList, error) {
	topics, err := s.a.TopicList(ctx)
	if err != nil {
		return topicList{}, err
	}
	if cluster := in.str("clusterName"); cluster != "" {
		var kept []string
		for _, t := range topics {
			rd, err := s.a.TopicRoute(ctx, t)
			if err != nil {
				continue // deleted meanwhile, or a system topic without route
			}
			if slices.ContainsFunc(rd.BrokerDatas, func(b wire.BrokerData) bool { return b.Cluster == cluster }) {
				kept = append(kept, t)
			}
		}
		topics = kept
	}
	if topics == nil {
		topics = []string{}
	}
	return topicList{TopicList: topics}, nil
}

func tableTopicRoute(w *tabwriter.Writer, rd *wire.TopicRouteData) {
	row(w, "#Cluster", "#BrokerName", "#BID", "#Addr")
	for _, b := range rd.BrokerDatas {
		for _, id := range slices.Sorted(maps.Keys(b.BrokerAddrs)) {
			row(w, b.Cluster, b.BrokerName, id, b.BrokerAddrs[id])
		}
	}
	fmt.Fprintln(w)
	row(w, "#BrokerName", "#ReadQueues", "#WriteQueues", "#Perm", "#SysFlag")
	for _, q := range rd.QueueDatas {
		row(w, q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, q.Perm, q.TopicSysFlag)
	}
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

// runBrokerStatus is mqadmin brokerStatus: the broker's runtime KVTable
// (GET_BROKER_RUNTIME_INFO, 28; the SDK's Admin has no call for it, so it
// is asked directly).
func runBrokerStatus(ctx context.Context, s *adminSession, in flagValues) (map[string]string, error) {
	addr := in.str("brokerAddr")
	resp, err := s.brokerInvoke(ctx, addr, remoting.NewRequest(remoting.RequestGetBrokerRuntimeInfo, nil, nil))
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
