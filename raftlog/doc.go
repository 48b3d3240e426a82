// Package raftlog makes hashicorp/raft's log BE the broker's mmap CommitLog.
//
// Each raft.Log is a frame (frame.go) in the CommitLog file space: a
// MappedFileQueue of equal segments named by start offset. LogStore
// (logstore.go) implements raft.LogStore and raft.MonotonicLogStore over it:
// StoreLogs appends a batch and, in sync mode, makes it durable with one
// msync per touched segment before returning (Raft's durability and the
// group commit); an 8-byte-per-index sidecar (index.go) maps raft indexes to
// positions and a small meta file anchors recovery; delete.go holds the
// three deletion rules (logical prefix, physical suffix, reset after
// InstallSnapshot) and the retention entry point. Layout is a deterministic
// function of the Raft log and the segment size, so all replicas hold the
// same bytes at the same positions and a stored message's physical offset
// (and msgId) survives failover.
//
// stable.go provides the BoltDB StableStore and the file snapshot store;
// raftconfig.go the broker.conf keys (dLeger*) and LAN-tuned Raft timing.
// Package raftlogtest holds the LogStore contract suite. Nothing here knows
// about brokers or messages; the broker plugs in through
// Options.PatchCommand, Locate/EndOf and ResetAt.
package raftlog
