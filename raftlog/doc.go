// Package raftlog makes hashicorp/raft's log BE the broker's mmap CommitLog.
//
// Each raft.Log is a frame (frame.go) in the CommitLog file space: a queue
// of equal mapped segments named by start offset (package storage).
// LogStore (logstore.go) implements raft.LogStore and raft.MonotonicLogStore
// over it: StoreLogs appends a batch and, in sync mode, makes it durable
// with one pwrite and one msync per touched segment before returning (Raft's
// durability and the group commit); an 8-byte-per-index sidecar (index.go)
// maps raft indexes to positions and a small meta file anchors recovery;
// delete.go holds the three deletion rules (logical prefix, physical suffix,
// reset after InstallSnapshot) and the retention entry point. Layout is a
// deterministic function of the Raft log and the segment size, so all
// replicas hold the same bytes at the same positions and a stored message's
// physical offset (and msgId) survives failover.
//
// Nothing here knows about brokers or messages; the broker plugs in through
// Options.PatchCommand, Locate/LocateHeader/EndOf and the snapshot-position
// helpers.
//
// # Files
//
//   - frame.go: the frame codec (44-byte header, extensions, data, CRC32-C)
//     and the scanner that steps over frames and blank fillers.
//   - logstore.go: LogStore, Options, Open/OpenOnQueue, StoreLogs (frames
//     buffered and written with one pwrite per touched segment), GetLog,
//     Checkpoint, Close; a batch refused on ENOSPC is cut back and the log
//     keeps working, an EIO stops it until Recover; the batch is cut back
//     at once as far as the disk allows, under a meta record, so neither
//     a process restart nor a power loss brings it back.
//   - index.go: the index sidecar, the recovery scan from the anchor at
//     Open (frames checked, indexes consecutive, terms never decreasing;
//     and the rewrite of a recorded truncation's zeros past the recovered
//     end), Locate, LocateHeader (no data CRC), EndOf, RecoveryReport.
//   - delete.go: DeleteRange's three cases, ResetAt, DeleteSegmentsBefore
//     (retention; the new first index is persisted before files go),
//     FirstIndexFrom.
//   - snapshot.go: the SnapshotPosition record, IndexedSnapshotStore,
//     WritePositionFor, RestoreFrom and SettleRestore (keep or reset the
//     log at the snapshot's end position).
//   - catchup.go: the backfill record a reset leaves, and BackfillBegin/
//     Write/Commit/Finish, which put a peer's retained frames before the
//     reset position (resumable, checked before the first index moves);
//     ReadRange (whole, CRC-checked entries only) and FirstPosition, the
//     peer's side.
//   - corrupt.go: telling a torn last batch from a corrupt frame with
//     acknowledged frames after it (CorruptionError: Open refuses to cut).
//   - scrub.go: damage below the anchor: ScrubSegment (one closed
//     segment, paced by the caller), VerifySegmentAt, DamageError (also
//     GetLog's and ReadRange's report of a frame failing its CRC).
//   - meta.go: the atomically replaced meta file (anchor, first index,
//     segment size, reset pending, and the end of the bytes a cut in
//     doubt zeroes, a suffix truncation or a failed batch: set with the
//     anchor at the cut before the zeros, cleared once they are synced,
//     so Open ends the log at the cut and writes zeros whose sync failed
//     for real); version 2, version-1 records still read.
//   - cache.go: the entries of the latest StoreLogs calls, kept for GetLog
//     (Raft reads every entry back right after storing it).
//   - warm.go: durable zeros ahead of the writer, so a sync never converts
//     unwritten extents; the claim protocol under the write lock.
//   - stable.go: the BoltDB StableStore, the file snapshot store, zap →
//     hclog.
//   - raftconfig.go: Config (dLeger* keys and LAN-tuned Raft timing),
//     peers, the raft.Config and bootstrap configuration.
//   - errors.go: the package's sentinels.
//   - raftlogtest/contract.go: the LogStore contract suite, run against
//     this store and hashicorp/raft's in-memory store.
package raftlog
