// Package storage is the disk layer beneath the message store (broker/store)
// and the Raft log (raftlog): a file-system seam that tests can replace, the
// memory-mapped segment files both build on, and the one atomic-write helper
// of the project. It imports nothing from the project.
//
// File map:
//
//   - fs.go: FS and File, the seam every disk operation goes through; OSFS,
//     the real file system (golang.org/x/sys/unix: fallocate, fdatasync,
//     mmap/msync, SEEK_DATA, statfs); IsNoSpace; MkdirAllDurable and
//     SyncNames (at open: names a killed process left unsynced).
//   - faultfs.go: FaultFS, an in-memory FS for crash and error tests:
//     volatile and durable images per file, Crash (optionally torn), injected
//     errors, capacity limits, flipped bits.
//   - crashfs.go (build tag crashfs): CrashFS, the real file system with file
//     data held in process memory until it is synced, so a SIGKILL loses
//     exactly the unsynced bytes; under the tag OSFS returns one (the chaos
//     suite's crash-unsynced build). crashfs_off.go keeps the real FS
//     otherwise. PageCacheID (both files): the boot id, or under the tag
//     the process, whose end loses unsynced writes.
//   - mappedfile.go: MappedFile, one preallocated mapped file of fixed size
//     with a single appender (optionally buffered: one pwrite per flush),
//     refcounted read views (Slice) and flush (msync).
//   - mappedfilequeue.go: MappedFileQueue, same-sized files named by start
//     offset forming one byte space (CommitLog segments, ConsumeQueues, the
//     Raft log's file space); FileName. prepend.go: Prepend/PrependTo, files
//     before the first one (a member backfilling older data), and
//     PrependToFilled, which names a new file only once it holds its fill.
//   - atomic.go: WriteFileAtomic (temporary file, fdatasync, rename, directory
//     fsync) for small files that must never be torn; WriteFileAtomicPerm
//     for files holding secrets; RemoveTempFiles, for the owner of a file
//     at open, drops the temporary files a crash left (opening and
//     destroying a MappedFileQueue does so for its segments').
//   - errors.go: sentinel errors.
package storage
