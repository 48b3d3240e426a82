// Package broker is the RocketMQ-compatible broker node: one member of a
// broker group that is a Raft group. The Raft log is the CommitLog
// (package raftlog over the store's segments); committed entries are
// applied by the FSM, which builds ConsumeQueue/IndexFile entries, assigns
// queue offsets and keeps the replicated tables (topics, subscription groups,
// consumer offsets, producer dedup, delay-level progress, the timer cursor).
//
// The package has two halves. The group is the Raft member, built from its
// parts (store, log store, stable store, snapshot store, transport), with
// its FSM and the leader-side batcher. The request processors see the group
// only through the narrow interface in api.go and the store's read API, so
// they run the same over a real group and over a test fake.
//
// # Files
//
// The group:
//
//   - group.go: building and closing a group, bootstrap, roles, leadership
//     transfer, retention through the log store, snapshots on close and by
//     log size.
//   - group_parts.go: Parts (FS, stable store, snapshot store, transport)
//     that NewGroup is built from; OpenDiskParts (BoltDB, file snapshots,
//     TCP) and the in-memory ones for tests (NewInmemParts on an
//     InmemNetwork, InmemSnapshotStore).
//   - group_config.go: GroupConfig, the broker.conf keys of the store, Raft
//     and batcher, validated.
//   - raft_tls.go: RaftTLSConfig (raftTls* keys) and the mutual-TLS stream
//     layer, whose handshake refuses peers whose certificate names no
//     member of the configuration.
//   - fastelect.go: the fast election when the leader's process is gone
//     (an inbound Raft connection ended and the leader's Raft port refuses
//     connections): the stream wrapper that reports ended connections,
//     the probe, the survivors' turns and the TimeoutNow a member sends
//     itself to campaign at once.
//   - command.go: the replicated command types (an append-only table), their
//     encoding and how to add one; command_records.go: the records that
//     topic and group commands and snapshots store instead of wire types.
//   - fsm.go: Apply (positions from the log store, dedup, dispatch in
//     CommitLog order), Snapshot and Restore.
//   - state.go: the replicated tables and the snapshot image;
//     txn_state.go: the transaction table (decided halves, check counts,
//     the check walk's floor) and its CmdTxnCheck record.
//   - dedup.go: the idempotent producer's windows, evicted in log time.
//   - batcher.go: many concurrent sends into one Raft entry; the wait
//     target; each request answered with its own result. batcher_pool.go:
//     the reused per-request encode buffers.
//   - group_diskfull.go: the FS wrapper that reports ENOSPC to the disk
//     guard, the leader's step-down loop, recovery of a stopped Raft log.
//   - group_metrics.go: Raft and batcher metrics.
//   - group_preferred.go: when the preferred-leader loop may transfer
//     (gossip says alive, the leader's progress says answering and caught
//     up).
//   - member.go: membership changes (learner add, promotion once caught
//     up, removal with a quorum guard), the live configuration checked
//     against dLegerPeers at restart, brokerIds from the configuration;
//     member_progress.go: the transport wrapper through which the leader
//     learns each peer's match index; member_watch.go: a member removed
//     while down learns it from the routed leader and records it;
//     member_promote.go: promotion waits for the learner's full-data
//     catch-up (the leader asks it over RAFT_STATUS), the promotion waits
//     in RAFT_STATUS and metrics; member_join.go: an empty member without
//     raftJoin joins a running group (asked over RAFT_STATUS and with a
//     term-0 pre-vote over the Raft transport) instead of bootstrapping.
//   - group_peers.go: the members' client (TLS, cluster signing) and the
//     one route lookup and RAFT_STATUS ask of the group's other members.
//   - catchup.go: full-data catch-up of a member whose log was reset for a
//     snapshot (the retained CommitLog before it and the queue units,
//     fetched from the leader, paced); catchup_serve.go: CATCHUP_READ
//     (30010) and the sources it is read through; catchup_vote.go: the
//     transport wrapper that keeps a member from standing for election
//     while it catches up (ADR 0019); catchup_index.go: the last phase,
//     dispatching the backfilled messages to the store's index backfill
//     (the IndexFile for key and UNIQ_KEY queries); index_rebuild.go:
//     at a start after a crash, the messages below the local snapshot
//     whose index files the store's recovery dropped are indexed again
//     from the log (Raft re-applies only what follows the snapshot), in
//     the background once the member is up, into backfill files; a marker
//     (raft/INDEX_REBUILD) resumes it after another crash;
//     catchup_pace.go: the adaptive pace (raftCatchupAdaptive): the leader
//     times the send requests it answers and, while it serves a catch-up,
//     halves the pace when their p99 rises above 1.5x the p99 it saw
//     without one and raises it while near it (AIMD between
//     raftCatchupMinBytesPerSecond and raftCatchupBytesPerSecond); the
//     fetcher asks for it (CATCHUP_READ op "pace") and sets its pacer.
//   - scrub.go: the background scrub of closed CommitLog segments
//     (raftScrubBytesPerSecond) and what damage to the acknowledged log
//     does: found by the scrub, a pull or CATCHUP_READ, it stops the
//     member (leadership handed away, Raft shut down, DAMAGED marker,
//     raft_log_damaged metric); Raft's start turns an unreadable entry
//     into an error.
//
// The node and its processors (one file per request code family):
//
//   - api.go: the interface the processors use (put, commit offsets, update
//     tables, read the store and the applied state).
//   - config.go: BrokerConfig (RocketMQ broker keys, the group, gossip,
//     logs), derived ports and ids; Validate reports every bad setting;
//     tls.go: the tls* keys turned into the listeners' and the name-server
//     links' TLS.
//   - config_rocketmq.go: the RocketMQ 4.9 keys raftmq accepts without a
//     field, each with why it is ignored (docs/config.md's table).
//   - node.go: Node, one broker node (group + controller) with Start, Run
//     and Close.
//   - controller.go: the node's remoting servers, processor table and
//     pools, role-change hook, lifecycle; controller_gossip.go,
//     controller_metrics.go: its gossip membership and metrics;
//     metrics_topic.go: per-topic and per-group traffic series (capped)
//     and MetricNames.
//   - send.go (10/310/320), pull.go (11, the subscription checks and the
//     pull's filter), hold.go (long polling),
//     heartbeat.go and clientmgr.go (34/35/38, producer and consumer
//     tables), offset.go (14/15/29-32, the offset coalescer), sendback.go
//     (36, retry and DLQ), schedule.go (delay levels and reput, the
//     re-put of held-back messages, the retention pin at the oldest
//     delayed message not yet re-put), lock.go (41/42),
//     query.go (12/33), register.go (REGISTER_BROKER to every name server),
//     admin.go, admin_config.go, admin_raft.go (topic/group admin, broker
//     config, RAFT_STATUS and LEADERSHIP_TRANSFER); admin_member.go
//     (ADD_RAFT_MEMBER 30003, REMOVE_RAFT_MEMBER 30004); admin_cpu.go
//     (the process CPU and identity keys of GET_BROKER_RUNTIME_INFO).
//   - timer.go: timer messages (TIMER_DELAY_SEC, TIMER_DELAY_MS,
//     TIMER_DELIVER_MS, __STARTDELIVERTIME): the send-side rewrite to
//     rmq_sys_wheel_timer, the replicated TimerCursor and its
//     CmdTimerProgress, the leader's timer service (re-puts through
//     reput in schedule.go, shared with the delay levels), the retention
//     pin at the oldest pending timer; timer_fsm.go: what the FSM writes
//     to the replica's on-disk index (package broker/timerindex) and how
//     it moves late records when the cursor advances; timer_image.go: the
//     index's files at the snapshot travel after its tables, and a replica
//     that installs it takes them (the records of timers stored before).
//   - admin_tools.go, admin_stats.go, admin_reset.go: what RocketMQ's tools
//     read (mqadmin, rocketmq-dashboard, rocketmq-exporter): stats items in
//     RocketMQ's shape (315, runtime-info rates, consume TPS), 317, 204/328,
//     307 and 309 relayed to the client, 321, 314, 300/351/352, 306/316/329/27, and
//     222 relayed to live consumers as 220; admin_config_group.go:
//     UPDATE_BROKER_CONFIG forwarded to the group's members and saved in
//     storePathRootDir/config/runtimeConfig.properties.
//   - reply.go (324/325/326): request-reply: CLUSTER on request messages,
//     the requester's connection (producer table, else the connection its
//     requests came on), the push of a reply, its storage
//     (storeReplyMessageEnable); the reply topic and, with
//     traceTopicEnable, the trace topic routed from start and created on
//     first write.
//   - txn.go: transactions (37 END_TRANSACTION, 39 CHECK_TRANSACTION_STATE
//     sent to producers): halves rewritten to RMQ_SYS_TRANS_HALF_TOPIC, the
//     commit/rollback entry, the leader's check-back walk, the
//     transaction* config keys and metrics; txn_group.go: the Group's side
//     (one CmdTxnEnd entry per decision, the table's reads, the retention
//     pin at the oldest half the walk has not passed).
//   - sqlfilter.go: SQL92 subscriptions (enablePropertyFilter): the
//     store.MessageFilter over stored properties, the compiled heartbeat
//     subscription. Package broker/filter parses and evaluates the
//     expressions; CHECK_CLIENT_CONFIG (46, heartbeat.go) rejects a bad
//     expression or a disabled filter at consumer start, heartbeats compile
//     and keep it, and pulls answer SUBSCRIPTION_PARSE_FAILED (own
//     expression), FILTER_DATA_NOT_EXIST (the heartbeat's does not compile),
//     SUBSCRIPTION_NOT_EXIST (no subscription) or SYSTEM_ERROR (filter off).
//     The official Go client never sends 46 (its CheckClientInBroker is
//     empty), so with it a bad expression shows only as pull errors.
//   - acl.go: plain ACL (aclEnable): ACLConfig (aclEnable, aclFile,
//     aclReloadInterval, clusterAuth*), the guard every request passes on
//     the remoting servers (what each request code needs: PUB/SUB on which
//     topic and group, or an admin account), the cluster account's
//     signature on the broker's own calls; the rules live in package
//     broker/acl. acl_admin.go: the ACL admin codes 50-53.
//   - limits.go: LimitsConfig (the limits against abuse: connections,
//     write queue, frame-read and write timeouts, held pulls,
//     auto-creation rate and cap), their metrics, the auto-creation
//     limiter, and the idempotent producer id stored as its digest
//     (sealProducerID); limits_hold.go: the held-pull counts
//     and their SYSTEM_BUSY answer. The other limits of the family sit
//     where they bite (queue counts in admin.go, offset commits in
//     offset.go, maxBatchMessages in send.go).
//   - errors.go: the package's sentinels.
//
// Tests: group_*_test.go run groups of three members, on in-memory parts
// unless the test is about files or TCP (randomized faults in
// group_chaos_test.go, partitions, restarts from snapshots on disk);
// integration_*_test.go run a name server with a node over a fake or a real
// group (in-memory Raft parts; files and TCP for the official RocketMQ Go
// client);
// abuse_test.go sends each abusive request the limits bound to a real
// group and checks the refusal, its count and that no state grew
// (limits_test.go: held pulls, auto-creation, idempotence digests,
// VIEW_MESSAGE_BY_ID past the applied position; package abuse attacks a
// real process cluster);
// batcher_policy_test.go drives the batcher against a fake Raft;
// bench_*_test.go hold GroupPut, SendPath and the failover benchmarks.
package broker
