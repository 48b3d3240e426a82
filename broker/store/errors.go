package store

import (
	"errors"

	"github.com/raftmq/raftmq/storage"
)

// Sentinel errors of package store. Callers compare with errors.Is; most are
// returned wrapped with detail (file name, offset, size) so the message says
// what was wrong. The broker maps them to RocketMQ response codes.
var (
	// ErrOutOfRange (storage.ErrOutOfRange) is returned for a read past the
	// written end of the CommitLog, or for an offset no file holds.
	ErrOutOfRange = storage.ErrOutOfRange

	// ErrFileClosed (storage.ErrFileClosed) is returned when a file is read
	// after retention removed it; readers retry through the queue.
	ErrFileClosed = storage.ErrFileClosed

	// ErrDiskFull (storage.ErrDiskFull) means the disk has no room for a new
	// segment or its use is above diskMaxUsedSpaceRatio. Writes are refused;
	// maps to SERVICE_NOT_AVAILABLE. Free disk space to recover.
	ErrDiskFull = storage.ErrDiskFull

	// ErrCorruptFile (storage.ErrCorruptFile) marks an on-disk file whose
	// name, size or header does not match what the store expects.
	ErrCorruptFile = storage.ErrCorruptFile

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
)
