// Package store is the broker's message store, RocketMQ's
// DefaultMessageStore minus the CommitLog's write path: the CommitLog's
// segments are written by package raftlog (each Raft entry a frame holding
// stored messages), and this package reads them by physical offset, builds
// the ConsumeQueues and the IndexFile from committed entries, keeps the
// checkpoint, and enforces retention and the disk guards. It always runs
// under the Raft hooks a broker group installs. Files go through the FS seam
// of package storage; the stored-message codec is in package wire.
//
// Queue offsets are assigned by the dispatcher, in Apply order, so they are
// dense per queue and identical on every replica; replaying a message that
// is already in its queue finds its offset and adds nothing. CommitLog bytes
// are never rewritten for consumers: reads patch QUEUEOFFSET into their copy.
//
// # Files
//
//   - store.go: Config (RocketMQ store keys), Open/Close, the Raft hooks,
//     min/max offsets, offset by time, QueryMessage, earliest times.
//   - getmessage.go: GetMessage with every GetMessageStatus of RocketMQ,
//     QUEUEOFFSET patched into the returned copy; LookMessageByOffset.
//   - commitlog.go: the CommitLog over the segment queue: reads by
//     physical offset, the patcher raftlog calls for each command entry
//     (PHYSICALOFFSET and STORETIMESTAMP in place, entry CRC resealed).
//   - raftmode.go: what a group needs from the store: starting a queue at
//     a snapshot's offset, flushing the logics before a snapshot, the disk
//     check before a write.
//   - consumequeue.go: 20-byte units (physical offset, size, tags code),
//     one MappedFileQueue per topic and queue, recovery of the last files,
//     truncation, search by time; after a crash, checking units against the
//     CommitLog and cutting a queue at its first torn unit. catchup.go:
//     Backfill (a peer's units in front of a queue restarted at a snapshot's
//     offset; its redo record, applied again when the queue opens) and the
//     units' transfer encoding.
//   - indexfile.go: RocketMQ's IndexFile layout and the IndexService (keys
//     topic#KEY and topic#UNIQ_KEY, files rolled when full, files newer
//     than the checkpoint dropped after a crash). index_backfill.go: a
//     catch-up's older range indexed through the same key code into files
//     of its own, moved in front of the live ones as they complete.
//   - message.go: Message (wire.Message under the store's name) and the
//     dispatch decoder, CheckAndDecode, over wire's stored-message layout.
//   - dispatch.go: the dispatchers and the reput service that feeds
//     committed messages to them in CommitLog order; new-message listeners
//     wake held pulls.
//   - checkpoint.go: the checkpoint file (flushed offsets, logics and index
//     timestamps) and the abort file.
//   - retention.go: fileReservedTime/deleteWhen deletion and the disk guard
//     (refuse writes above 90 %, resume at 85 %, forced deletion above 85 %,
//     early deletion of expired files above 75 %).
//   - errors.go: the package's sentinels (ErrDiskFull, ErrMessageIllegal,
//     ErrServiceNotAvailable, …; the file-level ones are package storage's).
//
// Lock order: the segment queue's lock, then a mapped file's flush lock,
// then its data lock.
package store
