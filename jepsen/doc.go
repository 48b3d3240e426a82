// Package jepsen is raftmq's chaos suite: it starts a name server and a
// 3-node broker group as real OS processes (the raftmq binary built from
// this module), drives them with the project's SDK (plain and idempotent
// producers, a push-consumer group), injects faults on a schedule (kill -9,
// SIGSTOP/SIGCONT, Raft partitions through userspace link proxies or
// network namespaces, fsync EIO under strace, disk full, crashes that lose
// unsynced writes, name-server kills, client↔broker partitions, packet
// loss, slow flushes, a flipped bit in a closed segment, a follower wiped
// and re-added through the membership requests, a follower wiped and
// restarted in place, which must rejoin rather than bootstrap), heals, drains,
// and checks the history: nothing
// acknowledged lost, nothing phantom, one value per queue offset across
// acks, consumers and replicas, dense queues, no idempotent duplicates,
// at most one leader per term, per-key order of ordered sends, no
// consumer-offset regression across failover, every retry-exhausted
// message in the DLQ, and per-fault availability. Run writes a
// verdict table, a JSON history and a PNG timeline. README.md says how to
// run it and what each nemesis does.
//
// # Files
//
//   - run.go: the profiles (short, full; saturation in
//     profile_saturation.go), Options, Run (start, workload and
//     schedule, heal, drain, catch up, final read, check, report), the
//     RAFT_STATUS monitor.
//   - cluster.go: building the binary and running the real-process cluster
//     (package internal/proccluster places, configures and signals the
//     processes; here the proxies or namespaces, partitions, leader and
//     catch-up probes).
//   - proxy.go: a one-way TCP proxy per ordered node pair for Raft
//     connections; a partition freezes bytes instead of dropping them.
//   - netns.go: the network-namespace mode (bridge, veths, iptables drops
//     on the receiver).
//   - diskfull.go: the disk-full nemesis (a tmpfs under one node's data).
//   - nemesis.go: the Nemesis interface, the original nemeses, ring
//     partitions, the schedule (a heal's own account joins its window's
//     detail).
//   - nemesis_chaos.go, netns_chaos.go: kill-namesrv, partition-clients,
//     net-loss-delay (netem, or iptables statistic loss), slow-disk (the
//     slowfs build's flush-delay control file), bitflip-segment (flip,
//     restart, expect the member to report the damage, repair it with
//     wipeAndReAdd); BuildTags, DefaultNemeses; EnsureNetnsTools.
//   - nemesis_member.go: replace-member (removeMember a follower, wipe its
//     data, restart it with raftJoin=true, addMember it: wipeAndReAdd; heal
//     waits for three voters) and rebuild-member (SIGKILL a follower, wipe
//     its data, restart it from its conf without raftJoin, half the time
//     right after a name server restart; its log must say it joined rather
//     than bootstrapped; heal waits until it caught up).
//   - nemesis_keep.go: before any wipe, the member's ConsumeQueues of the
//     suite's topics are copied into the report (report/wiped/NN-NODE,
//     64 MiB at most per wipe) for a later byte-for-byte comparison.
//   - workload.go: SDK producers and consumers, the final read of every
//     queue on every node; workload_txn.go: the transactional sends
//     (client.TransactionProducer, decision fixed by the value).
//   - history.go: the recorded operations, deliveries, reads, fault
//     windows and leader observations.
//   - checker.go: CheckHistory and its verdict; checker_txn.go: no committed
//     transaction lost, no rolled-back one delivered or stored.
//   - workload_timer.go, checker_timer.go: timer messages (their own topic
//     and consumer group, a final read of the topic) and their checks: none
//     lost, early or phantom, every fired one on every replica.
//   - checker_positions.go: one value (and one CommitLog offset) per
//     position of every topic the workloads use, across acks, deliveries
//     and replicas, and dense queues in every node's final read.
//   - checker_floor.go: when a replica's retention floor excuses entries
//     below it (a disk-full window, disk pressure, a pending catch-up).
//   - workload_chaos.go, checker_chaos.go: the ordered (per-key order of
//     acks, stored copies and deliveries), offsets (no regression of a
//     replicated commit across failover) and retry/DLQ (every exhausted
//     message dead-lettered on every replica that keeps its DLQ offset)
//     workloads and their checks.
//   - report.go, report_png.go, report_labels.go: verdict table, history
//     JSON, timeline PNG (fault labels stacked in rows so close faults stay
//     readable).
//   - errors.go: the package's sentinels.
//   - cmd/raftmq-jepsen: the command that runs a profile.
package jepsen
