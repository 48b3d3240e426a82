package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/raftmq/raftmq/storage"
)

// Checkpoint is the content of storePathRootDir/checkpoint (RocketMQ
// StoreCheckpoint) plus the durable CommitLog offset: after a crash,
// ConsumeQueue units from LogicsOffset on are verified, and the index drops
// files newer than IndexMsgTimestamp. PhysicOffset and PhysicMsgTimestamp
// are kept in the format but not read (the Raft log store recovers the
// CommitLog).
type Checkpoint struct {
	// PhysicMsgTimestamp is carried over from the checkpoint read at Open.
	PhysicMsgTimestamp int64
	// LogicsMsgTimestamp is the store time up to which ConsumeQueues are durable.
	LogicsMsgTimestamp int64
	// IndexMsgTimestamp is the store time up to which index files are durable.
	IndexMsgTimestamp int64
	// PhysicOffset is the CommitLog's end when the checkpoint was written.
	PhysicOffset int64
	// LogicsOffset is a CommitLog offset below which every message's
	// ConsumeQueue unit is durable (the dispatched offset read before the
	// ConsumeQueue flush): after a crash, units past it are verified.
	LogicsOffset int64
}

// checkpointMagic starts the file; the CRC of the fields ends it, so a torn
// or damaged checkpoint is detected and ignored (every unit is verified
// instead).
const (
	checkpointMagic = "RMQCKPT2"
	checkpointSize  = len(checkpointMagic) + 5*8 + 4
)

func (c Checkpoint) encode() []byte {
	b := make([]byte, checkpointSize)
	copy(b, checkpointMagic)
	p := len(checkpointMagic)
	for _, v := range []int64{c.PhysicMsgTimestamp, c.LogicsMsgTimestamp, c.IndexMsgTimestamp, c.PhysicOffset, c.LogicsOffset} {
		binary.BigEndian.PutUint64(b[p:], uint64(v))
		p += 8
	}
	binary.BigEndian.PutUint32(b[p:], crc32.ChecksumIEEE(b[:p]))
	return b
}

func decodeCheckpoint(b []byte) (Checkpoint, error) {
	if len(b) != checkpointSize || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint has %d bytes or a bad magic", ErrCorruptFile, len(b))
	}
	p := checkpointSize - 4
	if crc32.ChecksumIEEE(b[:p]) != binary.BigEndian.Uint32(b[p:]) {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint CRC mismatch", ErrCorruptFile)
	}
	var v [5]int64
	for i := range v {
		v[i] = int64(binary.BigEndian.Uint64(b[len(checkpointMagic)+8*i:]))
	}
	return Checkpoint{PhysicMsgTimestamp: v[0], LogicsMsgTimestamp: v[1], IndexMsgTimestamp: v[2], PhysicOffset: v[3], LogicsOffset: v[4]}, nil
}

// readCheckpoint loads the checkpoint; ok is false if it is missing.
func readCheckpoint(fsys storage.FS, path string) (c Checkpoint, ok bool, err error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, err
	}
	defer f.Close()
	b := make([]byte, checkpointSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return Checkpoint{}, false, err
	}
	c, err = decodeCheckpoint(b[:n])
	return c, err == nil, err
}

// writeCheckpoint replaces the checkpoint atomically.
func writeCheckpoint(fsys storage.FS, path string, c Checkpoint) error {
	return storage.WriteFileAtomic(fsys, path, c.encode())
}

// createAbortFile marks the store as running: if it is still there at the
// next start, the last run did not shut down cleanly (RocketMQ's abort file).
func createAbortFile(fsys storage.FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// removeAbortFile marks a clean shutdown.
func removeAbortFile(fsys storage.FS, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

func fileExists(fsys storage.FS, path string) (bool, error) {
	_, err := fsys.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
