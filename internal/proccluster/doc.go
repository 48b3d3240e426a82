// Package proccluster runs a raftmq cluster as separate OS processes: a
// name server and one or more 3-node Raft broker groups, each process
// started from a conf file this package writes. The chaos suite (jepsen)
// and `raftmq failover` both use it; they add what is theirs on top
// (jepsen: Raft proxies or network namespaces, a tmpfs, strace; failover:
// its probes).
//
// Only processes started here are ever signalled, by their PID (their
// process group, so a wrapper such as strace goes with its child). Each
// child gets SIGKILL if this process dies (Pdeathsig), so a crashed run
// leaves no broker behind.
//
// # Files
//
//   - proccluster.go: Config, New (placement), WriteConfs, the process
//     lifecycle (Start, Kill, Stop, Pause, Resume, StopAll) and
//     Node (state, PID, log tail).
package proccluster
