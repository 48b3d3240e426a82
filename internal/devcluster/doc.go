// Package devcluster runs a whole raftmq cluster in one process: a name
// server and one or more Raft broker groups whose members talk over
// loopback TCP and keep their data in real files. `raftmq dev` runs one,
// and so do the tests of every package above broker (client, cmd/raftmq)
// that need a real group. It is the only place such a cluster is built, so
// a change to how a member is put together is made once.
//
// With Options.InMemory the members run on broker's in-memory parts
// instead: Raft over an in-memory network, store and log in an in-memory
// FS, nothing synced. Clients still reach the members over TCP. Tests use
// it unless disk or Raft over TCP is what they check (restart from disk,
// durability); `raftmq dev` keeps its data on disk under --dir, so a
// restarted dev cluster finds its topics and messages.
//
// Tests inside package broker cannot import it (it imports broker); they
// build members from in-memory parts instead.
//
// # Files
//
//   - devcluster.go: Options, Start, MustStart (for tests), the member
//     lifecycle (Kill, Stop, Restart), SetRaftPartitioned (in-memory Raft
//     network), Leader, WaitReady, Close.
//   - member.go: AddMember, a new member that joins a running group
//     (raftJoin) and waits to be added (membership tests).
package devcluster
