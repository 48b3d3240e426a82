package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// CommitLog is the message log: a MappedFileQueue of segments named by
// start offset (RocketMQ CommitLog). The Raft log store (package raftlog)
// writes and recovers the segments, framing its entries around the stored
// messages; the CommitLog reads messages at their physical offsets.
type CommitLog struct {
	log *zap.Logger
	mfq *storage.MappedFileQueue
}

func newCommitLog(fsys storage.FS, dir string, fileSize int, log *zap.Logger) (*CommitLog, error) {
	mfq, err := storage.OpenMappedFileQueue(fsys, dir, fileSize)
	if err != nil {
		return nil, fmt.Errorf("commit log %s: %w", dir, err)
	}
	return &CommitLog{log: log, mfq: mfq}, nil
}

// Queue returns the segment queue (reads, dispatch, retention).
func (c *CommitLog) Queue() *storage.MappedFileQueue { return c.mfq }

// MinOffset returns the first retained offset.
func (c *CommitLog) MinOffset() int64 { return c.mfq.MinOffset() }

// MaxOffset returns the end of the written data.
func (c *CommitLog) MaxOffset() int64 { return c.mfq.MaxOffset() }

// Read returns a view of size bytes at a physical offset; the caller must
// Release it. It never crosses a segment or the written end.
func (c *CommitLog) Read(offset int64, size int) (*storage.Slice, error) {
	mf := c.mfq.FindByOffset(offset)
	if mf == nil {
		return nil, fmt.Errorf("%w: no CommitLog segment holds offset %d (min %d, max %d)", ErrOutOfRange, offset, c.MinOffset(), c.MaxOffset())
	}
	s, err := mf.Read(int(offset-mf.FileFromOffset()), size)
	return s, closing(mf, offset, err)
}

// closing turns the ErrFileClosed of a read of mf into the store being
// unavailable when mf was closed but not destroyed: the store is closing
// under the reader, and the message is still stored. Readers take
// ErrFileClosed for a segment retention removed, and step past what it
// held.
func closing(mf *storage.MappedFile, offset int64, err error) error {
	if errors.Is(err, ErrFileClosed) && !mf.IsDestroyed() {
		return fmt.Errorf("%w: %w: CommitLog segment %s closed while reading offset %d",
			ErrServiceNotAvailable, ErrStoreClosed, mf.Path(), offset)
	}
	return err
}

// ReadMessage returns a view of the verified stored message at offset: its
// size from TOTALSIZE, magic, lengths, body and entry CRC checked. A damaged
// entry is ErrCorruptMessage and is never returned.
func (c *CommitLog) ReadMessage(offset int64) (*storage.Slice, error) {
	s, err := c.readMessage(offset)
	if errors.Is(err, ErrCorruptMessage) {
		return nil, c.corrupt(offset, err)
	}
	return s, err
}

// readMessage is ReadMessage without reporting damage: a failed check is
// returned wrapping ErrCorruptMessage, and the caller says what it means.
func (c *CommitLog) readMessage(offset int64) (*storage.Slice, error) {
	mf := c.mfq.FindByOffset(offset)
	if mf == nil {
		return nil, fmt.Errorf("%w: no CommitLog segment holds offset %d (min %d, max %d)", ErrOutOfRange, offset, c.MinOffset(), c.MaxOffset())
	}
	s, err := mf.ReadFrom(int(offset - mf.FileFromOffset()))
	if err != nil {
		return nil, closing(mf, offset, err)
	}
	l, err := wire.CheckEntry(s.B, true)
	if err == nil && l.Magic == wire.MagicBlank {
		err = fmt.Errorf("%w: blank filler at %d", ErrOutOfRange, offset)
	}
	if err != nil {
		s.Release()
		if errors.Is(err, ErrCorruptMessage) {
			return nil, err
		}
		return nil, fmt.Errorf("CommitLog entry at %d: %w", offset, err)
	}
	s.B = s.B[:l.Size:l.Size]
	return s, nil
}

// claimedBy reports whether the bytes at offset hold offset in a stored
// message's PHYSICALOFFSET field, as the message stored there does.
func (c *CommitLog) claimedBy(offset int64) bool {
	s, err := c.Read(offset, wire.OffPhysicalOffset+8)
	if err != nil {
		return false
	}
	defer s.Release()
	return int64(binary.BigEndian.Uint64(s.B[wire.OffPhysicalOffset:])) == offset
}

// ReadVerified returns a view of exactly size bytes at offset after checking
// the entry (used with sizes from the ConsumeQueue).
func (c *CommitLog) ReadVerified(offset int64, size int32) (*storage.Slice, error) {
	s, err := c.Read(offset, int(size))
	if err != nil {
		return nil, err
	}
	if err := c.verifyEntry(s.B, offset, size); err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

// verifyEntry checks that b is the intact message of size bytes stored at
// offset; damage is logged and returned wrapping ErrCorruptMessage.
func (c *CommitLog) verifyEntry(b []byte, offset int64, size int32) error {
	l, err := wire.CheckEntry(b, true)
	if err == nil && (l.Magic == wire.MagicBlank || l.Size != int(size)) {
		err = fmt.Errorf("%w: entry size %d, ConsumeQueue says %d", ErrCorruptMessage, l.Size, size)
	}
	if err == nil && int64(binary.BigEndian.Uint64(b[wire.OffPhysicalOffset:])) != offset {
		err = fmt.Errorf("%w: PHYSICALOFFSET field does not match %d", ErrCorruptMessage, offset)
	}
	if err != nil {
		return c.corrupt(offset, err)
	}
	return nil
}

// corrupt logs and returns the damage of the entry at offset, naming its
// segment file and the offset in it (where an operator looks).
func (c *CommitLog) corrupt(offset int64, err error) error {
	path, rel := "", int64(-1)
	if mf := c.mfq.FindByOffset(offset); mf != nil {
		path, rel = mf.Path(), offset-mf.FileFromOffset()
	}
	c.log.Error("corrupt CommitLog entry not served", zap.Int64("offset", offset), zap.String("file", path),
		zap.Int64("fileOffset", rel), zap.Error(err))
	return &CorruptEntryError{Offset: offset, Path: path, FileOffset: rel, Err: err}
}

// CorruptEntryError is a stored message that failed its checks when read:
// it is never served. It unwraps to the check's error (ErrCorruptMessage).
type CorruptEntryError struct {
	// Offset is the message's CommitLog (physical) offset; Path and
	// FileOffset locate it in its segment file (-1 if the segment is gone).
	Offset     int64
	Path       string
	FileOffset int64
	Err        error
}

// Error implements error.
func (e *CorruptEntryError) Error() string {
	return fmt.Sprintf("CommitLog entry at %d (file %s, offset %d): %v", e.Offset, e.Path, e.FileOffset, e.Err)
}

// Unwrap returns the check's error.
func (e *CorruptEntryError) Unwrap() error { return e.Err }

// segmentCursor reads consecutive messages (a pull batch) while holding one
// reference on their segment, instead of a lookup, a refcount and a view
// per message. Call release when done.
type segmentCursor struct {
	cl *CommitLog
	mf *storage.MappedFile
}

func (sc *segmentCursor) release() {
	if sc.mf != nil {
		sc.mf.Release()
		sc.mf = nil
	}
}

// message returns the verified bytes of the message at offset; they alias
// the mapping and stay valid until release (or a read in another segment).
func (sc *segmentCursor) message(offset int64, size int32) ([]byte, error) {
	if sc.mf == nil || offset < sc.mf.FileFromOffset() || offset >= sc.mf.FileFromOffset()+int64(sc.mf.Size()) {
		sc.release()
		mf := sc.cl.mfq.FindByOffset(offset)
		if mf == nil {
			return nil, fmt.Errorf("%w: no CommitLog segment holds offset %d", ErrOutOfRange, offset)
		}
		if !mf.Retain() {
			// Answered as removed, a message of a segment only closed
			// would move the consumer past it.
			return nil, closing(mf, offset, fmt.Errorf("%w: the CommitLog segment that held offset %d is removed: %w", ErrOutOfRange, offset, ErrFileClosed))
		}
		sc.mf = mf
	}
	pos := int(offset - sc.mf.FileFromOffset())
	if size < 0 || pos+int(size) > sc.mf.WrotePosition() {
		// Units are written only for applied messages, which lie wholly
		// below the written end of a retained segment: a unit running past
		// it was damaged (its size, most likely). It names no message, and
		// taking it for a removed one would skip the message it stood for.
		return nil, fmt.Errorf("%w: ConsumeQueue unit [%d,%d) runs past the written end %d of %s",
			ErrCorruptMessage, offset, offset+int64(size), sc.mf.FileFromOffset()+int64(sc.mf.WrotePosition()), sc.mf.Path())
	}
	b := sc.mf.Bytes()[pos : pos+int(size) : pos+int(size)]
	if err := sc.cl.verifyEntry(b, offset, size); err != nil {
		return nil, err
	}
	return b, nil
}

// StoreTimeAt returns the STORETIMESTAMP of the message at offset (for
// time-based ConsumeQueue search).
func (c *CommitLog) StoreTimeAt(offset int64, size int32) (int64, error) {
	s, err := c.Read(offset, int(size))
	if err != nil {
		return 0, err
	}
	defer s.Release()
	if len(s.B) < wire.MinMessageSize {
		return 0, fmt.Errorf("%w: %d bytes at %d", ErrCorruptMessage, len(s.B), offset)
	}
	sysFlag := int32(binary.BigEndian.Uint32(s.B[wire.OffSysFlag:]))
	return int64(binary.BigEndian.Uint64(s.B[wire.StoreTimestampOffset(sysFlag):])), nil
}

// close closes the segments (flush first for a clean shutdown).
func (c *CommitLog) close() error { return c.mfq.Close() }
