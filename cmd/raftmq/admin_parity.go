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

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// The rest of mqadmin's commands (RocketMQ's tools/command/*), with its
// names, short flags and meanings: topic permissions and clusters,
// broker consume stats and statsAll, group deletion, connections and
// consumer status, offset cloning and skipping, message lookups and
// printing, send RT checks, name-server config and KV, write permissions,
// order config, store maintenance and queue allocation. Their requests
// are in wire/admin_tools.go; docs/admin.md maps them to mqadmin.

func init() { adminCommands = append(adminCommands, parityCommands...) }

var parityCommands = []adminEntry{
	adminCommand[[]string]{
		name:  "updateTopicPerm",
		short: "Change a topic's permission (2 write, 4 read, 6 read-write) on a broker (-b) or a cluster (-c)",
		flags: []flagSpec{topicFlag, brokerAddrFlag, str("clusterName", "c", "every broker group of this cluster"),
			num("perm", "p", 6, "permission: 2 write, 4 read, 6 read-write").req()},
		oneOf: []string{"brokerAddr", "clusterName"},
		run:   runUpdateTopicPerm,
		table: func(w *tabwriter.Writer, addrs []string) {
			for _, a := range addrs {
				fmt.Fprintf(w, "update topic perm to %s success.\n", a)
			}
		},
	},
	adminCommand[[]string]{
		name:  "topicClusterList",
		short: "List the clusters a topic is routed to",
		flags: []flagSpec{topicFlag},
		run:   runTopicClusterList,
		table: func(w *tabwriter.Writer, cs []string) {
			for _, c := range cs {
				fmt.Fprintln(w, c)
			}
		},
	},
	adminCommand[[]consumeStatsRow]{
		name:  "brokerConsumeStats",
		short: "Show every consumer group's offsets and lag per queue on one broker",
		flags: []flagSpec{brokerAddrFlag.req(), num64("timeoutMillis", "t", 50000, "request timeout in ms"),
			num64("level", "l", 0, "only queues lagging by at least this many messages"), yesNo("order", "o", false, "only ordered topics")},
		run: runBrokerConsumeStats,
		table: columns([]any{"#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"},
			func(r consumeStatsRow) []any {
				return []any{r.Topic, r.Group, r.BrokerName, r.QueueID, r.BrokerOffset, r.ConsumerOffset, r.Diff, fmtTime(time.UnixMilli(r.LastTimestamp))}
			}),
	},
	adminCommand[[]statsRow]{
		name:  "statsAll",
		short: "Show every topic's in/out TPS and 24-hour counts, per consumer group",
		flags: []flagSpec{toggleShort("activeTopic", "a", "only topics with traffic"), str("topic", "t", "only this topic")},
		run:   runStatsAll,
		table: columns([]any{"#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"},
			func(r statsRow) []any {
				return []any{r.Topic, orDash(r.Group), r.Accumulation, fmt.Sprintf("%.2f", r.InTPS), fmt.Sprintf("%.2f", r.OutTPS), r.InMsg24Hour, r.OutMsg24Hour}
			}),
	},
	adminCommand[[]string]{
		name:  "deleteSubGroup",
		short: "Delete a subscription group (and its retry and DLQ topics) from a broker (-b) or a cluster (-c)",
		flags: []flagSpec{str("groupName", "g", "subscription group").req(), brokerAddrFlag,
			str("clusterName", "c", "every broker group of this cluster"), yesNo("removeOffset", "r", false, "also remove its offsets (always: raftmq drops them with the group)")},
		oneOf: []string{"brokerAddr", "clusterName"},
		run:   runDeleteSubGroup,
		table: func(w *tabwriter.Writer, addrs []string) {
			for _, a := range addrs {
				fmt.Fprintf(w, "delete subscription group from %s success.\n", a)
			}
		},
	},
	adminCommand[*wire.ConsumerConnection]{
		name:  "consumerConnection",
		short: "Show a consumer group's connected clients, subscriptions and consume mode",
		flags: []flagSpec{str("consumerGroup", "g", "consumer group").req(), brokerAddrFlag},
		run: func(ctx context.Context, s *adminSession, in flagValues) (*wire.ConsumerConnection, error) {
			return s.consumerConnection(ctx, in.str("consumerGroup"), in.str("brokerAddr"))
		},
		table: tableConsumerConnection,
	},
	adminCommand[*wire.ProducerConnection]{
		name:  "producerConnection",
		short: "Show a producer group's connected clients on the brokers of a topic",
		flags: []flagSpec{str("producerGroup", "g", "producer group").req(), topicFlag},
		run:   runProducerConnection,
		table: func(w *tabwriter.Writer, pc *wire.ProducerConnection) {
			for i, c := range pc.ConnectionSet {
				fmt.Fprintf(w, "%04d  %-32s %-22s %-8s %s\n", i+1, c.ClientID, c.ClientAddr, c.Language, versionDesc(c.Version))
			}
		},
	},
	adminCommand[[]consumerStatus]{
		name:  "consumerStatus",
		short: "Show the running state each client of a consumer group reports (GET_CONSUMER_RUNNING_INFO)",
		flags: []flagSpec{str("consumerGroup", "g", "consumer group").req(), str("clientId", "i", "only this client"), brokerAddrFlag,
			toggleShort("jstack", "s", "ask for a thread dump (Java clients)")},
		run:   runConsumerStatus,
		table: tableConsumerStatus,
	},
	adminCommand[[]string]{
		name:  "cloneGroupOffset",
		short: "Copy a consumer group's offsets on a topic to another group",
		flags: []flagSpec{str("srcGroup", "s", "source group").req(), str("destGroup", "d", "destination group").req(), topicFlag,
			yesNo("offline", "o", false, "the groups are offline (accepted; raftmq copies committed offsets either way)")},
		run: runCloneGroupOffset,
		table: func(w *tabwriter.Writer, addrs []string) {
			for _, a := range addrs {
				fmt.Fprintf(w, "clone group offset success on %s\n", a)
			}
		},
	},
	adminCommand[[]queueOffset]{
		name:  "skipAccumulatedMessage",
		short: "Move a consumer group's offsets on a topic to the end of each queue",
		flags: []flagSpec{str("group", "g", "consumer group").req(), topicFlag, yesNo("force", "f", true, "move offsets either way"),
			str("cluster", "c", "cluster (accepted for mqadmin compatibility)")},
		run: runSkipAccumulated,
		table: columns([]any{"#brokerName", "#queueId", "#offset"}, func(r queueOffset) []any {
			return []any{r.BrokerName, r.QueueID, r.Offset}
		}),
	},
	adminCommand[[]messageView]{
		name:  "queryMsgByUniqueKey",
		short: "Find a topic's message by its client message id (UNIQ_KEY, the MsgID applications log)",
		flags: []flagSpec{str("msgId", "i", "message id (UNIQ_KEY)").req(), topicFlag, str("consumerGroup", "g", "accepted for mqadmin compatibility"),
			str("clientId", "d", "accepted for mqadmin compatibility"), toggleShort("showAll", "a", "print every copy (up to 32)")},
		run: runQueryMsgByUniqueKey,
		table: func(w *tabwriter.Writer, vs []messageView) {
			for i, v := range vs {
				if i > 0 {
					fmt.Fprintln(w)
				}
				tableMessage(w, v)
			}
		},
	},
	adminCommand[messageView]{
		name:  "queryMsgByOffset",
		short: "Show the message at a queue offset",
		flags: []flagSpec{topicFlag, str("brokerName", "b", "broker group").req(), num("queueId", "i", 0, "queue id").req(),
			num64("offset", "o", 0, "queue offset").req(), str("bodyFormat", "f", "accepted for mqadmin compatibility")},
		run:   runQueryMsgByOffset,
		table: tableMessage,
	},
	adminCommand[printedMessages]{
		name:  "printMsg",
		short: "Print a topic's messages stored in a time range, queue by queue",
		flags: []flagSpec{topicFlag, str("charsetName", "c", "body charset (UTF-8 only)"), str("subExpression", "s", "tag expression (TagA || TagB)"),
			when("beginTimestamp", "b", "stored at or after (now, ms, or yyyy-MM-dd#HH:mm:ss:SSS)"),
			when("endTimestamp", "e", "stored before (now, ms, or yyyy-MM-dd#HH:mm:ss:SSS)"),
			yesNo("printBody", "d", true, "print bodies"), str("lmqParentTopic", "l", "accepted for mqadmin compatibility")},
		run: func(ctx context.Context, s *adminSession, in flagValues) (printedMessages, error) {
			return s.printMessages(ctx, in, "", -1, 0)
		},
		table: tablePrinted,
	},
	adminCommand[printedMessages]{
		name:  "printMsgByQueue",
		short: "Print one queue's messages stored in a time range (-f: counts per tag)",
		flags: []flagSpec{topicFlag, str("brokerName", "a", "broker group").req(), num("queueId", "i", 0, "queue id").req(),
			str("charsetName", "c", "body charset (UTF-8 only)"), str("subExpression", "s", "tag expression (TagA || TagB)"),
			when("beginTimestamp", "b", "stored at or after"), when("endTimestamp", "e", "stored before"),
			yesNo("printMsg", "p", false, "print each message"), yesNo("printBody", "d", false, "print bodies"),
			yesNo("calculate", "f", false, "count messages per tag")},
		run: func(ctx context.Context, s *adminSession, in flagValues) (printedMessages, error) {
			return s.printMessages(ctx, in, in.str("brokerName"), in.int("queueId"), 0)
		},
		table: tablePrinted,
	},
	adminCommand[printedMessages]{
		name:  "consumeMessage",
		short: "Read messages from a queue offset or a time range without committing anything",
		flags: []flagSpec{topicFlag, str("brokerName", "b", "broker group (with -i: one queue)"), num("queueId", "i", -1, "queue id"),
			num64("offset", "o", -1, "queue offset to start at"), str("consumerGroup", "g", "consumer group to read as"),
			when("beginTimestamp", "s", "stored at or after"), when("endTimestamp", "e", "stored before"),
			num64("MessageNumber", "c", 128, "at most this many messages")},
		run: func(ctx context.Context, s *adminSession, in flagValues) (printedMessages, error) {
			return s.printMessages(ctx, in, in.str("brokerName"), in.int("queueId"), in.int64("MessageNumber"))
		},
		table: tablePrinted,
	},
	adminCommand[sendRT]{
		name:  "checkMsgSendRT",
		short: "Send messages to a topic and print each send's response time",
		flags: []flagSpec{topicFlag, num64("amount", "a", 100, "number of messages"), num64("size", "s", 128, "body size in bytes")},
		run:   runCheckMsgSendRT,
		table: func(w *tabwriter.Writer, r sendRT) {
			row(w, "#Broker Name", "#QID", "#Send Result", "#RT")
			for _, x := range r.Sends {
				row(w, x.BrokerName, x.QueueID, x.OK, x.RTMillis)
			}
			fmt.Fprintf(w, "Avg RT: %.2f\n", r.AvgRTMillis)
		},
	},
	adminCommand[[]clusterRTRow]{
		name:  "clusterRT",
		short: "Send messages to every broker group of a cluster and print the average send RT",
		long: "As mqadmin clusterRT: each group gets -a messages on the topic named after its broker name (created by " +
			"the first send when autoCreateTopicEnable is on; -t names another topic). Runs once; -p, -m, -i are accepted and ignored.",
		flags: []flagSpec{num64("amount", "a", 100, "messages per broker group"), num64("size", "s", 128, "body size in bytes"),
			str("cluster", "c", "only this cluster"), str("printLog", "p", "accepted for mqadmin compatibility"),
			str("machineRoom", "m", "accepted for mqadmin compatibility"), str("interval", "i", "accepted for mqadmin compatibility"),
			str("topic", "t", "topic to send to (default: the broker name, as mqadmin)")},
		run: runClusterRT,
		table: columns([]any{"#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"}, func(r clusterRTRow) []any {
			return []any{r.Cluster, r.BrokerName, fmt.Sprintf("%.2f", r.RTMillis), r.Success, r.Fail}
		}),
	},
	adminCommand[[]targeted[map[string]string]]{
		name:  "getNamesrvConfig",
		short: "Show every name server's configuration",
		run:   runGetNamesrvConfig,
		table: func(w *tabwriter.Writer, rs []targeted[map[string]string]) {
			for _, r := range rs {
				fmt.Fprintf(w, "============%s============\n", r.target)
				for _, k := range slices.Sorted(maps.Keys(r.v)) {
					row(w, k, "=", r.v[k])
				}
			}
		},
	},
	adminCommand[[]string]{
		name:  "updateNamesrvConfig",
		short: "Change a name server config key on every name server (until restart)",
		flags: []flagSpec{str("key", "k", "config key").req(), str("value", "v", "config value").req()},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			body := []byte(in.str("key") + "=" + in.str("value") + "\n")
			return s.eachNameServer(ctx, remoting.RequestUpdateNamesrvConfig, nil, body)
		},
		table: func(w *tabwriter.Writer, addrs []string) {
			fmt.Fprintf(w, "update name server config success!%v\n", addrs)
		},
	},
	adminCommand[[]string]{
		name:  "updateKvConfig",
		short: "Create or update a KV config entry on every name server",
		flags: []flagSpec{str("namespace", "s", "namespace").req(), str("key", "k", "key").req(), str("value", "v", "value").req()},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			return s.eachNameServer(ctx, remoting.RequestPutKVConfig,
				&wire.KVConfigRequestHeader{Namespace: in.str("namespace"), Key: in.str("key"), Value: in.str("value")}, nil)
		},
		table: func(w *tabwriter.Writer, _ []string) {
			fmt.Fprintln(w, "create or update kv config to namespace success.")
		},
	},
	adminCommand[[]string]{
		name:  "deleteKvConfig",
		short: "Delete a KV config entry from every name server",
		flags: []flagSpec{str("namespace", "s", "namespace").req(), str("key", "k", "key").req()},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			return s.eachNameServer(ctx, remoting.RequestDeleteKVConfig, &wire.KVConfigRequestHeader{Namespace: in.str("namespace"), Key: in.str("key")}, nil)
		},
		table: func(w *tabwriter.Writer, _ []string) { fmt.Fprintln(w, "delete kv config from namespace success.") },
	},
	adminCommand[[]permChange]{
		name:  "wipeWritePerm",
		short: "Remove a broker group's write permission on every name server (clients stop sending to it)",
		flags: []flagSpec{str("brokerName", "b", "broker group").req()},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]permChange, error) {
			return s.writePerm(ctx, remoting.RequestWipeWritePermOfBroker, in.str("brokerName"))
		},
		table: func(w *tabwriter.Writer, rs []permChange) {
			for _, r := range rs {
				fmt.Fprintf(w, "wipe write perm of broker[%s] in name server[%s] OK, %d\n", r.BrokerName, r.NameServer, r.Topics)
			}
		},
	},
	adminCommand[[]permChange]{
		name:  "addWritePerm",
		short: "Give a broker group its write permission back on every name server",
		flags: []flagSpec{str("brokerName", "b", "broker group").req()},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]permChange, error) {
			return s.writePerm(ctx, remoting.RequestAddWritePermOfBroker, in.str("brokerName"))
		},
		table: func(w *tabwriter.Writer, rs []permChange) {
			for _, r := range rs {
				fmt.Fprintf(w, "add write perm of broker[%s] in name server[%s] OK, %d\n", r.BrokerName, r.NameServer, r.Topics)
			}
		},
	},
	adminCommand[orderConf]{
		name:  "updateOrderConf",
		short: "Put, get or delete a topic's order config (ORDER_TOPIC_CONFIG KV namespace)",
		flags: []flagSpec{topicFlag, str("orderConf", "v", "brokerName1:num;brokerName2:num (put)"), str("method", "m", "put, get or delete").req()},
		run:   runUpdateOrderConf,
		table: func(w *tabwriter.Writer, r orderConf) {
			switch r.Method {
			case "get":
				fmt.Fprintf(w, "get orderConf success. topic=[%s], orderConf=[%s]\n", r.Topic, r.OrderConf)
			case "put":
				fmt.Fprintf(w, "update orderConf success. topic=[%s], orderConf=[%s]\n", r.Topic, r.OrderConf)
			default:
				fmt.Fprintf(w, "delete orderConf success. topic=[%s]\n", r.Topic)
			}
		},
	},
	maintenance("cleanExpiredCQ", "Delete consume-queue files that only point below the CommitLog's first offset", remoting.RequestCleanExpiredConsumequeue),
	maintenance("cleanUnusedTopic", "Delete the consume queues of topics that no longer exist", remoting.RequestCleanUnusedTopic),
	maintenance("deleteExpiredCommitLog", "Delete expired CommitLog segments now rather than at deleteWhen", remoting.RequestDeleteExpiredCommitLog),
	adminCommand[map[string][]client.MessageQueue]{
		name:  "allocateMQ",
		short: "Show how the average strategy would split a topic's queues over the given client ids",
		flags: []flagSpec{topicFlag, str("ipList", "i", "client ids, comma separated").req()},
		run:   runAllocateMQ,
		table: func(w *tabwriter.Writer, r map[string][]client.MessageQueue) {
			b, _ := json.Marshal(map[string]any{"result": r})
			fmt.Fprintln(w, string(b))
		},
	},
}

// toggleShort is a boolean switch with a short name (-a).
func toggleShort(name, short, usage string) flagSpec {
	return flagSpec{name: name, short: short, usage: usage, kind: kindSwitch, def: false}
}

// maintenance is one of the store-maintenance commands: a request with no
// header to one broker (-b) or every member of a cluster (-c), since each
// member keeps its own files.
func maintenance(name, short string, code int16) adminEntry {
	return adminCommand[[]string]{
		name:  name,
		short: short + " on a broker (-b) or every member of a cluster (-c)",
		flags: []flagSpec{brokerAddrFlag, str("cluster", "c", "every member of this cluster")},
		oneOf: []string{"brokerAddr", "cluster"},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			targets, err := s.memberTargets(ctx, in.str("brokerAddr"), in.str("cluster"))
			if err != nil {
				return nil, err
			}
			var done []string
			var errs []error
			for _, a := range targets {
				if _, err := s.brokerInvoke(ctx, a, remoting.NewRequest(code, nil, nil)); err != nil {
					errs = append(errs, err)
					continue
				}
				done = append(done, a)
			}
			return done, errors.Join(errs...)
		},
		table: func(w *tabwriter.Writer, addrs []string) {
			for _, a := range addrs {
				fmt.Fprintf(w, "%s success on %s\n", name, a)
			}
		},
	}
}

// memberTargets is addr, or every registered member of cluster.
func (s *adminSession) memberTargets(ctx context.Context, addr, cluster string) ([]string, error) {
	if addr != "" {
		return []string{addr}, nil
	}
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range clusterMembers(ci, cluster) {
		out = append(out, m.Addr)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: cluster %q has no registered broker", errNotFound, cluster)
	}
	return out, nil
}

// leaderTargets is brokerName → addr for addr (its own name unknown: the
// address stands in), or every group leader of cluster.
func (s *adminSession) leaderTargets(ctx context.Context, addr, cluster string) (map[string]string, error) {
	if addr != "" {
		return map[string]string{addr: addr}, nil
	}
	m, err := s.a.ClusterMasters(ctx, cluster)
	if err == nil && len(m) == 0 {
		err = fmt.Errorf("%w: cluster %q has no broker group with a leader", errNotFound, cluster)
	}
	return m, err
}

func runUpdateTopicPerm(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
	topic, perm := in.str("topic"), in.int("perm")
	if perm != wire.PermRead && perm != wire.PermWrite && perm != wire.PermRead|wire.PermWrite {
		return nil, fmt.Errorf("%w: -p %d: want 2 (write), 4 (read) or 6 (read-write)", errAdminUsage, perm)
	}
	rd, err := s.a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	targets, err := s.leaderTargets(ctx, in.str("brokerAddr"), in.str("clusterName"))
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		addr := targets[name]
		qd, ok := queueDataOf(rd, name, addr)
		if !ok {
			continue // the topic is not on this group
		}
		spec := client.TopicSpec{Topic: topic, ReadQueueNums: qd.ReadQueueNums, WriteQueueNums: qd.WriteQueueNums, Perm: perm}
		if _, err := s.a.CreateTopic(ctx, spec, "", addr); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, addr)
	}
	if len(done) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("%w: topic %s has no queues on the chosen broker(s)", errNotFound, topic)
	}
	return done, errors.Join(errs...)
}

// queueDataOf finds the route's queue layout of the group named name, or
// of the group addr belongs to.
func queueDataOf(rd *wire.TopicRouteData, name, addr string) (wire.QueueData, bool) {
	for _, b := range rd.BrokerDatas {
		if b.BrokerName == name || slices.Contains(slices.Collect(maps.Values(b.BrokerAddrs)), addr) {
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
	resp, err := s.brokerInvoke(ctx, in.str("brokerAddr"), remoting.NewRequest(remoting.RequestGetBrokerConsumeStats,
		&wire.GetConsumeStatsInBrokerHeader{IsOrder: in.bool("order")}, nil))
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

// brokerStats reads one VIEW_BROKER_STATS_DATA item; a key nothing was
// counted under is zero, as mqadmin treats it.
func (s *adminSession) brokerStats(ctx context.Context, addr, name, key string) (wire.BrokerStatsData, error) {
	resp, err := s.brokerInvoke(ctx, addr, remoting.NewRequest(remoting.RequestViewBrokerStatsData,
		&wire.ViewBrokerStatsDataRequestHeader{StatsName: name, StatsKey: key}, nil))
	var re *remoting.RemoteError
	if errors.As(err, &re) && re.Code == remoting.ResponseSystemError {
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
// gets and its lag.
func runStatsAll(ctx context.Context, s *adminSession, in flagValues) ([]statsRow, error) {
	active := in.bool("activeTopic")
	topics := []string{in.str("topic")}
	if topics[0] == "" {
		var err error
		if topics, err = s.a.TopicList(ctx); err != nil {
			return nil, err
		}
	}
	out := []statsRow{}
	for _, t := range topics {
		if strings.HasPrefix(t, wire.RetryGroupTopicPrefix) || strings.HasPrefix(t, wire.DLQGroupTopicPrefix) {
			continue
		}
		masters, err := s.a.RouteMasters(ctx, t)
		if err != nil {
			continue // no route: nothing to show
		}
		base := statsRow{Topic: t}
		groups := map[string]bool{}
		for _, addr := range masters {
			d, err := s.brokerStats(ctx, addr, wire.StatsTopicPutNums, t)
			if err != nil {
				return out, err
			}
			base.InTPS += d.StatsMinute.Tps
			base.InMsg24Hour += d.StatsDay.Sum
			resp, err := s.brokerInvoke(ctx, addr, remoting.NewRequest(remoting.RequestQueryTopicConsumeByWho,
				&wire.QueryTopicConsumeByWhoRequestHeader{Topic: t}, nil))
			if err != nil {
				return out, err
			}
			var gl wire.GroupList
			if err := json.Unmarshal(resp.Body, &gl); err != nil {
				return out, fmt.Errorf("QUERY_TOPIC_CONSUME_BY_WHO answer of %s: %w", addr, err)
			}
			for _, g := range gl.GroupList {
				groups[g] = true
			}
		}
		if len(groups) == 0 {
			if !active || base.InMsg24Hour > 0 {
				out = append(out, base)
			}
			continue
		}
		for _, g := range slices.Sorted(maps.Keys(groups)) {
			r := base
			r.Group = g
			for _, addr := range masters {
				d, err := s.brokerStats(ctx, addr, wire.StatsGroupGetNums, t+"@"+g)
				if err != nil {
					return out, err
				}
				r.OutTPS += d.StatsMinute.Tps
				r.OutMsg24Hour += d.StatsDay.Sum
			}
			if qs, err := s.a.ConsumerProgress(ctx, g, t); err == nil {
				for _, q := range qs {
					r.Accumulation += q.Lag
				}
			}
			if !active || r.InMsg24Hour > 0 || r.OutMsg24Hour > 0 {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func runDeleteSubGroup(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
	group := in.str("groupName")
	targets, err := s.leaderTargets(ctx, in.str("brokerAddr"), in.str("clusterName"))
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		addr := targets[name]
		if _, err := s.a.BrokerRequest(ctx, addr, remoting.RequestDeleteSubscriptionGroup, &wire.GroupNameRequestHeader{GroupName: group}, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, addr)
	}
	// mqadmin also deletes the group's retry and DLQ topics, from the
	// brokers and the name servers; a group that never had them is fine.
	for _, t := range []string{wire.RetryGroupTopicPrefix + group, wire.DLQGroupTopicPrefix + group} {
		if _, err := s.a.TopicRoute(ctx, t); err != nil {
			continue
		}
		if err := s.a.DeleteTopic(ctx, t, in.str("clusterName")); err != nil {
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}

// consumerConnection asks addr, or the leaders of the group's retry topic
// in turn, for the group's connections (GET_CONSUMER_CONNECTION_LIST).
func (s *adminSession) consumerConnection(ctx context.Context, group, addr string) (*wire.ConsumerConnection, error) {
	targets := []string{addr}
	if addr == "" {
		m, err := s.a.RouteMasters(ctx, wire.RetryGroupTopicPrefix+group)
		if err != nil {
			return nil, fmt.Errorf("%w: consumer group %s has no retry topic route (never started?): %v", errNotFound, group, err)
		}
		targets = slices.Sorted(maps.Values(m))
	}
	var errs []error
	for _, a := range targets {
		resp, err := s.a.BrokerRequest(ctx, a, remoting.RequestGetConsumerConnectionList, &wire.ConsumerGroupRequestHeader{ConsumerGroup: group}, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var cc wire.ConsumerConnection
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			return nil, fmt.Errorf("consumer connection answer of %s: %w", a, err)
		}
		return &cc, nil
	}
	return nil, errors.Join(errs...)
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
	masters, err := s.a.RouteMasters(ctx, in.str("topic"))
	if err != nil {
		return nil, err
	}
	out := &wire.ProducerConnection{ConnectionSet: []wire.Connection{}}
	seen := map[string]bool{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(masters)) {
		resp, err := s.a.BrokerRequest(ctx, masters[name], remoting.RequestGetProducerConnectionList,
			&wire.GetProducerConnectionListRequestHeader{ProducerGroup: group}, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var pc wire.ProducerConnection
		if err := json.Unmarshal(resp.Body, &pc); err != nil {
			return nil, fmt.Errorf("producer connection answer of %s: %w", masters[name], err)
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
	cc, err := s.consumerConnection(ctx, group, in.str("brokerAddr"))
	if err != nil {
		return nil, err
	}
	broker := in.str("brokerAddr")
	if broker == "" {
		m, err := s.a.RouteMasters(ctx, wire.RetryGroupTopicPrefix+group)
		if err != nil {
			return nil, err
		}
		broker = slices.Sorted(maps.Values(m))[0]
	}
	var out []consumerStatus
	for _, c := range cc.ConnectionSet {
		if id := in.str("clientId"); id != "" && id != c.ClientID {
			continue
		}
		resp, err := s.a.BrokerRequest(ctx, broker, remoting.RequestGetConsumerRunningInfo,
			&wire.GetConsumerRunningInfoRequestHeader{ConsumerGroup: group, ClientID: c.ClientID, JstackEnable: in.bool("jstack")}, nil)
		if err != nil {
			return out, err
		}
		ri, err := wire.DecodeConsumerRunningInfo(resp.Body)
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
	masters, err := s.a.RouteMasters(ctx, in.str("topic"))
	if err != nil {
		return nil, err
	}
	h := &wire.CloneGroupOffsetRequestHeader{SrcGroup: in.str("srcGroup"), DestGroup: in.str("destGroup"), Topic: in.str("topic"), Offline: in.bool("offline")}
	var done []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(masters)) {
		if _, err := s.a.BrokerRequest(ctx, masters[name], remoting.RequestCloneGroupOffset, h, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, masters[name])
	}
	return done, errors.Join(errs...)
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
	return out, err
}

// runQueryMsgByUniqueKey is mqadmin queryMsgByUniqueKey -i -t [-a].
func runQueryMsgByUniqueKey(ctx context.Context, s *adminSession, in flagValues) ([]messageView, error) {
	msgs, err := s.a.QueryMessageByUniqueKey(ctx, in.str("topic"), in.str("msgId"))
	if errors.Is(err, client.ErrMessageNotFound) {
		return nil, fmt.Errorf("%w: %v", errNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	if !in.bool("showAll") {
		msgs = msgs[:1]
	}
	out := make([]messageView, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, viewOf(m))
	}
	return out, nil
}

// runQueryMsgByOffset reads the queue's unit at the offset
// (QUERY_CONSUME_QUEUE) and then the message (VIEW_MESSAGE_BY_ID).
func runQueryMsgByOffset(ctx context.Context, s *adminSession, in flagValues) (messageView, error) {
	topic, name := in.str("topic"), in.str("brokerName")
	masters, err := s.a.RouteMasters(ctx, topic)
	if err != nil {
		return messageView{}, err
	}
	addr := masters[name]
	if addr == "" {
		return messageView{}, fmt.Errorf("%w: topic %s has no queues on broker group %s", errNotFound, topic, name)
	}
	mq := client.MessageQueue{Topic: topic, BrokerName: name, QueueID: in.int("queueId")}
	res, err := s.a.PullQueue(ctx, addr, adminGroup, mq, in.int64("offset"), 1, nil)
	if err != nil {
		return messageView{}, err
	}
	if len(res.Messages) == 0 || res.Messages[0].QueueOffset != in.int64("offset") {
		return messageView{}, fmt.Errorf("%w: no message at %s/%s/%d offset %d (%s; queue holds %d..%d)", errNotFound,
			topic, name, mq.QueueID, in.int64("offset"), res.Status, res.MinOffset, res.MaxOffset)
	}
	return viewOf(res.Messages[0]), nil
}

// adminGroup is the consumer group the read-only commands pull as; they
// never commit, so it leaves no offsets behind.
const adminGroup = "TOOLS_CONSUMER"

// printedMessages is the result of printMsg, printMsgByQueue and
// consumeMessage.
type printedMessages struct {
	Messages  []messageView  `json:"messages"`
	TagCounts map[string]int `json:"tagCounts,omitempty"`
	bodies    bool
	each      bool
}

// printMessages reads the chosen queues (every queue of the topic, or
// brokerName/queueID) from -o or the first offset stored at or after -b/-s
// up to -e, at most limit messages (0: no limit), matching -s.
func (s *adminSession) printMessages(ctx context.Context, in flagValues, brokerName string, queueID int, limit int64) (printedMessages, error) {
	topic := in.str("topic")
	out := printedMessages{Messages: []messageView{}, bodies: true, each: true}
	if v, ok := in["printBody"]; ok {
		out.bodies = v.(bool)
	}
	if v, ok := in["printMsg"]; ok {
		out.each = v.(bool) || out.bodies
	}
	var sub *client.SubscriptionData
	if e, ok := in["subExpression"]; ok && e.(string) != "" {
		var err error
		if sub, err = client.ParseTagExpression(topic, e.(string), time.Now().UnixMilli()); err != nil {
			return out, fmt.Errorf("%w: -s: %v", errAdminUsage, err)
		}
	}
	group := adminGroup
	if g, ok := in["consumerGroup"]; ok && g.(string) != "" {
		group = g.(string)
	}
	begin, end := timeFlag(in, "beginTimestamp"), timeFlag(in, "endTimestamp")
	stats, err := s.a.TopicStatus(ctx, topic)
	if err != nil {
		return out, err
	}
	masters, err := s.a.RouteMasters(ctx, topic)
	if err != nil {
		return out, err
	}
	slices.SortFunc(stats, func(a, b client.QueueStat) int { return client.CompareQueues(a.Queue, b.Queue) })
	for _, q := range stats {
		if (brokerName != "" && q.Queue.BrokerName != brokerName) || (queueID >= 0 && q.Queue.QueueID != queueID) {
			continue
		}
		addr := masters[q.Queue.BrokerName]
		from, to := q.MinOffset, q.MaxOffset
		if o, ok := in["offset"]; ok && o.(int64) >= 0 {
			from = max(from, o.(int64))
		} else if !begin.IsZero() {
			if from, err = s.searchOffset(ctx, addr, q.Queue, begin); err != nil {
				return out, err
			}
		}
		if !end.IsZero() {
			if to, err = s.searchOffset(ctx, addr, q.Queue, end); err != nil {
				return out, err
			}
		}
		for off := from; off < to; {
			if limit > 0 && int64(len(out.Messages)) >= limit {
				return out, nil
			}
			res, err := s.a.PullQueue(ctx, addr, group, q.Queue, off, 32, sub)
			if err != nil {
				return out, err
			}
			for _, m := range res.Messages {
				if m.QueueOffset >= to || (limit > 0 && int64(len(out.Messages)) >= limit) {
					break
				}
				out.Messages = append(out.Messages, viewOf(m))
			}
			if res.NextBeginOffset <= off {
				break
			}
			off = res.NextBeginOffset
		}
	}
	if v, ok := in["calculate"]; ok && v.(bool) {
		out.TagCounts = map[string]int{}
		for _, m := range out.Messages {
			out.TagCounts[m.Tags]++
		}
	}
	return out, nil
}

// timeFlag reads an optional kindTime flag (zero when not given).
func timeFlag(in flagValues, name string) time.Time {
	if v, ok := in[name].(time.Time); ok {
		return v
	}
	return time.Time{}
}

// searchOffset is the first queue offset stored at or after t
// (SEARCH_OFFSET_BY_TIMESTAMP).
func (s *adminSession) searchOffset(ctx context.Context, addr string, mq client.MessageQueue, t time.Time) (int64, error) {
	resp, err := s.a.BrokerRequest(ctx, addr, remoting.RequestSearchOffsetByTimestamp,
		&wire.SearchOffsetRequestHeader{Topic: mq.Topic, QueueID: int32(mq.QueueID), Timestamp: t.UnixMilli()}, nil)
	if err != nil {
		return 0, err
	}
	return offsetExt(addr, resp)
}

func tablePrinted(w *tabwriter.Writer, r printedMessages) {
	if r.each {
		for _, m := range r.Messages {
			body := ""
			if r.bodies {
				body = " BODY: " + m.Body
			}
			fmt.Fprintf(w, "MSGID: %s %s QUEUE: %s/%d OFFSET: %d TAGS: %s KEYS: %s STORE: %s%s\n", m.MsgID, m.OffsetMsgID, m.Topic, m.QueueID,
				m.QueueOffset, m.Tags, strings.Join(m.Keys, " "), fmtTime(time.UnixMilli(m.StoreTimestamp)), body)
		}
	}
	if r.TagCounts != nil {
		for _, t := range slices.Sorted(maps.Keys(r.TagCounts)) {
			fmt.Fprintf(w, "Tag: %-30s Count: %d\n", t, r.TagCounts[t])
		}
	}
	fmt.Fprintf(w, "%d message(s)\n", len(r.Messages))
}

// sendRT is checkMsgSendRT's result.
type sendRT struct {
	Sends       []sendTiming `json:"sends"`
	AvgRTMillis float64      `json:"avgRtMillis"`
}

type sendTiming struct {
	BrokerName string  `json:"brokerName"`
	QueueID    int     `json:"queueId"`
	OK         bool    `json:"ok"`
	RTMillis   float64 `json:"rtMillis"`
}

// adminProducer starts a producer of the admin's own group.
// It signs with the session's ACL credentials, if any.
func (s *adminSession) adminProducer(ctx context.Context) (*client.Producer, error) {
	creds, err := s.f.credentials()
	if err != nil {
		return nil, err
	}
	p, err := client.NewProducer(client.NameServers(s.ns...), client.RequestTimeout(s.f.timeout), client.WithLogger(s.f.logger()),
		client.ProducerGroup(fmt.Sprintf("raftmq-admin-%d", time.Now().UnixNano())), client.WithCredentials(creds.AccessKey, creds.SecretKey))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errAdminUsage, err)
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func runCheckMsgSendRT(ctx context.Context, s *adminSession, in flagValues) (sendRT, error) {
	p, err := s.adminProducer(ctx)
	if err != nil {
		return sendRT{}, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	body := []byte(strings.Repeat("a", int(max(in.int64("size"), 1))))
	var r sendRT
	var total time.Duration
	var lastErr error
	ok := 0
	for range max(in.int64("amount"), 1) {
		start := time.Now()
		res, err := p.SendSync(ctx, &client.Message{Topic: in.str("topic"), Body: body})
		rt := time.Since(start)
		total += rt
		t := sendTiming{OK: err == nil, RTMillis: float64(rt.Microseconds()) / 1000}
		if err == nil {
			t.BrokerName, t.QueueID = res.Queue.BrokerName, res.Queue.QueueID
			ok++
		} else if lastErr = err; ctx.Err() != nil {
			return r, err
		}
		r.Sends = append(r.Sends, t)
	}
	if ok == 0 {
		return r, fmt.Errorf("every send failed: %w", lastErr)
	}
	r.AvgRTMillis = float64(total.Microseconds()) / 1000 / float64(len(r.Sends))
	return r, nil
}

// clusterRTRow is one broker group of clusterRT.
type clusterRTRow struct {
	Cluster    string  `json:"cluster"`
	BrokerName string  `json:"brokerName"`
	RTMillis   float64 `json:"rtMillis"`
	Success    int     `json:"successCount"`
	Fail       int     `json:"failCount"`
	Error      string  `json:"error,omitempty"`
}

func runClusterRT(ctx context.Context, s *adminSession, in flagValues) ([]clusterRTRow, error) {
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.adminProducer(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	body := []byte(strings.Repeat("a", int(max(in.int64("size"), 1))))
	amount := max(in.int64("amount"), 2)
	out := []clusterRTRow{}
	for _, c := range slices.Sorted(maps.Keys(ci.ClusterAddrTable)) {
		if want := in.str("cluster"); want != "" && c != want {
			continue
		}
		for _, name := range slices.Sorted(slices.Values(ci.ClusterAddrTable[c])) {
			topic := in.str("topic")
			if topic == "" {
				topic = name
			}
			r := clusterRTRow{Cluster: c, BrokerName: name}
			onBroker := client.SelectorFunc(func(_ *client.Message, qs []client.MessageQueue) (client.MessageQueue, bool) {
				for _, q := range qs {
					if q.BrokerName == name {
						return q, true
					}
				}
				return client.MessageQueue{}, false
			})
			var elapsed time.Duration
			for i := range amount {
				start := time.Now()
				_, err := p.SendWithSelector(ctx, &client.Message{Topic: topic, Body: body}, onBroker)
				if err != nil {
					r.Fail++
					r.Error = err.Error()
				} else {
					r.Success++
				}
				if i > 0 { // as mqadmin: the first send (route lookup) is not timed
					elapsed += time.Since(start)
				}
			}
			r.RTMillis = float64(elapsed.Microseconds()) / 1000 / float64(amount-1)
			out = append(out, r)
		}
	}
	return out, nil
}

// eachNameServer sends one request to every -n name server; all must
// succeed.
func (s *adminSession) eachNameServer(ctx context.Context, code int16, header any, body []byte) ([]string, error) {
	var done []string
	var errs []error
	for _, ns := range s.ns {
		if _, err := s.a.NameServerRequestAt(ctx, ns, code, header, body); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, ns)
	}
	return done, errors.Join(errs...)
}

func runGetNamesrvConfig(ctx context.Context, s *adminSession, _ flagValues) ([]targeted[map[string]string], error) {
	var out []targeted[map[string]string]
	for _, ns := range s.ns {
		resp, err := s.a.NameServerRequestAt(ctx, ns, remoting.RequestGetNamesrvConfig, nil, nil)
		if err != nil {
			return out, err
		}
		out = append(out, targeted[map[string]string]{ns, parseKV(resp.Body)})
	}
	return out, nil
}

// parseKV reads a properties answer: key=value lines, # comments.
func parseKV(body []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// permChange is one name server's answer to wipe/addWritePerm.
type permChange struct {
	BrokerName string `json:"brokerName"`
	NameServer string `json:"nameServer"`
	Topics     int    `json:"topics"`
}

func (s *adminSession) writePerm(ctx context.Context, code int16, brokerName string) ([]permChange, error) {
	var out []permChange
	var errs []error
	for _, ns := range s.ns {
		resp, err := s.a.NameServerRequestAt(ctx, ns, code, &wire.BrokerNameRequestHeader{BrokerName: brokerName}, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n := 0
		if code == remoting.RequestWipeWritePermOfBroker {
			var h wire.WipeWritePermResponseHeader
			err = resp.DecodeHeader(&h)
			n = h.WipeTopicCount
		} else {
			var h wire.AddWritePermResponseHeader
			err = resp.DecodeHeader(&h)
			n = h.AddTopicCount
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, permChange{brokerName, ns, n})
	}
	return out, errors.Join(errs...)
}

// orderConf is updateOrderConf's result.
type orderConf struct {
	Topic     string `json:"topic"`
	Method    string `json:"method"`
	OrderConf string `json:"orderConf,omitempty"`
}

func runUpdateOrderConf(ctx context.Context, s *adminSession, in flagValues) (orderConf, error) {
	r := orderConf{Topic: in.str("topic"), Method: strings.ToLower(in.str("method")), OrderConf: in.str("orderConf")}
	h := &wire.KVConfigRequestHeader{Namespace: wire.NamespaceOrderTopicConfig, Key: r.Topic, Value: r.OrderConf}
	switch r.Method {
	case "get":
		resp, err := s.a.NameServerRequest(ctx, remoting.RequestGetKVConfig, h, nil)
		if err != nil {
			return r, err
		}
		var gh wire.GetKVConfigResponseHeader
		err = resp.DecodeHeader(&gh)
		r.OrderConf = gh.Value
		return r, err
	case "put":
		if r.OrderConf == "" {
			return r, fmt.Errorf("%w: updateOrderConf -m put needs -v brokerName:num[;brokerName:num]", errAdminUsage)
		}
		_, err := s.eachNameServer(ctx, remoting.RequestPutKVConfig, h, nil)
		return r, err
	case "delete":
		_, err := s.eachNameServer(ctx, remoting.RequestDeleteKVConfig, h, nil)
		return r, err
	}
	return r, fmt.Errorf("%w: -m %q: want put, get or delete", errAdminUsage, r.Method)
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

// offsetExt reads the "offset" field of an offset answer's header.
func offsetExt(addr string, resp *remoting.RemotingCommand) (int64, error) {
	off, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("offset answer of %s: %q is not a number", addr, resp.ExtFields["offset"])
	}
	return off, nil
}
