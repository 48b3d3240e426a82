// Package abuse holds the abuse suite (its tests only): each
// case attacks the leader of a real cluster — a name server and a 3-node
// Raft group, each a separate raftmq process (package proccluster) — while
// a well-behaved producer sends, and asserts the process stays up, its
// heap stays under the case's stated bound, the producer's p99 stays
// within 2× of its baseline measured just before the attack, and every
// message acknowledged during the whole suite can be read back.
//
// It runs only with RAFTMQ_ABUSE=1 (or RAFTMQ_ABUSE_FULL=1, RAFTMQ_LONG=1):
// .ci/run runs it as a step of its own, so the README's test command stays
// short (the suite also builds raftmq without -race). The CI profile uses
// small counts and 5 s frame-read and write timeouts (not the broker's
// 10 s) and reports the p99 ratio without asserting it (its few probe sends
// share the cores with the rest of CI); RAFTMQ_ABUSE_FULL=1 runs the full
// counts (2,000 half frames, 10,000 held pulls, …) with the broker's
// default limits and asserts it. Figures are in BENCHMARKS.md with their
// command.
//
// # Files
//
//   - doc.go: this map (the package has no non-test code).
//   - suite_test.go: the cluster, the heap/RSS sampler, the well-behaved
//     producer (baseline and under attack), the ack check, the report.
//   - cases_test.go: the attacks: half frames, slowloris, topic flood,
//     retry-queue bomb, offset-key flood, held pulls, a client that never
//     reads, a spoofed idempotence id.
//   - leader_test.go: the cases' helpers follow a leader change (run by
//     the suite on its cluster, after the attacks).
package abuse
