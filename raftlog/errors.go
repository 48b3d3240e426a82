package raftlog

import "errors"

// Sentinel errors of package raftlog. Callers compare with errors.Is; most
// are returned wrapped with the index, position or file at fault.
//
// GetLog is the exception: a missing index returns raft.ErrLogNotFound itself
// (unwrapped), because hashicorp/raft compares it with == to decide that a
// follower needs a snapshot.
var (
	// ErrCorruptFrame is returned by the frame decoder when a frame fails its
	// magic, size, bounds or CRC check. Nothing at or past such a frame is
	// served; recovery truncates a torn tail at the first one.
	ErrCorruptFrame = errors.New("raftlog: corrupt frame")

	// ErrEndOfData is returned by the scanner on an all-zero header: the end of
	// the written data of a segment.
	ErrEndOfData = errors.New("raftlog: end of data")

	// ErrFrameTooLarge is returned by StoreLogs for an entry whose frame does
	// not fit in one segment (a frame never spans segments). Raise the segment
	// size (mappedFileSizeCommitLog) or lower the batcher's byte bound.
	ErrFrameTooLarge = errors.New("raftlog: entry too large for a segment")

	// ErrIndexGap is returned by StoreLogs when an entry's index is not the
	// next one: the store is monotonic, and after InstallSnapshot the FSM must
	// call ResetAt before Raft stores the entry after the snapshot.
	ErrIndexGap = errors.New("raftlog: non-consecutive raft index")

	// ErrBadRange is returned by DeleteRange for a range that is neither a
	// prefix nor a suffix of the log (hashicorp/raft never asks for one).
	ErrBadRange = errors.New("raftlog: delete range is neither prefix nor suffix")

	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("raftlog: log store closed")

	// ErrStoreFailed is returned (wrapping the first I/O error) by every write
	// after a write, flush or truncate failed with an I/O error (ENOSPC from
	// fallocate or a write only fails that batch): the durable state of the
	// tail is unknown, so the store refuses writes until Recover cuts a failed
	// StoreLogs batch back, or until it is reopened, which rescans and
	// truncates the tail. Reads of stored entries keep working.
	ErrStoreFailed = errors.New("raftlog: log store stopped after a write failure; reopen to recover")

	// ErrInvalidConfig is returned by Config.Validate and Open for a bad
	// setting, wrapped with the key at fault.
	ErrInvalidConfig = errors.New("raftlog: invalid config")

	// ErrCorruptMeta is returned by Open when the meta file exists but fails
	// its checks; the operator must restore it or remove the whole log
	// directory (the node then catches up from the leader).
	ErrCorruptMeta = errors.New("raftlog: corrupt meta file")

	// ErrLogMismatch is returned by Open when the log and its index disagree
	// below the durable checkpoint (media corruption, or files from another
	// node copied in).
	ErrLogMismatch = errors.New("raftlog: log and index disagree")
)
