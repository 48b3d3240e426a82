// Command raftmq is the single raftmq binary: name server, broker node, local
// dev cluster, admin CLI, failover report, load generator and version, as
// cobra subcommands.
//
// Each subcommand only turns flags into a config, builds the component with
// New and runs it with a context that SIGINT/SIGTERM cancel. Library code
// never exits the process; main is the only place that sets the exit code.
//
// # Files
//
//   - main.go: the root command (--log-level, --gc-percent: GOGC 400 unless
//     GOGC or the flag say otherwise) and exit codes; logflags.go:
//     --log-format and --log-file, and the process logger (SIGHUP reopens
//     its file).
//   - namesrv.go, broker.go: `raftmq namesrv` and `raftmq broker -c`
//     (-p prints the effective config and exits): one warning for ignored
//     RocketMQ keys, every config problem in one message. The stock
//     RocketMQ 4.9 files they are tested with are in
//     testdata/rocketmq-4.9.8 (see its NOTICE).
//   - console.go: mounts the web console (package console) on the name
//     server's HTTP port for `raftmq namesrv` and `raftmq dev`.
//   - dev.go: `raftmq dev`, the in-process cluster of internal/devcluster
//     (a name server and a 3-node group on loopback) with its ready line.
//   - bench.go: `raftmq bench produce|consume`: TPS, MB/s and HDR
//     percentiles of send latency (produce) or store→consume latency
//     (consume); bench_timer.go: `raftmq bench timer`, timer messages on
//     a local 3-process group: fire-time error (optionally across a leader
//     SIGKILL) and the leader's RSS with --pending far-future timers.
//     bench_cpu.go: each broker process's CPU µs per message, from the
//     members' runtime info sampled before and after the run.
//     bench_scale.go: `raftmq bench scale`, per step of topics (or
//     consumer groups) on a local 3-process group: creation time, leader
//     RSS, REGISTER_BROKER body (JSON and zlib) and 64-sender throughput.
//     bench_restart.go: `raftmq bench restart`, fills a local 3-process
//     group to --fill bytes of CommitLog, restarts it and times readiness,
//     the first send and the first pull of offset 0. bench_rate.go: the
//     --rate pacing of bench produce.
//   - version.go: `raftmq version [--json]` from the binary's build info.
//   - tls_flags.go: --tls and --tls-trust-cert of admin and bench.
//   - admin*.go: `raftmq admin`, mqadmin's commands plus raftStatus,
//     leadershipTransfer and balanceLeaders, as a table of name, flags,
//     request and renderer; table or --json output; errors naming the
//     unreachable address; -n defaults to $NAMESRV_ADDR. admin_acl.go: the
//     plain ACL commands (updateAclConfig, deleteAclConfig,
//     updateGlobalWhiteAddr, clusterAclConfigVersion) sent to every member
//     of a group, and the --aclAccessKey/--aclSecretKey signing flags of
//     every admin command. admin_parity*.go: the rows appended for the rest
//     of mqadmin (docs/admin.md maps them all). admin_member.go:
//     addMember, removeMember, replaceMember (docs/operations.md).
//     admin_raft.go: raftStatus, leadershipTransfer, balanceLeaders over
//     the SDK admin's RaftGroups, TransferLeadership and PlanLeaderBalance.
//   - failover*.go: `raftmq failover`, which SIGKILLs the leader of a
//     real-process cluster and times detection, route drop, election, route
//     update, first write and consume resume (failover_cluster.go: the
//     processes, from internal/proccluster; failover_consume.go: the push
//     consumer that times the resume).
//
// Tests re-exec the test binary as the real main when RAFTMQ_TEST_RUN_MAIN
// is set, to check exit codes and to run real processes.
package main
