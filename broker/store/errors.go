package store

import (
	"errors"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
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
	ErrCorruptMessage = wire.ErrCorruptMessage

	// ErrEndOfData is returned by the decoder on an all-zero header: the end of
	// the written data of a segment (normal at the tail during recovery).
	ErrEndOfData = wire.ErrEndOfData

	// ErrMessageIllegal maps to MESSAGE_ILLEGAL (13): the message is too large or
	// malformed (topic too long, properties too long).
	ErrMessageIllegal = wire.ErrMessageIllegal

	// ErrServiceNotAvailable maps to SERVICE_NOT_AVAILABLE (14): the store is not
	// accepting writes (closed or disk full).
	ErrServiceNotAvailable = errors.New("store: service not available")

	// ErrStoreClosed is returned by operations on a closed store.
	ErrStoreClosed = errors.New("store: closed")

	// ErrInvalidConfig is returned by Config.Validate, wrapped with the key at fault.
	ErrInvalidConfig = errors.New("store: invalid config")
)
