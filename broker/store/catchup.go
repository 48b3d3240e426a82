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

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Backfill puts units at logical offsets [from, from+len(units)) in front of
// the queue: a member that installed a snapshot restarted the queue at the
// leader's next offset (StartQueueAt) with blanks before it, and once it has
// fetched the CommitLog before that point it takes the peer's units for it
// (queue offsets are identical on every replica). from+len(units) must be
// the queue's MinOffset, units must be in CommitLog order and end before
// the queue's first unit. The bytes are durable before MinOffset moves down
// to from, so readers never see a unit that is not there.
func (cq *ConsumeQueue) Backfill(from int64, units []CQUnit) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.destroyed {
		return fmt.Errorf("consume queue %s/%d: backfill: the queue was destroyed: %w", cq.topic, cq.queueID, ErrFileClosed)
	}
	minLogic := cq.minLogic.Load()
	if len(units) == 0 {
		return nil
	}
	if from < 0 || from+int64(len(units)) != minLogic {
		return fmt.Errorf("consume queue %s/%d: backfill [%d, %d) does not end at the queue's minimum %d: %w",
			cq.topic, cq.queueID, from, from+int64(len(units)), minLogic, ErrCorruptFile)
	}
	prevEnd := int64(-1)
	for i, u := range units {
		if !u.valid() || u.IsBlank() || u.PhyOffset < prevEnd {
			return fmt.Errorf("consume queue %s/%d: backfill unit %+v at %d: %w", cq.topic, cq.queueID, u, from+int64(i), ErrCorruptFile)
		}
		prevEnd = u.end()
	}
	if minLogic < cq.maxLogic.Load() {
		if next, err := cq.unitAt(minLogic); err == nil && !next.IsBlank() && prevEnd > next.PhyOffset {
			return fmt.Errorf("consume queue %s/%d: backfill ends at physical offset %d, after the queue's first unit at %d: %w",
				cq.topic, cq.queueID, prevEnd, next.PhyOffset, ErrCorruptFile)
		}
	}
	// Every crash point must leave blanks, then units in CommitLog order,
	// which recovery keeps whole (it skips blanks and ends the queue at the
	// first zero or out-of-order unit), with the minimum at the first
	// unit, where the next catch-up resumes. So a prepended file exists
	// only once it is all blanks, and the units go in from the last file
	// to the first, each file synced before the one in front of it is
	// touched: the old first file's head blanks are replaced first. A
	// crash can still tear the write into one file (part of its pages, or
	// of one page, on disk: blanks and units interleaved, a unit half
	// blank), so the units for each file are first written durably to a
	// redo record that opening the queue applies again.
	var blank [CQUnitSize]byte
	blankCQUnit.encode(blank[:])
	if err := cq.mfq.PrependToFilled(from*CQUnitSize, blank[:]); err != nil {
		return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
	}
	start, end := from*CQUnitSize, minLogic*CQUnitSize
	for end > start {
		mf := cq.mfq.FindByOffset(end - 1)
		if mf == nil {
			return fmt.Errorf("consume queue %s/%d: backfill: no file holds byte %d: %w", cq.topic, cq.queueID, end-1, ErrCorruptFile)
		}
		lo := max(start, mf.FileFromOffset())
		buf := AppendCQUnits(make([]byte, 0, end-lo), units[(lo-start)/CQUnitSize:(end-start)/CQUnitSize])
		if err := storage.WriteFileAtomic(cq.fsys, cq.redoPath(), encodeBackfillRedo(lo, buf)); err != nil {
			return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
		}
		// Written through (pwrite, fsync), not through the mapping: a
		// retry after a failed sync writes the same bytes, which the
		// mapping would not write back.
		if err := mf.WriteThrough(buf, int(lo-mf.FileFromOffset())); err != nil {
			return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
		}
		end = lo
	}
	cq.minLogic.Store(from)
	// A record left behind is applied again at the next open, which
	// writes the bytes already there.
	if err := cq.fsys.Remove(cq.redoPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
	}
	return nil
}

// backfillRedoName names the redo record in a queue's directory: the
// units a backfill is writing into one queue file (one file at a time).
const backfillRedoName = "backfill.redo"

// backfillRedoMagic starts a redo record: magic, byte position in the
// queue's file space (i64), length (u32), the units' bytes, CRC32-C of
// everything before it.
const backfillRedoMagic = "RMQCQBR1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (cq *ConsumeQueue) redoPath() string { return filepath.Join(cq.mfq.Dir(), backfillRedoName) }

func encodeBackfillRedo(pos int64, units []byte) []byte {
	b := make([]byte, 0, len(backfillRedoMagic)+12+len(units)+4)
	b = append(b, backfillRedoMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(pos))
	b = binary.BigEndian.AppendUint32(b, uint32(len(units)))
	b = append(b, units...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeBackfillRedo(b []byte) (pos int64, units []byte, ok bool) {
	const head = len(backfillRedoMagic) + 12
	if len(b) < head+4 || string(b[:len(backfillRedoMagic)]) != backfillRedoMagic {
		return 0, nil, false
	}
	n := int(binary.BigEndian.Uint32(b[head-4:]))
	if len(b) != head+n+4 || crc32.Checksum(b[:head+n], castagnoli) != binary.BigEndian.Uint32(b[head+n:]) {
		return 0, nil, false
	}
	pos = int64(binary.BigEndian.Uint64(b[len(backfillRedoMagic):]))
	if pos < 0 || pos%CQUnitSize != 0 || n%CQUnitSize != 0 {
		return 0, nil, false
	}
	return pos, b[head : head+n], true
}

// replayBackfillRedo applies the redo record a crashed backfill left, then
// removes it (and temporary files of it a crash left). Each byte the
// record covers must hold the record's byte or a blank unit's, as a torn
// write leaves; a record that does not fit the queue any more (its file
// deleted or rewritten since) is dropped. Called at open.
func (cq *ConsumeQueue) replayBackfillRedo() error {
	path := cq.redoPath()
	if err := storage.RemoveTempFiles(cq.fsys, path); err != nil {
		return fmt.Errorf("consume queue %s/%d: %w", cq.topic, cq.queueID, err)
	}
	data, err := readWholeFile(cq.fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consume queue %s/%d: read %s: %w", cq.topic, cq.queueID, path, err)
	}
	why, err := cq.applyBackfillRedo(data)
	if err != nil {
		return fmt.Errorf("consume queue %s/%d: apply %s: %w", cq.topic, cq.queueID, path, err)
	}
	if why != "" {
		cq.log.Warn("consume queue backfill redo record dropped", zap.String("path", path), zap.String("reason", why))
	}
	if err := cq.fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("consume queue %s/%d: remove %s: %w", cq.topic, cq.queueID, path, err)
	}
	return nil
}

// applyBackfillRedo writes the record's units in place and syncs them, or
// says why the record does not apply.
func (cq *ConsumeQueue) applyBackfillRedo(data []byte) (why string, err error) {
	pos, units, ok := decodeBackfillRedo(data)
	if !ok {
		return "record damaged", nil
	}
	mf := cq.mfq.FindByOffset(pos)
	if mf == nil || len(units) == 0 || pos+int64(len(units)) > mf.FileFromOffset()+int64(mf.Size()) {
		return "no queue file holds its range", nil
	}
	rel := int(pos - mf.FileFromOffset())
	cur := mf.Bytes()[rel : rel+len(units)]
	var blank [CQUnitSize]byte
	blankCQUnit.encode(blank[:])
	for i := range units {
		if cur[i] != units[i] && cur[i] != blank[i%CQUnitSize] {
			return fmt.Sprintf("byte %d of its range holds neither its unit nor a blank", i), nil
		}
	}
	// Through, as Backfill writes: the bytes may already be in the page
	// cache from a write whose sync failed.
	if err := mf.WriteThrough(units, rel); err != nil {
		return "", err
	}
	return "", nil
}

// removeBackfillRedoLocked removes the redo record and its temporary files
// with the queue's files, so neither lingers in the directory nor applies
// to a queue restarted there.
func (cq *ConsumeQueue) removeBackfillRedoLocked() error {
	if err := cq.fsys.Remove(cq.redoPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return storage.RemoveTempFiles(cq.fsys, cq.redoPath())
}

// readWholeFile reads a small file through fsys.
func readWholeFile(fsys storage.FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return b, nil
}

// AppendCQUnits appends the 20-byte encodings of units to b (the
// CATCHUP_READ body).
func AppendCQUnits(b []byte, units []CQUnit) []byte {
	var u [CQUnitSize]byte
	for _, x := range units {
		x.encode(u[:])
		b = append(b, u[:]...)
	}
	return b
}

// DecodeCQUnits decodes what AppendCQUnits wrote.
func DecodeCQUnits(b []byte) ([]CQUnit, error) {
	if len(b)%CQUnitSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes of consume queue units", ErrCorruptFile, len(b))
	}
	out := make([]CQUnit, 0, len(b)/CQUnitSize)
	for i := 0; i < len(b); i += CQUnitSize {
		out = append(out, decodeCQUnit(b[i:]))
	}
	return out, nil
}

// HasUnitAt reports whether the queue holds a unit for the message at
// CommitLog offset phy (a catch-up tells dispatched messages from stored
// ones that got no unit, such as a producer's duplicate).
func (cq *ConsumeQueue) HasUnitAt(phy int64) (bool, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	_, ok, err := cq.findByPhy(phy)
	return ok, err
}

// UnitsFrom returns up to n consecutive units (blanks included) for a
// member's catch-up, and the logical offset of the first: from
// max(from, MinOffset) on, or, when no file holds that offset (a file
// missing between others), from the first file after it. The units stop
// before the next missing file, so they always sit at start, start+1, …:
// a caller must take start from the answer, not assume from.
func (cq *ConsumeQueue) UnitsFrom(from int64, n int) (start int64, units []CQUnit, err error) {
	start = max(from, cq.MinOffset())
	hi := cq.MaxOffset()
	for start+int64(len(units)) < hi && len(units) < n {
		at := start + int64(len(units))
		b, err := cq.Read(at, n-len(units))
		if errors.Is(err, errNoQueueFile) && len(units) == 0 {
			// Units before a missing file and after it are no run: the
			// answer starts after it.
			start = cq.nextFileStart(at)
			continue
		}
		if err != nil {
			if errors.Is(err, ErrOutOfRange) {
				break
			}
			return start, nil, err
		}
		for i := 0; i < b.Len(); i++ {
			units = append(units, b.Unit(i))
		}
		b.Release()
	}
	return start, units, nil
}
