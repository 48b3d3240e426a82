// Package jepsen is raftmq's chaos suite: it starts a name server and a
// 3-node broker group as real OS processes (the raftmq binary built from
// this module), drives them with the project's SDK (plain and idempotent
// producers, a push-consumer group), injects faults on a schedule (kill -9,
// SIGSTOP/SIGCONT, Raft partitions through userspace link proxies, fsync
// EIO under strace), heals, drains, and checks the history: nothing
// acknowledged lost, nothing phantom, one value per queue offset across
// acks, consumers and replicas, dense queues, no idempotent duplicates,
// at most one leader per term, and per-fault availability. Run writes a
// verdict table, a JSON history and a PNG timeline.
package jepsen
