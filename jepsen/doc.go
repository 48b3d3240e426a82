// Package jepsen is raftmq's chaos suite: it starts a name server and a
// 3-node broker group as real OS processes (the raftmq binary built from
// this module), drives them with the project's SDK (plain and idempotent
// producers, a push-consumer group), injects faults on a schedule (kill -9,
// SIGSTOP/SIGCONT, Raft partitions through userspace link proxies or
// network namespaces, fsync EIO under strace, disk full, crashes that lose
// unsynced writes), heals, drains, and checks the history: nothing
// acknowledged lost, nothing phantom, one value per queue offset across
// acks, consumers and replicas, dense queues, no idempotent duplicates,
// at most one leader per term, and per-fault availability. Run writes a
// verdict table, a JSON history and a PNG timeline. README.md says how to
// run it and what each nemesis does.
//
// # Files
//
//   - run.go: the profiles (short, full), Options, Run (start, workload and
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
//   - nemesis.go: the Nemesis interface, every nemesis, ring partitions,
//     the schedule.
//   - workload.go: SDK producers and consumers, the final read of every
//     queue on every node; workload_txn.go: the transactional sends
//     (client.TransactionProducer, decision fixed by the value).
//   - history.go: the recorded operations, deliveries, reads, fault
//     windows and leader observations.
//   - checker.go: CheckHistory and its verdict; checker_txn.go: no committed
//     transaction lost, no rolled-back one delivered or stored.
//   - workload_timer.go, checker_timer.go: timer messages (their own topic
//     and consumer group) and their checks: none lost, early or phantom.
//   - report.go, report_png.go: verdict table, history JSON, timeline PNG.
//   - errors.go: the package's sentinels.
//   - cmd/raftmq-jepsen: the command that runs a profile.
package jepsen
