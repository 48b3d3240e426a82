package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
		name:       "statsAll",
		short:      "Show every topic's in/out TPS and 24-hour counts, per consumer group",
		flags:      []flagSpec{toggleShort("activeTopic", "a", "only topics with traffic"), str("topic", "t", "only this topic")},
		run:        runStatsAll,
		perRequest: true,
		table: columns([]any{"#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"},
			func(r statsRow) []any {
				return []any{r.Topic, orDash(r.Group), r.Accumulation, fmt.Sprintf("%.2f", r.InTPS), fmt.Sprintf("%.2f", r.OutTPS), r.InMsg24Hour, r.OutMsg24Hour}
			}),
	},
	adminCommand[subGroupDeletion]{
		name:  "deleteSubGroup",
		short: "Delete a subscription group from a broker (-b) or a cluster (-c, with its retry and DLQ topics)",
		flags: []flagSpec{str("groupName", "g", "subscription group").req(), brokerAddrFlag,
			str("clusterName", "c", "every broker group of this cluster"), yesNo("removeOffset", "r", false, "also remove its consumer offsets (false: they stay, and the group resumes from them if created again)")},
		oneOf: []string{"brokerAddr", "clusterName"},
		run:   runDeleteSubGroup,
		table: tableDeleteSubGroup,
	},
	adminCommand[*wire.ConsumerConnection]{
		name:  "consumerConnection",
		short: "Show a consumer group's connected clients, subscriptions and consume mode",
		flags: []flagSpec{str("consumerGroup", "g", "consumer group").req(), brokerAddrFlag},
		run: func(ctx context.Context, s *adminSession, in flagValues) (*wire.ConsumerConnection, error) {
			cc, _, err := s.consumerConnection(ctx, in.str("consumerGroup"), in.str("brokerAddr"))
			return cc, err
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
			yesNo("offline", "o", false, "the source group is offline: true also copies a topic its online consumers do not subscribe to")},
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
		flags: []flagSpec{str("msgId", "i", "message id (UNIQ_KEY)").req(), topicFlag, str("consumerGroup", "g", "with -d: have this group's client consume the message now and print its verdict"),
			str("clientId", "d", "with -g: the client id (consumerConnection lists them) to consume the message"), toggleShort("showAll", "a", "print every copy (up to 32)")},
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
			num64("offset", "o", 0, "queue offset").req(), str("bodyFormat", "f", "body charset (UTF-8 only)")},
		run: func(ctx context.Context, s *adminSession, in flagValues) (messageView, error) {
			if err := utf8Only(in, "bodyFormat", "f"); err != nil {
				return messageView{}, err
			}
			return runQueryMsgByOffset(ctx, s, in)
		},
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
			if err := utf8Only(in, "charsetName", "c"); err != nil {
				return printedMessages{}, err
			}
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
			if err := utf8Only(in, "charsetName", "c"); err != nil {
				return printedMessages{}, err
			}
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
			body, err := client.ConfigUpdateBody(map[string]string{in.str("key"): in.str("value")})
			if err != nil {
				return nil, fmt.Errorf("%w: %v", errAdminUsage, err)
			}
			return listed(s.eachNameServer(ctx, remoting.RequestUpdateNamesrvConfig, nil, body))
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
			return listed(s.eachNameServer(ctx, remoting.RequestPutKVConfig,
				&wire.PutKVConfigRequestHeader{Namespace: in.str("namespace"), Key: in.str("key"), Value: in.str("value")}, nil))
		},
		table: func(w *tabwriter.Writer, addrs []string) {
			fmt.Fprintf(w, "create or update kv config to namespace success.%v\n", addrs)
		},
	},
	adminCommand[[]string]{
		name:  "deleteKvConfig",
		short: "Delete a KV config entry from every name server",
		flags: []flagSpec{str("namespace", "s", "namespace").req(), str("key", "k", "key").req()},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			return listed(s.eachNameServer(ctx, remoting.RequestDeleteKVConfig, &wire.KVConfigRequestHeader{Namespace: in.str("namespace"), Key: in.str("key")}, nil))
		},
		table: func(w *tabwriter.Writer, addrs []string) {
			fmt.Fprintf(w, "delete kv config from namespace success.%v\n", addrs)
		},
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
				if _, err := s.memberRequest(ctx, a, code, nil); err != nil {
					errs = append(errs, err)
					continue
				}
				done = append(done, a)
			}
			return done, partial(len(done), errs)
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

// memberRequest sends a request any member answers, each its own way (its
// runtime facts, its files), to the member at addr, as mqadmin sends it to
// the address given: a member that is down is not stood in for by
// another. Answers are BrokerRequest's; a member that did not answer is
// named.
func (s *adminSession) memberRequest(ctx context.Context, addr string, code int16, header any) (*remoting.RemotingCommand, error) {
	resp, err := s.a.BrokerRequest(ctx, addr, code, header, nil)
	var be *client.BrokerError
	if err != nil && !errors.As(err, &be) {
		err = fmt.Errorf("broker %s: %w", addr, err)
	}
	return resp, err
}

// groupTarget is one broker group a leader-bound command acts on: the
// member address -b named (addr set), or a group of the cluster -c named
// (name set), reached through its leader.
type groupTarget struct{ name, addr string }

// groupTargets is -b's address, or every broker group of cluster.
func (s *adminSession) groupTargets(ctx context.Context, addr, cluster string) ([]groupTarget, error) {
	if addr != "" {
		return []groupTarget{{addr: addr}}, nil
	}
	names, err := s.a.ClusterGroups(ctx, cluster)
	if err == nil && len(names) == 0 {
		err = fmt.Errorf("%w: cluster %q has no broker group", errNotFound, cluster)
	}
	out := make([]groupTarget, 0, len(names))
	for _, n := range names {
		out = append(out, groupTarget{name: n})
	}
	return out, err
}

// leaderRequest sends a request only a group's leader answers rightly
// (mqadmin sends it to the master) to t, and returns the answer and the
// address that gave it. With -b's address a member that refuses it as its
// leader's passes it on (BrokerRequest); a group is asked through its
// leader, waiting out an election (LeaderRequest).
func (s *adminSession) leaderRequest(ctx context.Context, t groupTarget, code int16, header any) (*remoting.RemotingCommand, string, error) {
	if t.addr != "" {
		resp, err := s.a.BrokerRequest(ctx, t.addr, code, header, nil)
		return resp, t.addr, err
	}
	return s.a.LeaderRequest(ctx, t.name, code, header, nil)
}
