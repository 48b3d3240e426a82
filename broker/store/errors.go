package store

import "errors"

// Sentinel errors of package store. Callers compare with errors.Is; most are
// returned wrapped with detail (file name, offset, size) so the message says
// what was wrong. The broker maps them to RocketMQ response codes.
var (
	// ErrFileFull is returned by MappedFile.Append when the data does not fit in
	// the remaining space of the file; the caller rolls to the next file.
	ErrFileFull = errors.New("store: mapped file full")

	// ErrOutOfRange is returned for a read outside [0, WrotePosition) of a
	// mapped file, or for an offset no file of a queue holds.
	ErrOutOfRange = errors.New("store: offset out of range")

	// ErrFileClosed is returned when a mapped file (or queue) is used after
	// Close or Destroy; readers retry through the queue, which no longer lists it.
	ErrFileClosed = errors.New("store: mapped file closed")

	// ErrDiskFull means the disk has no room for a new segment (fallocate or
	// write failed with ENOSPC) or its use is above the configured ratio. Writes
	// are refused; maps to SERVICE_NOT_AVAILABLE. Free disk space to recover.
	ErrDiskFull = errors.New("store: disk full")

	// ErrCorruptFile marks an on-disk file whose name, size or header does not
	// match what the store expects (e.g. a segment of the wrong size).
	ErrCorruptFile = errors.New("store: corrupt file")

	// ErrCorruptMessage is returned by the stored-message decoder when an entry
	// fails its magic, size or CRC check. Nothing at or past such an entry is served.
	ErrCorruptMessage = errors.New("store: corrupt message")

	// ErrEndOfData is returned by the decoder on an all-zero header: the end of
	// the written data of a segment (normal at the tail during recovery).
	ErrEndOfData = errors.New("store: end of data")

	// ErrMessageIllegal maps to MESSAGE_ILLEGAL (13): the message is too large or
	// malformed (topic too long, properties too long).
	ErrMessageIllegal = errors.New("store: message illegal")

	// ErrFlushDiskTimeout maps to FLUSH_DISK_TIMEOUT (10): a SYNC_FLUSH append was
	// written but its fdatasync did not complete within syncFlushTimeout. The
	// message may still become durable.
	ErrFlushDiskTimeout = errors.New("store: flush disk timeout")

	// ErrServiceNotAvailable maps to SERVICE_NOT_AVAILABLE (14): the store is not
	// accepting writes (closed, disk full, or stopped after a write failure).
	ErrServiceNotAvailable = errors.New("store: service not available")

	// ErrStoreWriteFailed is returned (wrapped together with
	// ErrServiceNotAvailable) once a write or fdatasync has failed: the store
	// stops accepting writes because the durable state of the tail is unknown.
	// Reads of acknowledged data keep working. Restart to recover.
	ErrStoreWriteFailed = errors.New("store: write to disk failed")

	// ErrStoreClosed is returned by operations on a closed store.
	ErrStoreClosed = errors.New("store: closed")

	// ErrInvalidConfig is returned by Config.Validate, wrapped with the key at fault.
	ErrInvalidConfig = errors.New("store: invalid config")

	// ErrCrashed is returned by FaultFS handles opened before FaultFS.Crash: the
	// simulated process died, so the handle is gone.
	ErrCrashed = errors.New("store: faultfs crashed")
)
