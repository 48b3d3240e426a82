// Package timerindex is a replica's on-disk index of pending timer
// messages (RocketMQ 5's __STARTDELIVERTIME / TIMER_DELIVER_MS /
// TIMER_DELAY_SEC): a disk-backed timing wheel of one-second buckets.
//
// The timer messages themselves are stored in the replicated CommitLog (in
// the system topic rmq_sys_wheel_timer); the broker's FSM appends one
// fixed-size Record per message (deliver time, queue offset in that topic)
// to the file of the message's bucket, deterministically from the log, so
// every replica builds the same files. The leader reads due buckets, re-puts
// their messages to the real topics and replicates its progress; the index
// itself knows nothing about Raft. Memory is one bit per non-empty bucket
// (a week of buckets is 76 KiB), whatever the number of pending timers.
//
// # Files
//
//   - record.go: the 20-byte record (little-endian deliver time and queue
//     offset, CRC32-C) and its decoder (fuzzed).
//   - index.go: Index, the bucket files under <dir>/<bucket/4096>/<bucket>,
//     the in-memory bitmap of non-empty buckets, appends, reads, the
//     advance that moves what is left of passed buckets (its sources set
//     aside until the next Sync), the applied mark (the last Raft index
//     whose effects are in the files, with the boot id it was written
//     under), the write-ahead intent of the entry being applied (Begin:
//     each touched bucket's prior size, the sources set aside) that Open
//     undoes after a kill, and Sync, which ends by recording the synced
//     mark with every bucket's size, which Open cuts the files back to
//     after a reboot. Either way the files stay byte-identical to the
//     peers' (the replicated cursor counts records by position).
//   - image.go: the index cut at its applied mark, written after a
//     snapshot's tables, and Replace, which makes a replica installing the
//     snapshot hold those files (emptied at mark 0 first, so an
//     interrupted replace is redone); the image header decoder is fuzzed.
package timerindex
