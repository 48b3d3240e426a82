package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// newUpdateTopicCmd is mqadmin updateTopic.
func newUpdateTopicCmd(f *adminFlags) *cobra.Command {
	var topic, brokerAddr, cluster, order string
	var r, w, perm int
	cmd := &cobra.Command{
		Use:   "updateTopic",
		Short: "Create or update a topic on one broker (-b) or on every broker group of a cluster (-c)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "create on this broker only (its group's leader)")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "create on every broker group of this cluster")
	cmd.Flags().IntVarP(&r, "readQueueNums", "r", 8, "read queue count")
	cmd.Flags().IntVarP(&w, "writeQueueNums", "w", 8, "write queue count")
	cmd.Flags().IntVarP(&perm, "perm", "p", 6, "permission: 2 write, 4 read, 6 read-write")
	cmd.Flags().StringVarP(&order, "order", "o", "false", "ordered topic: true or false")
	required(cmd, "topic")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		if (brokerAddr == "") == (cluster == "") {
			return fmt.Errorf("%w: updateTopic needs exactly one of -b brokerAddr or -c clusterName", errAdminUsage)
		}
		ord, err := strconv.ParseBool(order)
		if err != nil {
			return fmt.Errorf("%w: -o %q: want true or false", errAdminUsage, order)
		}
		done, err := s.a.CreateTopic(ctx, client.TopicSpec{Topic: topic, ReadQueueNums: r, WriteQueueNums: w, Perm: perm, Order: ord}, cluster, brokerAddr)
		if err != nil {
			return err
		}
		res := struct {
			Topic          string   `json:"topic"`
			ReadQueueNums  int      `json:"readQueueNums"`
			WriteQueueNums int      `json:"writeQueueNums"`
			Perm           int      `json:"perm"`
			Order          bool     `json:"order"`
			Brokers        []string `json:"brokers"`
		}{topic, r, w, perm, ord, done}
		return s.emit(res, func(tw *tabwriter.Writer) {
			for _, a := range done {
				fmt.Fprintf(tw, "create topic to %s success.\n", a)
			}
			fmt.Fprintf(tw, "TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%d, order=%t]\n", topic, r, w, perm, ord)
		})
	})
	return cmd
}

// newDeleteTopicCmd is mqadmin deleteTopic.
func newDeleteTopicCmd(f *adminFlags) *cobra.Command {
	var topic, cluster string
	cmd := &cobra.Command{
		Use:   "deleteTopic",
		Short: "Delete a topic from a cluster's brokers and from every name server",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "cluster to delete it from (empty: every cluster)")
	required(cmd, "topic")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		if err := s.a.DeleteTopic(ctx, topic, cluster); err != nil {
			return err
		}
		res := map[string]string{"topic": topic, "cluster": cluster, "result": "deleted"}
		return s.emit(res, func(tw *tabwriter.Writer) {
			fmt.Fprintf(tw, "delete topic [%s] from cluster [%s] success.\n", topic, cluster)
		})
	})
	return cmd
}

// newTopicListCmd is mqadmin topicList.
func newTopicListCmd(f *adminFlags) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "topicList",
		Short: "List every topic the name server knows (with -c: only topics routed to that cluster)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "only topics with a broker group in this cluster")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		topics, err := s.a.TopicList(ctx)
		if err != nil {
			return err
		}
		if cluster != "" {
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
		return s.emit(map[string]any{"topicList": topics}, func(tw *tabwriter.Writer) {
			for _, t := range topics {
				fmt.Fprintln(tw, t)
			}
		})
	})
	return cmd
}

// newTopicRouteCmd is mqadmin topicRoute.
func newTopicRouteCmd(f *adminFlags) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "topicRoute",
		Short: "Show a topic's route: broker groups with their members and queue layout",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	required(cmd, "topic")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		rd, err := s.a.TopicRoute(ctx, topic)
		if err != nil {
			return err
		}
		return s.emit(rd, func(tw *tabwriter.Writer) {
			row(tw, "#Cluster", "#BrokerName", "#BID", "#Addr")
			for _, b := range rd.BrokerDatas {
				for _, id := range slices.Sorted(maps.Keys(b.BrokerAddrs)) {
					row(tw, b.Cluster, b.BrokerName, id, b.BrokerAddrs[id])
				}
			}
			fmt.Fprintln(tw)
			row(tw, "#BrokerName", "#ReadQueues", "#WriteQueues", "#Perm", "#SysFlag")
			for _, q := range rd.QueueDatas {
				row(tw, q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, q.Perm, q.TopicSysFlag)
			}
		})
	})
	return cmd
}

// newTopicStatusCmd is mqadmin topicStatus.
func newTopicStatusCmd(f *adminFlags) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "topicStatus",
		Short: "Show min/max offsets of every queue of a topic",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "topic name")
	required(cmd, "topic")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		stats, err := s.a.TopicStatus(ctx, topic)
		if err != nil {
			return err
		}
		type qs struct {
			BrokerName string `json:"brokerName"`
			QueueID    int    `json:"queueId"`
			MinOffset  int64  `json:"minOffset"`
			MaxOffset  int64  `json:"maxOffset"`
			LastUpdate int64  `json:"lastUpdateTimestamp"`
		}
		out := []qs{}
		for _, q := range stats {
			out = append(out, qs{q.Queue.BrokerName, q.Queue.QueueID, q.MinOffset, q.MaxOffset, max(q.LastUpdate.UnixMilli(), 0)})
		}
		slices.SortFunc(out, func(a, b qs) int {
			if a.BrokerName != b.BrokerName {
				return compareStrings(a.BrokerName, b.BrokerName)
			}
			return a.QueueID - b.QueueID
		})
		return s.emit(out, func(tw *tabwriter.Writer) {
			row(tw, "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
			for _, q := range out {
				row(tw, q.BrokerName, q.QueueID, q.MinOffset, q.MaxOffset, fmtTime(time.UnixMilli(q.LastUpdate)))
			}
		})
	})
	return cmd
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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

// newClusterListCmd is mqadmin clusterList.
func newClusterListCmd(f *adminFlags) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "clusterList",
		Short: "List clusters, broker groups and their members (brokerId 0 is the Raft leader)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "only this cluster")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		ci, err := s.a.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		rows := clusterMembers(ci, cluster)
		return s.emit(rows, func(tw *tabwriter.Writer) {
			row(tw, "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Role")
			for _, m := range rows {
				row(tw, m.Cluster, m.BrokerName, m.BrokerID, m.Addr, m.Role)
			}
		})
	})
	return cmd
}

// newBrokerStatusCmd is mqadmin brokerStatus: the broker's runtime
// KVTable (GET_BROKER_RUNTIME_INFO, 28; the SDK's Admin has no call for
// it, so it is asked directly).
func newBrokerStatusCmd(f *adminFlags) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "brokerStatus",
		Short: "Show a broker's runtime facts (role, leader, CommitLog offsets, held pulls, ...)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&addr, "brokerAddr", "b", "", "broker address host:port")
	required(cmd, "brokerAddr")
	cmd.RunE = f.run(func(ctx context.Context, s *adminSession) error {
		resp, err := s.brokerInvoke(ctx, addr, remoting.NewRequest(remoting.RequestGetBrokerRuntimeInfo, nil, nil))
		if err != nil {
			return err
		}
		var kv wire.KVTable
		if err := json.Unmarshal(resp.Body, &kv); err != nil {
			return fmt.Errorf("brokerStatus: broker %s answered an unreadable table: %w", addr, err)
		}
		if kv.Table == nil {
			kv.Table = map[string]string{}
		}
		return s.emit(kv.Table, func(tw *tabwriter.Writer) {
			for _, k := range slices.Sorted(maps.Keys(kv.Table)) {
				row(tw, k+":", kv.Table[k])
			}
		})
	})
	return cmd
}
