package storage

import "errors"

// Sentinel errors of package storage. Callers compare with errors.Is; they
// are returned wrapped with detail (file name, offset, size).
var (
	// ErrFileFull is returned by MappedFile.Append when the data does not fit in
	// the remaining space of the file; the caller rolls to the next file.
	ErrFileFull = errors.New("storage: mapped file full")

	// ErrOutOfRange is returned for a read outside [0, WrotePosition) of a
	// mapped file, or for an offset no file of a queue holds.
	ErrOutOfRange = errors.New("storage: offset out of range")

	// ErrFileClosed is returned when a mapped file (or queue) is used after
	// Close or Destroy; readers retry through the queue, which no longer lists it.
	ErrFileClosed = errors.New("storage: mapped file closed")

	// ErrDiskFull means the disk has no room for a new segment (fallocate or
	// write failed with ENOSPC) or its use is above the configured ratio. Writes
	// are refused; free disk space to recover.
	ErrDiskFull = errors.New("storage: disk full")

	// ErrCorruptFile marks an on-disk file whose name, size or header does not
	// match what the caller expects (e.g. a segment of the wrong size).
	ErrCorruptFile = errors.New("storage: corrupt file")

	// ErrInvalidSize is returned for a mapped file or queue opened with a
	// size that is not positive.
	ErrInvalidSize = errors.New("storage: invalid file size")

	// ErrCrashed is returned by FaultFS handles opened before FaultFS.Crash: the
	// simulated process died, so the handle is gone.
	ErrCrashed = errors.New("storage: faultfs crashed")
)
