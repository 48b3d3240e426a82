package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/client"
)

func init() {
	// mqadmin finds its sub-commands ignoring case (MQAdminStartup's
	// findSubCommand), so `raftmq admin topiclist` works too. cobra's switch for this is process-wide, so every raftmq
	// sub-command name matches case-insensitively; no two differ only by
	// case (TestAdminTable checks the admin ones).
	cobra.EnableCaseInsensitive = true
}

// adminCommands is the table of `raftmq admin` commands: mqadmin's names
// and flags (RocketMQ's tools/command/*SubCommand) plus raftmq's Raft
// commands. Adding a command is one row here plus its run function;
// adminCommand.cobra gives every row the same -n/--json/--timeout
// handling, error explanations and exit status.
var adminCommands = []adminEntry{
	adminCommand[topicUpdate]{
		name:  "updateTopic",
		short: "Create or update a topic on one broker (-b) or on every broker group of a cluster (-c)",
		flags: []flagSpec{
			topicFlag,
			str("brokerAddr", "b", "create on this broker only (its group's leader)"),
			str("clusterName", "c", "create on every broker group of this cluster"),
			num("readQueueNums", "r", 8, "read queue count"),
			num("writeQueueNums", "w", 8, "write queue count"),
			num("perm", "p", 6, "permission: 2 write, 4 read, 6 read-write"),
			yesNo("order", "o", false, "ordered topic: true or false"),
			yesNo("unit", "u", false, "unit topic: true or false (stored in topicSysFlag)"),
			yesNo("hasUnitSub", "s", false, "has unit subscriptions: true or false (stored in topicSysFlag)"),
			str("attributes", "a", "RocketMQ 5 topic attributes: +key=value,… adds or changes, -key deletes (e.g. +message.type=FIFO)"),
		},
		oneOf: []string{"brokerAddr", "clusterName"},
		run:   runUpdateTopic,
		table: tableUpdateTopic,
	},
	adminCommand[topicDeletion]{
		name:  "deleteTopic",
		short: "Delete a topic from a cluster's brokers and from every name server",
		flags: []flagSpec{topicFlag, str("clusterName", "c", "cluster to delete it from (empty: every cluster)")},
		run:   runDeleteTopic,
		table: func(w *tabwriter.Writer, r topicDeletion) {
			fmt.Fprintf(w, "delete topic [%s] from cluster [%s] success.\n", r.Topic, r.Cluster)
		},
	},
	adminCommand[topicList]{
		name:  "topicList",
		short: "List every topic the name server knows (-c: with its cluster and consumer groups, as mqadmin)",
		flags: []flagSpec{toggleShort("clusterModel", "c", "print cluster, topic and consumer group per line")},
		run:   runTopicList,
		table: tableTopicList,
	},
	adminCommand[topicRoute]{
		name:  "topicRoute",
		short: "Show a topic's route: broker groups with their members and queue layout",
		flags: []flagSpec{topicFlag, toggleShort("list", "l", "one line per broker group with its queue counts, and the totals (mqadmin's list format)")},
		run: func(ctx context.Context, s *adminSession, in flagValues) (topicRoute, error) {
			rd, err := s.a.TopicRoute(ctx, in.str("topic"))
			return topicRoute{rd: rd, list: in.bool("list")}, err
		},
		table: tableTopicRoute,
	},
	adminCommand[[]queueStatus]{
		name:  "topicStatus",
		short: "Show min/max offsets of every queue of a topic",
		flags: []flagSpec{topicFlag},
		run:   runTopicStatus,
		table: columns([]any{"#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"}, func(q queueStatus) []any {
			return []any{q.BrokerName, q.QueueID, q.MinOffset, q.MaxOffset, fmtTime(time.UnixMilli(q.LastUpdate))}
		}),
	},
	adminCommand[clusterListing]{
		name:  "clusterList",
		short: "List clusters, broker groups and their members (brokerId 0 is the Raft leader)",
		flags: []flagSpec{str("clusterName", "c", "only this cluster"), toggleShort("moreStats", "m", "print yesterday's and today's in/out totals"),
			str("interval", "i", "accepted for mqadmin compatibility (prints once)")},
		run:   runClusterList,
		table: tableClusterList,
	},
	adminCommand[memberTables]{
		name:  "brokerStatus",
		short: "Show a broker's runtime facts (role, leader, CommitLog offsets, held pulls, ...); -c: every member of a cluster",
		flags: []flagSpec{brokerAddrFlag, str("clusterName", "c", "every registered member of this cluster")},
		oneOf: []string{"brokerAddr", "clusterName"},
		run: func(ctx context.Context, s *adminSession, in flagValues) (memberTables, error) {
			return readMembers(ctx, s, in, runBrokerStatus)
		},
		table: tableBrokerStatus,
	},
	adminCommand[consumerProgress]{
		name:  "consumerProgress",
		short: "Show a consumer group's offsets and lag per queue",
		flags: []flagSpec{str("groupName", "g", "consumer group").req(), str("topicName", "t", "only this topic"),
			yesNo("showClientIP", "s", false, "show the IP of the client each queue is allocated to: true or false")},
		run:   runConsumerProgress,
		table: tableConsumerProgress,
	},
	adminCommand[msgLookups]{
		name:  "queryMsgById",
		short: "Show messages by their offset msgId, or by their client msgId (UNIQ_KEY) with -t or by searching every topic",
		flags: []flagSpec{str("msgId", "i", "offset message id, or the client message id (UNIQ_KEY) applications log; several separated by commas").req(),
			str("topic", "t", "topic of a client message id (saves searching every topic)"),
			str("cluster", "c", "look client message ids up on this cluster's broker groups only"),
			str("bodyFormat", "f", "body charset (UTF-8 only: raftmq always prints bodies, as UTF-8)"),
			str("consumerGroup", "g", "with -d: have this group's client consume the message now and print its verdict"),
			str("clientId", "d", "with -g: the client id (consumerConnection lists them) to consume the message"),
			yesNo("sendMessage", "s", false, "true: send the message again to its topic (same body, tags, keys, properties and client msgId) and print the send result"),
			str("unitName", "u", "refused: mqadmin's unit name picks the resend producer's name servers from an address server, which raftmq has not")},
		run:   runQueryMsgByID,
		table: tableMsgLookups,
	},
	adminCommand[[]messageView]{
		name:  "queryMsgByKey",
		short: "Find a topic's messages by key (through the brokers' index files)",
		flags: []flagSpec{
			topicFlag,
			str("msgKey", "k", "message key").req(),
			num64("beginTimestamp", "b", 0, "stored at or after (ms since epoch)"),
			num64("endTimestamp", "e", 0, "stored at or before (ms since epoch; 0 = no bound, as mqadmin)"),
			num("maxNum", "m", 64, "at most this many per broker group"),
			str("cluster", "c", "look the key up on this cluster's broker groups only (RocketMQ 5.3.1's -c); a number is taken as maxNum, RocketMQ 5.1.4-5.3.0's -c"),
		},
		run: runQueryMsgByKey,
		table: columns([]any{"#Message ID", "#Offset Message ID", "#QID", "#Offset", "#Store Time"}, func(v messageView) []any {
			return []any{v.MsgID, v.OffsetMsgID, v.QueueID, v.QueueOffset, fmtTime(time.UnixMilli(v.StoreTimestamp))}
		}),
	},
	adminCommand[[]queueOffset]{
		name:  "resetOffsetByTime",
		short: "Move a consumer group's offsets on a topic to the first message stored at or after a time",
		flags: []flagSpec{
			str("group", "g", "consumer group").req(),
			topicFlag,
			when("timestamp", "s", "now, ms since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS").req(),
			yesNo("force", "f", true, "true: move offsets either way; false: only backwards"),
			str("broker", "b", "with -q: reset only that queue, of this broker's group (RocketMQ 5)"),
			num("queue", "q", -1, "with -b: the queue id to reset"),
			num64("offset", "o", -1, "with -b and -q: the queue's new offset (default: the one found for -s)"),
		},
		run: runResetOffsetByTime,
		table: columns([]any{"#brokerName", "#queueId", "#offset"}, func(r queueOffset) []any {
			return []any{r.BrokerName, r.QueueID, r.Offset}
		}),
	},
	adminCommand[memberTables]{
		name:  "getBrokerConfig",
		short: "Show a broker's configuration; -c: every member of a cluster",
		flags: []flagSpec{brokerAddrFlag, str("clusterName", "c", "every registered member of this cluster")},
		oneOf: []string{"brokerAddr", "clusterName"},
		run: func(ctx context.Context, s *adminSession, in flagValues) (memberTables, error) {
			return readMembers(ctx, s, in, func(ctx context.Context, s *adminSession, addr string) (map[string]string, error) {
				return s.a.BrokerConfig(ctx, addr)
			})
		},
		table: tableBrokerConfig,
	},
	adminCommand[brokerConfigUpdate]{
		name:  "updateBrokerConfig",
		short: "Update one broker config key on a broker (-b) or on every member of a cluster (-c)",
		flags: []flagSpec{
			brokerAddrFlag,
			str("clusterName", "c", "every broker of this cluster"),
			str("key", "k", "config key").req(),
			str("value", "v", "config value").req(),
		},
		oneOf: []string{"brokerAddr", "clusterName"},
		run:   runUpdateBrokerConfig,
		table: func(w *tabwriter.Writer, r brokerConfigUpdate) {
			for _, a := range r.Brokers {
				fmt.Fprintf(w, "update broker config success, %s\n", a)
			}
		},
	},
	adminCommand[subGroupUpdate]{
		name:  "updateSubGroup",
		short: "Create or update a consumer (subscription) group on a broker (-b) or a cluster (-c)",
		flags: []flagSpec{
			str("groupName", "g", "consumer group").req(),
			brokerAddrFlag,
			str("clusterName", "c", "every broker group of this cluster"),
			yesNo("consumeEnable", "s", true, "consume enabled"),
			// false, as mqadmin sets them, not SubscriptionGroupConfig's true.
			yesNo("consumeFromMinEnable", "m", false, "consume from min offset when new"),
			yesNo("consumeBroadcastEnable", "d", false, "broadcasting allowed (pulls of a broadcasting consumer are refused without it)"),
			yesNo("consumeMessageOrderly", "o", false, "orderly consumption"),
			yesNo("notifyConsumerIdsChanged", "a", true, "notify consumers when the group changes"),
			num("retryQueueNums", "q", 1, "retry queue count"),
			num("retryMaxTimes", "r", 16, "max redeliveries before the DLQ"),
			num64("brokerId", "i", 0, "broker id to consume from (stored only: raftmq serves pulls on the group's leader)"),
			num64("whichBrokerWhenConsumeSlowly", "w", 1, "broker id to consume from when slow (stored only)"),
		},
		oneOf: []string{"brokerAddr", "clusterName"},
		run:   runUpdateSubGroup,
		table: func(w *tabwriter.Writer, r subGroupUpdate) {
			for _, a := range r.brokers {
				fmt.Fprintf(w, "create subscription group to %s success.\n", a)
			}
			// RocketMQ 4.9 SubscriptionGroupConfig.toString, which mqadmin prints.
			g := r.v
			fmt.Fprintf(w, "SubscriptionGroupConfig [groupName=%s, consumeEnable=%t, consumeFromMinEnable=%t, consumeBroadcastEnable=%t, "+
				"retryQueueNums=%d, retryMaxTimes=%d, brokerId=%d, whichBrokerWhenConsumeSlowly=%d, notifyConsumerIdsChangedEnable=%t]\n",
				g.GroupName, g.ConsumeEnable, g.ConsumeFromMinEnable, g.ConsumeBroadcastEnable,
				g.RetryQueueNums, g.RetryMaxTimes, g.BrokerID, g.WhichBrokerWhenConsumeSlowly, g.NotifyConsumerIdsChangedEnable)
		},
	},
	adminCommand[sendResult]{
		name:  "sendMessage",
		short: "Send one message and print where it was stored",
		flags: []flagSpec{
			topicFlag,
			str("body", "p", "message body").req(),
			str("keys", "k", "message keys (space separated)"),
			str("tags", "c", "message tag"),
			str("broker", "b", "broker name (group) of -i's queue; ignored without -i, as in mqadmin"),
			num("qid", "i", -1, "queue id to send to (needs -b)"),
		},
		run: runSendMessage,
		table: columns([]any{"#Broker Name", "#QID", "#Queue Offset", "#Send Result", "#MsgId", "#OffsetMsgId"}, func(r sendResult) []any {
			return []any{r.BrokerName, r.QueueID, r.QueueOffset, r.SendStatus, r.MsgID, r.OffsetMsgID}
		}).one,
	},
	adminCommand[[]*client.RaftGroup]{
		name:  "raftStatus",
		short: "Show each broker group's Raft members: role, term, last/commit/applied index, lag, last contact",
		long: "Asks every registered member of each broker group for its Raft status (RAFT_STATUS, code 30001). Lag is " +
			"the leader's last log index minus the member's; last contact is how long ago the member last heard from " +
			"the leader (0 on the leader). Members in the Raft configuration that are not registered show as Unknown.",
		flags: []flagSpec{str("brokerName", "b", "only this broker group"), str("clusterName", "c", "only this cluster")},
		run:   runRaftStatus,
		table: tableRaftStatus,
	},
	adminCommand[*client.LeadershipTransfer]{
		name:  "leadershipTransfer",
		short: "Move a broker group's Raft leadership to a named member, or to the most caught-up follower",
		long: "Asks the group's leader (LEADERSHIP_TRANSFER, code 30002) to catch the target up and hand over; answers " +
			"when the new leader is known, then waits for the name server to route it as brokerId 0. Writes arriving " +
			"during the transfer wait inside the broker and are not failed.",
		flags: []flagSpec{
			str("brokerName", "b", "broker group").req(),
			str("targetId", "t", "Raft id (dLegerSelfId) of the new leader; empty: the most caught-up follower"),
		},
		run: runLeadershipTransfer,
		table: columns([]any{"#Broker Name", "#From", "#New Leader", "#New Leader Addr", "#Term", "#Took", "#Registered As BID 0"},
			func(r *client.LeadershipTransfer) []any {
				return []any{r.BrokerName, r.FromID, r.NewLeaderID, orDash(r.NewLeaderAddr), r.Term,
					(time.Duration(r.TookMillis) * time.Millisecond).String(), r.Registered}
			}).one,
	},
	adminCommand[[]client.LeaderMove]{
		name:  "balanceLeaders",
		short: "Move each group's leadership to its preferredLeaderId, or spread leaders over hosts",
		long: "For every broker group (of -c cluster): if its members configure preferredLeaderId and another member " +
			"leads, transfer to the preferred one; groups without a preference are moved off hosts that lead at least " +
			"two more groups than another host holding a member. One transfer at a time; --dry-run only prints the plan.",
		flags: []flagSpec{str("clusterName", "c", "only this cluster"), toggle("dry-run", "print the plan without moving anything")},
		run:   runBalanceLeaders,
		table: tableBalance,
	},
}

// Flags several commands share, with mqadmin's short names.
var (
	topicFlag      = str("topic", "t", "topic name").req()
	brokerAddrFlag = str("brokerAddr", "b", "broker address host:port")
)

// newAdminCmd is `raftmq admin`: one cobra command per adminCommands row.
// Every command needs -n; output is a table unless --json is given.
func newAdminCmd(g *globalFlags) *cobra.Command {
	f := &adminFlags{g: g}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "mqadmin-style administration: topics, groups, messages, offsets, broker config, Raft leadership",
		Long: "Administration commands named and flagged like RocketMQ's mqadmin (updateTopic, topicList, clusterList, " +
			"consumerProgress, ...) plus raftmq's raftStatus, leadershipTransfer and balanceLeaders. Every command takes " +
			"-n NAMESRV (host:port, several separated by ';'; default $NAMESRV_ADDR). Output is a table; --json prints JSON for scripts.",
		Args:                       unknownAdminCommand,
		RunE:                       func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SuggestionsMinimumDistance: 2,
	}
	// A mistyped command name followed by its flags (-t, -g, ...) fails on
	// the first flag admin itself lacks: report the name, the real mistake.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c == cmd {
			if uerr := unknownAdminCommand(c, c.Flags().Args()); uerr != nil {
				return uerr
			}
		}
		return err
	})
	cmd.PersistentFlags().StringVarP(&f.namesrv, "namesrvAddr", "n", "", "name server address(es), host:port[;host:port] (default: the NAMESRV_ADDR environment variable)")
	cmd.PersistentFlags().BoolVar(&f.json, "json", false, "print JSON instead of a table")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 5*time.Second, "timeout of each request")
	f.acl.register(cmd.PersistentFlags())
	f.tls.register(cmd.PersistentFlags())
	for _, e := range adminCommands {
		cmd.AddCommand(e.cobra(f))
	}
	return cmd
}

// unknownAdminCommand is reached when no admin command matched the first
// argument: it fails (exit status 1) and suggests close names.
func unknownAdminCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := "`raftmq admin --help` lists the commands"
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		hint = "did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%w: unknown command %q for \"raftmq admin\"; %s", errAdminUsage, args[0], hint)
}
