package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/raftmq/raftmq/storage"
)

// meta is the small durable record that makes the log's state survive
// restarts: where recovery starts scanning (the anchor), the logical first
// index, a pending reset and the end of the bytes a cut (suffix
// truncation or failed batch) zeroes. It is rewritten atomically (temp file, fsync, rename, directory
// fsync), only on rare events: checkpoints (every CheckpointBytes of log),
// prefix deletion, suffix truncation, retention and ResetAt. It is never
// written on the StoreLogs path except through a checkpoint.
type meta struct {
	// SegmentSize is the segment size the log was written with. Positions
	// depend on it, so opening with another size is refused.
	SegmentSize int64
	// FirstIndex is the logical first index (entries below it are deleted,
	// logically or physically); 0 means "the first frame found from the
	// anchor" (a fresh or just-reset log).
	FirstIndex uint64
	// AnchorIndex is the raft index the frame at AnchorPos must carry (0 =
	// any: a fresh log). Index slots below AnchorIndex are durable in the
	// index files; recovery rebuilds slots from AnchorIndex on by scanning the
	// log from AnchorPos.
	AnchorIndex uint64
	// AnchorPos is where recovery starts scanning: the end of frame
	// AnchorIndex-1, or the reset position.
	AnchorPos int64
	// ResetPending is set while ResetAt destroys the old segments and index
	// files; Open finishes the job if a crash interrupted it.
	ResetPending bool
	// ZeroTo is the end of the bytes a cut in doubt removes (0 = none): a
	// suffix truncation, or a StoreLogs batch whose write or sync failed.
	// The cut records it, with the anchor at the cut, before any byte
	// changes, and clears it (same anchor) once its zeros are synced; if
	// that clearing fails, the store stops. While it is set, the log ends
	// at the anchor: every frame between the anchor and ZeroTo is one the
	// cut removes, even where it looks whole:
	//   - a power loss during the zeros' sync leaves any subset of them
	//     whole;
	//   - a failed batch's frames stay readable in the page cache after a
	//     process restart although they never reached the disk;
	//   - if a sync fails, the page cache shows bytes (the batch, or the
	//     zeros) the disk may not hold, and after a failed writeback the
	//     kernel marks those pages clean: no later sync writes them.
	// Open therefore ends the log at the anchor without scanning, rewrites
	// [anchor, ZeroTo) with real zero writes, syncs them and clears the
	// record before the log takes new entries (it refuses to open if the
	// clearing fails), so no entry is ever stored over a range a set
	// record covers. Checkpoints write it as 0.
	ZeroTo int64
}

const (
	metaFileName = "raftlog.meta"
	metaMagic    = 0x524C4D54 // "RLMT"
	// Version 1: magic, version, flags, segment size, first, anchor index,
	// anchor pos, crc. Version 2 adds ZeroTo before the crc. A record
	// without ZeroTo is written as version 1, so a binary that only reads
	// version 1 still opens a log with no truncation in doubt (and refuses
	// one with, rather than skip its zero rewrite).
	metaVersion1 = 1
	metaVersion2 = 2
	metaSize1    = 4 + 4 + 4 + 8 + 8 + 8 + 8 + 4
	metaSize2    = metaSize1 + 8
	metaMaxSize  = metaSize2
)

func (m meta) encode() []byte {
	version, size := uint32(metaVersion1), metaSize1
	if m.ZeroTo != 0 {
		version, size = metaVersion2, metaSize2
	}
	b := make([]byte, size)
	be := binary.BigEndian
	be.PutUint32(b[0:], metaMagic)
	be.PutUint32(b[4:], version)
	var flags uint32
	if m.ResetPending {
		flags |= 1
	}
	be.PutUint32(b[8:], flags)
	be.PutUint64(b[12:], uint64(m.SegmentSize))
	be.PutUint64(b[20:], m.FirstIndex)
	be.PutUint64(b[28:], m.AnchorIndex)
	be.PutUint64(b[36:], uint64(m.AnchorPos))
	if version == metaVersion2 {
		be.PutUint64(b[44:], uint64(m.ZeroTo))
	}
	be.PutUint32(b[size-4:], crc32.Checksum(b[:size-4], castagnoli))
	return b
}

func decodeMeta(b []byte) (meta, error) {
	var m meta
	be := binary.BigEndian
	if len(b) < 8 || be.Uint32(b[0:]) != metaMagic {
		return m, fmt.Errorf("%w: bad magic", ErrCorruptMeta)
	}
	var size int
	switch v := be.Uint32(b[4:]); v {
	case metaVersion1:
		size = metaSize1
	case metaVersion2:
		size = metaSize2
	default:
		return m, fmt.Errorf("%w: unknown version %d", ErrCorruptMeta, v)
	}
	if len(b) != size {
		return m, fmt.Errorf("%w: %d bytes, want %d", ErrCorruptMeta, len(b), size)
	}
	if be.Uint32(b[size-4:]) != crc32.Checksum(b[:size-4], castagnoli) {
		return m, fmt.Errorf("%w: crc mismatch", ErrCorruptMeta)
	}
	flags := be.Uint32(b[8:])
	m = meta{
		ResetPending: flags&1 != 0,
		SegmentSize:  int64(be.Uint64(b[12:])),
		FirstIndex:   be.Uint64(b[20:]),
		AnchorIndex:  be.Uint64(b[28:]),
		AnchorPos:    int64(be.Uint64(b[36:])),
	}
	if size == metaSize2 {
		m.ZeroTo = int64(be.Uint64(b[44:]))
	}
	if m.AnchorPos < 0 || m.SegmentSize <= 0 || m.ZeroTo < 0 {
		return m, fmt.Errorf("%w: anchor position %d, segment size %d, zero end %d", ErrCorruptMeta, m.AnchorPos, m.SegmentSize, m.ZeroTo)
	}
	return m, nil
}

// readMeta returns the meta file in dir; ok is false if there is none.
func readMeta(fsys storage.FS, dir string) (m meta, ok bool, err error) {
	path := filepath.Join(dir, metaFileName)
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	defer f.Close()
	b := make([]byte, metaMaxSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return m, false, err
	}
	m, err = decodeMeta(b[:n])
	if err != nil {
		return m, false, fmt.Errorf("%s: %w (restore it, or remove %s to resync this node from the leader)", path, err, dir)
	}
	return m, true, nil
}

// writeMeta replaces the meta file durably: a crash leaves either the old
// or the new record, never a mix.
func writeMeta(fsys storage.FS, dir string, m meta) error {
	return storage.WriteFileAtomic(fsys, filepath.Join(dir, metaFileName), m.encode())
}
