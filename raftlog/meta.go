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
// index, and a pending reset. It is rewritten atomically (temp file, fsync,
// rename, directory fsync), only on rare events: checkpoints (every
// CheckpointBytes of log), prefix deletion, suffix truncation below the
// anchor, retention and ResetAt. It is never written on the StoreLogs path
// except through a checkpoint.
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
}

const (
	metaFileName = "raftlog.meta"
	metaMagic    = 0x524C4D54 // "RLMT"
	metaVersion  = 1
	// magic, version, flags, segment size, first, anchor index, anchor pos, crc
	metaSize = 4 + 4 + 4 + 8 + 8 + 8 + 8 + 4
)

func (m meta) encode() []byte {
	b := make([]byte, metaSize)
	be := binary.BigEndian
	be.PutUint32(b[0:], metaMagic)
	be.PutUint32(b[4:], metaVersion)
	var flags uint32
	if m.ResetPending {
		flags |= 1
	}
	be.PutUint32(b[8:], flags)
	be.PutUint64(b[12:], uint64(m.SegmentSize))
	be.PutUint64(b[20:], m.FirstIndex)
	be.PutUint64(b[28:], m.AnchorIndex)
	be.PutUint64(b[36:], uint64(m.AnchorPos))
	be.PutUint32(b[44:], crc32.Checksum(b[:44], castagnoli))
	return b
}

func decodeMeta(b []byte) (meta, error) {
	var m meta
	if len(b) != metaSize {
		return m, fmt.Errorf("%w: %d bytes, want %d", ErrCorruptMeta, len(b), metaSize)
	}
	be := binary.BigEndian
	if be.Uint32(b[0:]) != metaMagic || be.Uint32(b[4:]) != metaVersion {
		return m, fmt.Errorf("%w: bad magic or version", ErrCorruptMeta)
	}
	if be.Uint32(b[44:]) != crc32.Checksum(b[:44], castagnoli) {
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
	if m.AnchorPos < 0 || m.SegmentSize <= 0 {
		return m, fmt.Errorf("%w: anchor position %d, segment size %d", ErrCorruptMeta, m.AnchorPos, m.SegmentSize)
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
	b := make([]byte, metaSize+1)
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
