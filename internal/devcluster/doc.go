// Package devcluster runs a whole raftmq cluster in one process: a name
// server and one or more Raft broker groups whose members talk over
// loopback TCP and keep their data in real files. `raftmq dev` runs one,
// and so do the tests of every package above broker (client, cmd/raftmq)
// that need a real group. It is the only place such a cluster is built, so
// a change to how a member is put together is made once.
//
// Tests inside package broker cannot import it (it imports broker); they
// build members from in-memory parts instead.
//
// # Files
//
//   - devcluster.go: Options, Start, MustStart (for tests), the member
//     lifecycle (Kill, Stop, Restart), Leader, WaitReady, Close.
package devcluster
