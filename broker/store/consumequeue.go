package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// ConsumeQueue layout (RocketMQ's ConsumeQueue): fixed 20-byte units, one per
// message of a queue, big-endian: CommitLog physical offset i64, stored size
// i32, tags hash code i64. The unit of logical (queue) offset n lives at byte
// n*20 of the queue's file space, so files are named by the byte offset of
// their first unit, exactly like CommitLog segments.
const (
	// CQUnitSize is the size of one ConsumeQueue unit.
	CQUnitSize = 20
	// DefaultConsumeQueueUnits is RocketMQ's units per ConsumeQueue file
	// (mappedFileSizeConsumeQueue = 300,000 × 20 bytes).
	DefaultConsumeQueueUnits = 300_000
)

// CQUnit is one ConsumeQueue entry.
type CQUnit struct {
	// PhyOffset is the message's offset in the CommitLog.
	PhyOffset int64
	// Size is the message's stored size in bytes.
	Size int32
	// TagsCode is the tags hash code the pull path filters on.
	TagsCode int64
}

// blankCQUnit fills the units before the first real one when a queue's first
// file starts in the middle (RocketMQ's fillPreBlank): offset 0, size MaxInt32.
var blankCQUnit = CQUnit{PhyOffset: 0, Size: math.MaxInt32, TagsCode: 0}

func (u CQUnit) encode(b []byte) {
	binary.BigEndian.PutUint64(b[0:], uint64(u.PhyOffset))
	binary.BigEndian.PutUint32(b[8:], uint32(u.Size))
	binary.BigEndian.PutUint64(b[12:], uint64(u.TagsCode))
}

func decodeCQUnit(b []byte) CQUnit {
	return CQUnit{
		PhyOffset: int64(binary.BigEndian.Uint64(b[0:])),
		Size:      int32(binary.BigEndian.Uint32(b[8:])),
		TagsCode:  int64(binary.BigEndian.Uint64(b[12:])),
	}
}

// valid is RocketMQ's recovery test: a preallocated, never written unit is
// all zeros and has size 0. A unit whose end does not fit an int64 points
// at no message either (a damaged file), and would turn MaxPhysicOffset
// negative.
func (u CQUnit) valid() bool {
	return u.PhyOffset >= 0 && u.Size > 0 && u.PhyOffset <= math.MaxInt64-int64(u.Size)
}

// IsBlank reports whether u is a filler unit that stands for no message.
func (u CQUnit) IsBlank() bool { return u == blankCQUnit }

// end is the CommitLog offset just past the unit's message.
func (u CQUnit) end() int64 { return u.PhyOffset + int64(u.Size) }

// CQBatch is a run of consecutive units read from one ConsumeQueue file. It
// holds a reference on the file's mapping until Release, so retention cannot
// unmap it under the reader.
type CQBatch struct {
	s     *storage.Slice
	start int64
}

// StartOffset is the logical offset of the first unit.
func (b *CQBatch) StartOffset() int64 { return b.start }

// Len is the number of units.
func (b *CQBatch) Len() int { return len(b.s.B) / CQUnitSize }

// Unit returns unit i (0 ≤ i < Len), the one at logical offset StartOffset()+i.
func (b *CQBatch) Unit(i int) CQUnit { return decodeCQUnit(b.s.B[i*CQUnitSize:]) }

// Release drops the batch's reference on the mapping; the batch must not be
// used afterwards.
func (b *CQBatch) Release() { b.s.Release() }

// ConsumeQueue is the index of one topic queue: logical offset → CommitLog
// location. Appends are serialized by mu (one dispatcher writes); reads take
// no lock and see units up to maxLogic, which is published only after the
// unit's bytes are in the mapping.
type ConsumeQueue struct {
	topic        string
	queueID      int32
	unitsPerFile int64
	log          *zap.Logger

	// minLogic/maxLogic are logical offsets ([min, max) is readable); maxPhy is
	// the CommitLog end of the newest unit. Written under mu, read lock-free.
	minLogic atomic.Int64
	maxLogic atomic.Int64
	maxPhy   atomic.Int64
	// retiredBelow is the largest CommitLog offset the queue's minimum
	// was corrected past (retention, cleanUnusedTopic) since it was
	// opened, capped at the end of its newest unit then: units of messages
	// below it may be gone.
	retiredBelow atomic.Int64

	mu   sync.Mutex // serializes writers (Put, Append, truncation, deletion)
	mfq  *storage.MappedFileQueue
	fsys storage.FS
	// destroyed is set (under mu) once the queue's files are destroyed:
	// its topic was deleted, or a snapshot restarted it.
	destroyed bool
}

func openConsumeQueue(fsys storage.FS, dir, topic string, queueID int32, unitsPerFile int, log *zap.Logger) (*ConsumeQueue, error) {
	if err := storage.MkdirAllDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("consume queue %s/%d: create %s: %w", topic, queueID, dir, err)
	}
	// Units are derived data: a file missing between others (lost on
	// disk, or left by a removal that failed part-way in an older
	// version) must not keep the broker from starting. The queue opens as
	// RocketMQ's does, and pulls in the gap move to the next file
	// (OFFSET_FOUND_NULL; only the leader moves a consumer).
	gap := func(from, to int64) {
		log.Error("ConsumeQueue files are missing between others; serving the queue without them: pulls in the gap move on to the next file, skipping the messages whose units they held",
			zap.String("topic", topic), zap.Int32("queueId", queueID), zap.String("dir", dir),
			zap.Int64("missingFromOffset", from/CQUnitSize), zap.Int64("missingToOffset", to/CQUnitSize))
	}
	mfq, err := storage.OpenMappedFileQueueWithGaps(fsys, dir, unitsPerFile*CQUnitSize, gap)
	if err != nil {
		return nil, fmt.Errorf("consume queue %s/%d: %w", topic, queueID, err)
	}
	cq := &ConsumeQueue{
		topic: topic, queueID: queueID, unitsPerFile: int64(unitsPerFile),
		log: log.With(zap.String("topic", topic), zap.Int32("queueId", queueID)), mfq: mfq, fsys: fsys,
	}
	if err := cq.replayBackfillRedo(); err != nil {
		_ = mfq.Close()
		return nil, err
	}
	if err := cq.recover(); err != nil {
		_ = mfq.Close()
		return nil, err
	}
	return cq, nil
}

// recover finds the end of the written units after a (re)open: files before
// the last three are full by construction (a file is only created once its
// predecessor is full); in the last three the first invalid or
// non-increasing unit is the end, and everything from there is dropped.
func (cq *ConsumeQueue) recover() error {
	files := cq.mfq.Files()
	if len(files) == 0 {
		return nil
	}
	// Reopened files start fully readable (WrotePosition = Size); the scan
	// below finds the real end.
	first := max(0, len(files)-3)
	end := files[first].FileFromOffset()
	prevEnd := int64(-1)
	var last CQUnit
	haveLast := false
scan:
	for _, mf := range files[first:] {
		b := mf.Bytes()
		for pos := 0; pos+CQUnitSize <= mf.Size(); pos += CQUnitSize {
			u := decodeCQUnit(b[pos:])
			if !u.valid() || (!u.IsBlank() && u.PhyOffset < prevEnd) {
				end = mf.FileFromOffset() + int64(pos)
				break scan
			}
			if !u.IsBlank() {
				prevEnd = u.end()
				last, haveLast = u, true
			}
			end = mf.FileFromOffset() + int64(pos) + CQUnitSize
		}
	}
	if err := cq.truncateBytesLocked(end); err != nil {
		return err
	}
	cq.maxLogic.Store(end / CQUnitSize)
	if haveLast {
		cq.maxPhy.Store(last.end())
	} else if err := cq.recomputeMaxPhyLocked(); err != nil {
		// The scanned files held no unit: the newest one is further back.
		return err
	}
	// The minimum skips the blank fillers at the head (the first file's,
	// and whole files a catch-up prepended); the store moves it further
	// with CorrectMinOffset once it knows the CommitLog's minimum.
	minLogic, err := cq.firstNonBlank(cq.mfq.MinOffset()/CQUnitSize, end/CQUnitSize)
	if err != nil {
		return err
	}
	cq.minLogic.Store(minLogic)
	return nil
}

// blankRun is blank units back to back, what runs of units are compared
// with: a catch-up can put millions of blanks in front of a queue, and
// recovery steps over them.
var blankRun = func() []byte {
	b := make([]byte, 1024*CQUnitSize)
	for i := 0; i < len(b); i += CQUnitSize {
		blankCQUnit.encode(b[i:])
	}
	return b
}()

// firstNonBlank returns the smallest offset in [lo, hi) whose unit
// is not blank, or hi when all are; hi is at most maxLogic. Every unit is
// looked at (blanks may stand anywhere in the files a recovery finds).
// Like the other readers it needs no lock: it reads below maxLogic only.
func (cq *ConsumeQueue) firstNonBlank(lo, hi int64) (int64, error) {
	for lo < hi {
		b, err := cq.read(lo, int(min(hi-lo, cq.unitsPerFile)))
		if errors.Is(err, errNoQueueFile) {
			lo = min(hi, cq.nextFileStart(lo)) // a missing file holds no unit
			continue
		}
		if err != nil {
			return 0, err
		}
		i, found := firstNonBlankIn(b.s.B)
		b.Release()
		lo += i
		if found {
			return lo, nil
		}
	}
	return hi, nil
}

// lastNonBlank returns the largest offset in [lo, hi) whose unit is
// not blank; ok is false when all are. hi is at most maxLogic.
func (cq *ConsumeQueue) lastNonBlank(lo, hi int64) (off int64, ok bool, err error) {
	for lo < hi {
		// The file holding hi-1 starts at a multiple of unitsPerFile.
		start := max(lo, (hi-1)/cq.unitsPerFile*cq.unitsPerFile)
		b, err := cq.read(start, int(hi-start))
		if errors.Is(err, errNoQueueFile) {
			hi = start // a missing file holds no unit
			continue
		}
		if err != nil {
			return 0, false, err
		}
		i, found := lastNonBlankIn(b.s.B)
		b.Release()
		if found {
			return start + i, true, nil
		}
		hi = start
	}
	return 0, false, nil
}

// firstNonBlankIn returns the index of the first unit of b that is not
// blank and true, or the number of units in b and false.
func firstNonBlankIn(b []byte) (int64, bool) {
	for pos := 0; pos < len(b); {
		n := min(len(blankRun), len(b)-pos)
		if bytes.Equal(b[pos:pos+n], blankRun[:n]) {
			pos += n
			continue
		}
		for ; ; pos += CQUnitSize {
			if !bytes.Equal(b[pos:pos+CQUnitSize], blankRun[:CQUnitSize]) {
				return int64(pos / CQUnitSize), true
			}
		}
	}
	return int64(len(b) / CQUnitSize), false
}

// lastNonBlankIn returns the index of the last unit of b that is not blank
// and true, or false when all are.
func lastNonBlankIn(b []byte) (int64, bool) {
	for end := len(b); end > 0; {
		n := min(len(blankRun), end)
		if bytes.Equal(b[end-n:end], blankRun[:n]) {
			end -= n
			continue
		}
		for pos := end - CQUnitSize; ; pos -= CQUnitSize {
			if !bytes.Equal(b[pos:pos+CQUnitSize], blankRun[:CQUnitSize]) {
				return int64(pos / CQUnitSize), true
			}
		}
	}
	return 0, false
}

// Topic is the queue's topic.
func (cq *ConsumeQueue) Topic() string { return cq.topic }

// QueueID is the queue's id.
func (cq *ConsumeQueue) QueueID() int32 { return cq.queueID }

// MinOffset is the smallest readable logical offset.
func (cq *ConsumeQueue) MinOffset() int64 { return cq.minLogic.Load() }

// MaxOffset is the next logical offset to be assigned (one past the newest unit).
func (cq *ConsumeQueue) MaxOffset() int64 { return cq.maxLogic.Load() }

// MaxPhysicOffset is the CommitLog offset just past the newest unit's message
// (0 when empty); the dispatcher restarts from the largest of these.
func (cq *ConsumeQueue) MaxPhysicOffset() int64 { return cq.maxPhy.Load() }

// unitAt reads one unit; offset must be below maxLogic.
func (cq *ConsumeQueue) unitAt(offset int64) (CQUnit, error) {
	b, err := cq.read(offset, 1)
	if err != nil {
		return CQUnit{}, err
	}
	defer b.Release()
	return b.Unit(0), nil
}

// Get returns the unit at a logical offset.
func (cq *ConsumeQueue) Get(offset int64) (CQUnit, error) {
	if offset < cq.MinOffset() || offset >= cq.MaxOffset() {
		return CQUnit{}, fmt.Errorf("consume queue %s/%d: offset %d outside [%d, %d): %w",
			cq.topic, cq.queueID, offset, cq.MinOffset(), cq.MaxOffset(), ErrOutOfRange)
	}
	return cq.unitAt(offset)
}

// Read returns up to maxUnits consecutive units starting at a logical offset,
// stopping at the end of that offset's file (the next call continues in the
// next file). The caller must Release the batch.
func (cq *ConsumeQueue) Read(offset int64, maxUnits int) (*CQBatch, error) {
	if offset < cq.MinOffset() || offset >= cq.MaxOffset() {
		return nil, fmt.Errorf("consume queue %s/%d: offset %d outside [%d, %d): %w",
			cq.topic, cq.queueID, offset, cq.MinOffset(), cq.MaxOffset(), ErrOutOfRange)
	}
	return cq.read(offset, maxUnits)
}

func (cq *ConsumeQueue) read(offset int64, maxUnits int) (*CQBatch, error) {
	// Only units below maxLogic are complete; never hand out more even if
	// the file's write position is already further.
	n := min(int64(maxUnits), cq.maxLogic.Load()-offset)
	if n <= 0 {
		return nil, fmt.Errorf("consume queue %s/%d: offset %d: %w", cq.topic, cq.queueID, offset, ErrOutOfRange)
	}
	pos := offset * CQUnitSize
	mf := cq.mfq.FindByOffset(pos)
	if mf == nil {
		return nil, fmt.Errorf("consume queue %s/%d: offset %d: %w: %w", cq.topic, cq.queueID, offset, errNoQueueFile, ErrOutOfRange)
	}
	rel := int(pos - mf.FileFromOffset())
	n = min(n, int64(mf.Size()-rel)/CQUnitSize)
	s, err := mf.Read(rel, int(n)*CQUnitSize)
	if err != nil {
		return nil, fmt.Errorf("consume queue %s/%d: read offset %d: %w", cq.topic, cq.queueID, offset, err)
	}
	return &CQBatch{s: s, start: offset}, nil
}

// errNoQueueFile: no file of the queue holds the unit asked for, though
// the offset is in range (a file is gone: removed by retention or a topic
// deletion under the reader, or lost on disk).
var errNoQueueFile = errors.New("no file holds it")

// nextFileStart returns the logical offset of the first unit of the first
// file that starts after offset, capped at MaxOffset (RocketMQ's
// ConsumeQueue.rollNextFile, stepping over every missing file at once).
func (cq *ConsumeQueue) nextFileStart(offset int64) int64 {
	maxL := cq.MaxOffset()
	for _, mf := range cq.mfq.Files() {
		if start := mf.FileFromOffset() / CQUnitSize; start > offset {
			return min(start, maxL)
		}
	}
	return maxL
}

// Put writes u at a given logical offset. Re-putting the unit already there
// (same physical offset) is a no-op, which makes replays after a restart or a
// Raft re-apply idempotent. Putting past the end is only allowed into an
// empty queue (its first file then starts with blank fillers, as RocketMQ's
// fillPreBlank); any other gap or a different unit at an existing offset is a
// broken invariant and fails.
func (cq *ConsumeQueue) Put(offset int64, u CQUnit) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.putLocked(offset, u)
}

func (cq *ConsumeQueue) putLocked(offset int64, u CQUnit) error {
	if !u.valid() || u.IsBlank() {
		return fmt.Errorf("consume queue %s/%d: refusing unit %+v at %d: %w", cq.topic, cq.queueID, u, offset, ErrMessageIllegal)
	}
	maxLogic := cq.maxLogic.Load()
	switch {
	case offset < maxLogic:
		if offset < cq.minLogic.Load() {
			return nil // already deleted by retention: it was there
		}
		old, err := cq.unitAt(offset)
		if err != nil {
			return err
		}
		if old.PhyOffset == u.PhyOffset {
			return nil
		}
		return fmt.Errorf("consume queue %s/%d: offset %d holds physical offset %d, not %d: %w",
			cq.topic, cq.queueID, offset, old.PhyOffset, u.PhyOffset, ErrCorruptFile)
	case offset > maxLogic:
		if maxLogic != 0 || cq.mfq.Last() != nil {
			return fmt.Errorf("consume queue %s/%d: put at %d leaves a gap after %d: %w",
				cq.topic, cq.queueID, offset, maxLogic, ErrCorruptFile)
		}
		if err := cq.fillPreBlankLocked(offset); err != nil {
			return err
		}
	default:
		// Units follow CommitLog order; recovery relies on it.
		if u.PhyOffset < cq.maxPhy.Load() {
			return fmt.Errorf("consume queue %s/%d: unit at physical offset %d goes before the queue's end %d: %w",
				cq.topic, cq.queueID, u.PhyOffset, cq.maxPhy.Load(), ErrCorruptFile)
		}
	}
	return cq.appendLocked(u)
}

// fillPreBlankLocked starts an empty queue at a logical offset: the first
// file is the one that offset falls in, and the units before it are blanks.
func (cq *ConsumeQueue) fillPreBlankLocked(offset int64) error {
	fileStart := offset / cq.unitsPerFile * cq.unitsPerFile * CQUnitSize
	mf, err := cq.mfq.LastOrCreate(fileStart)
	if err != nil {
		return fmt.Errorf("consume queue %s/%d: create file at %d: %w", cq.topic, cq.queueID, fileStart, err)
	}
	if mf.FileFromOffset() != fileStart {
		return fmt.Errorf("consume queue %s/%d: first file starts at %d, want %d: %w",
			cq.topic, cq.queueID, mf.FileFromOffset(), fileStart, ErrCorruptFile)
	}
	n := offset - fileStart/CQUnitSize
	if n > 0 {
		buf := make([]byte, n*CQUnitSize)
		for i := range n {
			blankCQUnit.encode(buf[i*CQUnitSize:])
		}
		if _, err := mf.Append(buf); err != nil {
			return fmt.Errorf("consume queue %s/%d: fill blanks: %w", cq.topic, cq.queueID, err)
		}
	}
	cq.minLogic.Store(offset)
	cq.maxLogic.Store(offset)
	return nil
}

// appendLocked writes u at maxLogic, rolling to a new file when the last one
// is full, then publishes the new end.
func (cq *ConsumeQueue) appendLocked(u CQUnit) error {
	var b [CQUnitSize]byte
	u.encode(b[:])
	pos := cq.maxLogic.Load() * CQUnitSize
	mf, err := cq.mfq.LastOrCreate(pos)
	if err != nil {
		return fmt.Errorf("consume queue %s/%d: %w", cq.topic, cq.queueID, err)
	}
	if got := mf.FileFromOffset() + int64(mf.WrotePosition()); got != pos {
		return fmt.Errorf("consume queue %s/%d: file end %d does not match next unit at %d: %w",
			cq.topic, cq.queueID, got, pos, ErrCorruptFile)
	}
	if _, err := mf.Append(b[:]); err != nil {
		return fmt.Errorf("consume queue %s/%d: append at %d: %w", cq.topic, cq.queueID, pos/CQUnitSize, err)
	}
	cq.maxPhy.Store(u.end())
	cq.maxLogic.Add(1)
	return nil
}

// Append adds u at the next logical offset and returns that offset: the
// dispatcher's way of assigning queue offsets. A unit whose message is
// already in the queue (its physical offset is below MaxPhysicOffset, as
// when the CommitLog is replayed after a restart or Raft re-applies entries)
// is not added again; its existing offset is returned with dup set.
func (cq *ConsumeQueue) Append(u CQUnit) (offset int64, dup bool, err error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if u.PhyOffset < cq.maxPhy.Load() {
		off, ok, err := cq.findByPhy(u.PhyOffset)
		if err != nil {
			return 0, false, err
		}
		if !ok {
			return 0, false, fmt.Errorf("consume queue %s/%d: physical offset %d is below the queue's end %d but not in it: %w",
				cq.topic, cq.queueID, u.PhyOffset, cq.maxPhy.Load(), ErrCorruptFile)
		}
		return off, true, nil
	}
	off := cq.maxLogic.Load()
	if err := cq.putLocked(off, u); err != nil {
		return 0, false, err
	}
	return off, false, nil
}

// search returns the smallest logical offset in [lo, hi) for which pred
// holds (hi if none); pred must be monotonic (false…false true…true) over
// the real units, which holds for anything increasing with the physical
// offset. A blank unit is judged as the first unit after it, and as past
// everything when only blanks follow: fillers stand before the first unit,
// but a data directory can hold blanks between units too (a torn backfill
// write-back), and they must not turn the bisection. An offset no file
// holds (a file missing between others) is judged the same way. The answer
// is a real unit's offset, or the end.
func (cq *ConsumeQueue) search(lo, hi int64, pred func(CQUnit) (bool, error)) (int64, error) {
	end := hi
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, err := cq.unitAt(mid)
		missing := errors.Is(err, errNoQueueFile)
		if err != nil && !missing {
			return 0, err
		}
		if missing || u.IsBlank() {
			next, err := cq.firstNonBlank(mid+1, hi)
			if err != nil {
				return 0, err
			}
			if next == hi {
				hi = mid
				continue
			}
			if u, err = cq.unitAt(next); err != nil {
				return 0, err
			}
		}
		ok, err := pred(u)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo < end {
		if u, err := cq.unitAt(lo); errors.Is(err, errNoQueueFile) {
			return cq.firstNonBlank(lo+1, end)
		} else if err != nil {
			return 0, err
		} else if u.IsBlank() {
			return cq.firstNonBlank(lo+1, end)
		}
	}
	return lo, nil
}

// findByPhy finds the logical offset of the unit at physical offset phy.
func (cq *ConsumeQueue) findByPhy(phy int64) (int64, bool, error) {
	minL, maxL := cq.minLogic.Load(), cq.maxLogic.Load()
	off, err := cq.search(minL, maxL, func(u CQUnit) (bool, error) { return !u.IsBlank() && u.PhyOffset >= phy, nil })
	if err != nil || off >= maxL {
		return 0, false, err
	}
	u, err := cq.unitAt(off)
	if err != nil {
		return 0, false, err
	}
	return off, u.PhyOffset == phy, nil
}

// OffsetOfPhy returns the logical offset of the unit whose message starts
// at CommitLog offset phy; ok is false when the queue holds no such unit
// (it never had one, or retention removed it). Blank units anywhere are
// stepped over.
func (cq *ConsumeQueue) OffsetOfPhy(phy int64) (offset int64, ok bool, err error) {
	return cq.findByPhy(phy)
}

// RetiredBelow is the CommitLog offset below which the queue's units may
// have been removed since it was opened (retention moves it to the
// CommitLog's minimum, cleanUnusedTopic past every unit it held): a
// message there may have no unit left. Every message at or above it has
// its unit once dispatched.
func (cq *ConsumeQueue) RetiredBelow() int64 { return cq.retiredBelow.Load() }

// StoreTimeFunc returns the store timestamp of the message at a CommitLog
// location; SearchByTimestamp reads it from the CommitLog through this.
type StoreTimeFunc func(phyOffset int64, size int32) (int64, error)

// SearchByTimestamp returns the logical offset of the first message stored at
// or after ts (SEARCH_OFFSET_BY_TIMESTAMP): MinOffset when ts is older than
// everything, MaxOffset when it is newer. Messages whose CommitLog bytes are
// gone (storeTime fails with ErrOutOfRange or ErrFileClosed) count as older
// than any ts.
func (cq *ConsumeQueue) SearchByTimestamp(ts int64, storeTime StoreTimeFunc) (int64, error) {
	return cq.search(cq.MinOffset(), cq.MaxOffset(), func(u CQUnit) (bool, error) {
		if u.IsBlank() {
			return false, nil
		}
		t, err := storeTime(u.PhyOffset, u.Size)
		if errors.Is(err, ErrOutOfRange) || errors.Is(err, ErrFileClosed) {
			return false, nil // deleted by retention, possibly just now
		}
		if err != nil {
			return false, err
		}
		return t >= ts, nil
	})
}

// SearchUpperByTimestamp returns the offset of the last message stored at
// or before ts (RocketMQ's BoundaryType.UPPER), or the queue's first
// offset when every message is later.
func (cq *ConsumeQueue) SearchUpperByTimestamp(ts int64, storeTime StoreTimeFunc) (int64, error) {
	later, err := cq.SearchByTimestamp(ts+1, storeTime)
	if err != nil {
		return 0, err
	}
	return max(later-1, cq.MinOffset()), nil
}

// TruncateDirty removes every unit whose message starts at or after phyOffset:
// recovery calls it with the CommitLog's recovered end so no unit points at
// data that is gone (RocketMQ's truncateDirtyLogicFiles).
func (cq *ConsumeQueue) TruncateDirty(phyOffset int64) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	lo := cq.mfq.MinOffset() / CQUnitSize
	maxL := cq.maxLogic.Load()
	// An invalid unit (a crash hole) counts as past the cut: everything from
	// a hole on is suspect and gets re-dispatched.
	off, err := cq.search(lo, maxL, func(u CQUnit) (bool, error) {
		return !u.valid() || (!u.IsBlank() && u.PhyOffset >= phyOffset), nil
	})
	if err != nil {
		return err
	}
	if off == maxL {
		return nil
	}
	cq.log.Info("consume queue truncated", zap.Int64("phyOffset", phyOffset), zap.Int64("maxOffset", off))
	return cq.cutLocked(off)
}

// cutLocked drops the units from logical offset off on.
func (cq *ConsumeQueue) cutLocked(off int64) error {
	if err := cq.truncateBytesLocked(off * CQUnitSize); err != nil {
		return err
	}
	cq.maxLogic.Store(off)
	if err := cq.recomputeMaxPhyLocked(); err != nil {
		return err
	}
	if cq.minLogic.Load() > off {
		cq.minLogic.Store(off)
	}
	return nil
}

// verifyFrom checks every unit whose message starts at or after fromPhy
// against the CommitLog and cuts the queue at the first one that does not
// describe a message of this queue (a unit torn by a crash: wrong size, tags
// or offset). Dispatching from fromPhy then re-adds what was cut.
func (cq *ConsumeQueue) verifyFrom(src SegmentSource, fromPhy int64) (cut bool, err error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	maxL := cq.maxLogic.Load()
	// Units below fromPhy were durable at the crash; past it a crash can
	// leave holes (zero units of an unflushed page or file before a
	// surviving one). Counting invalid units as "at or past fromPhy" keeps
	// the predicate monotonic, so the search never skips a hole.
	off, err := cq.search(cq.minLogic.Load(), maxL, func(u CQUnit) (bool, error) {
		return !u.valid() || (!u.IsBlank() && u.PhyOffset >= fromPhy), nil
	})
	if err != nil {
		return false, err
	}
	for ; off < maxL; off++ {
		u, err := cq.unitAt(off)
		if errors.Is(err, errNoQueueFile) {
			off = cq.nextFileStart(off) - 1 // nothing to check in a missing file
			continue
		}
		if err != nil {
			return false, err
		}
		if why := cq.checkUnit(src, u); why != "" {
			cq.log.Warn("consume queue unit does not match the CommitLog after a crash; cutting the queue there to rebuild it",
				zap.Int64("offset", off), zap.Int64("phyOffset", u.PhyOffset), zap.Int32("size", u.Size), zap.String("reason", why))
			return true, cq.cutLocked(off)
		}
	}
	return false, nil
}

// checkUnit returns why u does not describe a message of this queue in src,
// or "" if it does.
func (cq *ConsumeQueue) checkUnit(src SegmentSource, u CQUnit) string {
	if u.IsBlank() {
		return "blank unit after real ones"
	}
	mf := src.FindByOffset(u.PhyOffset)
	if mf == nil {
		return "no CommitLog segment holds it"
	}
	v, err := mf.Read(int(u.PhyOffset-mf.FileFromOffset()), int(u.Size))
	if err != nil {
		return err.Error()
	}
	defer v.Release()
	req, size, err := CheckAndDecode(v.B)
	switch {
	case err != nil:
		return err.Error()
	case req.Blank || size != int(u.Size):
		return "size differs from the stored message"
	case req.Topic != cq.topic || req.QueueID != cq.queueID:
		return "message belongs to another queue"
	case req.CommitLogOffset != u.PhyOffset:
		return "PHYSICALOFFSET differs"
	case req.TagsCode != u.TagsCode:
		return "tags code differs"
	}
	return ""
}

// recomputeMaxPhyLocked sets maxPhy from the newest real unit below
// maxLogic (0 if there is none), skipping blank fillers.
func (cq *ConsumeQueue) recomputeMaxPhyLocked() error {
	cq.maxPhy.Store(0)
	i, ok, err := cq.lastNonBlank(cq.mfq.MinOffset()/CQUnitSize, cq.maxLogic.Load())
	if err != nil || !ok {
		return err
	}
	u, err := cq.unitAt(i)
	if err != nil {
		return err
	}
	cq.maxPhy.Store(u.end())
	return nil
}

// truncateBytesLocked cuts the queue's file space at byte offset end. The
// file queue zeroes the cut units durably, so a later recovery scan never
// resurrects them.
func (cq *ConsumeQueue) truncateBytesLocked(end int64) error {
	if err := cq.mfq.TruncateDirty(end); err != nil {
		return fmt.Errorf("consume queue %s/%d: truncate at %d: %w", cq.topic, cq.queueID, end/CQUnitSize, err)
	}
	return nil
}

// CorrectMinOffset moves the minimum to the first unit whose message is still
// in the CommitLog (phyMinOffset is the CommitLog's new minimum).
func (cq *ConsumeQueue) CorrectMinOffset(phyMinOffset int64) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.correctMinOffsetLocked(phyMinOffset)
}

func (cq *ConsumeQueue) correctMinOffsetLocked(phyMinOffset int64) error {
	// Only units already written can go: a message past the newest one
	// gets its unit when dispatched, whatever minimum was asked for
	// (cleanUnusedTopic asks past everything, and its topic may be created
	// again).
	if retired := min(phyMinOffset, cq.maxPhy.Load()); retired > cq.retiredBelow.Load() {
		cq.retiredBelow.Store(retired)
	}
	minL, maxL := cq.minLogic.Load(), cq.maxLogic.Load()
	off, err := cq.search(minL, maxL, func(u CQUnit) (bool, error) { return !u.IsBlank() && u.PhyOffset >= phyMinOffset, nil })
	if err != nil {
		return err
	}
	if off > minL {
		cq.minLogic.Store(off)
	}
	return nil
}

// DeleteExpired drops the files all of whose units point below the
// CommitLog's minimum offset, always keeping the last file so MaxOffset
// survives. It returns the number of files removed.
func (cq *ConsumeQueue) DeleteExpired(phyMinOffset int64) (int, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if err := cq.correctMinOffsetLocked(phyMinOffset); err != nil {
		return 0, err
	}
	last := cq.mfq.Last()
	if last == nil {
		return 0, nil
	}
	return cq.mfq.DeleteBefore(min(cq.minLogic.Load()*CQUnitSize, last.FileFromOffset()))
}

// destroyLocked destroys the queue's files and its backfill redo record.
// Readers holding a batch keep its mapping until they release it; later
// reads find no file. A catch-up still holding the queue cannot write into
// it any more.
func (cq *ConsumeQueue) destroyLocked() error {
	cq.destroyed = true
	err := cq.mfq.Destroy()
	if rerr := cq.removeBackfillRedoLocked(); err == nil {
		err = rerr
	}
	return err
}

// Flush makes the written units durable.
func (cq *ConsumeQueue) Flush() error { return cq.mfq.Flush() }

// Close unmaps the queue's files (after readers release them).
func (cq *ConsumeQueue) Close() error { return cq.mfq.Close() }

// ConsumeQueueStore holds every ConsumeQueue of the store, topic → queueId →
// queue, under storePathRootDir/consumequeue/<topic>/<queueId>/. Queues are
// created lazily on first dispatch and found again at start by scanning the
// directories.
type ConsumeQueueStore struct {
	fsys         storage.FS
	root         string
	unitsPerFile int
	log          *zap.Logger

	mu     sync.RWMutex // guards queues (the map, not the queues)
	queues map[string]map[int32]*ConsumeQueue
	// deleted is each deleted topic's DeletedAt (deleted_topics.go), read
	// on every dispatch; replaced whole, never changed in place.
	deleted atomic.Pointer[map[string]int64]

	// lastTimestamp is the store timestamp of the newest dispatched message;
	// Flush reports the value seen before flushing as the checkpoint's
	// logicsMsgTimestamp (everything stored up to then is in durable units).
	lastTimestamp atomic.Int64
}

// NewConsumeQueueStore returns an empty store rooted at rootDir (the
// consumequeue directory itself, usually storePathRootDir/consumequeue) with
// unitsPerFile units per file (DefaultConsumeQueueUnits in production).
func NewConsumeQueueStore(fsys storage.FS, rootDir string, unitsPerFile int, log *zap.Logger) *ConsumeQueueStore {
	if log == nil {
		log = zap.NewNop()
	}
	return &ConsumeQueueStore{
		fsys: fsys, root: rootDir, unitsPerFile: unitsPerFile, log: log,
		queues: map[string]map[int32]*ConsumeQueue{},
	}
}

// Load opens every queue found on disk. A missing root is an empty store.
func (s *ConsumeQueueStore) Load() error {
	if s.unitsPerFile <= 0 {
		return fmt.Errorf("%w: consume queue units per file must be positive, got %d", ErrInvalidConfig, s.unitsPerFile)
	}
	topics, err := s.fsys.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consume queue store: list %s: %w", s.root, err)
	}
	if err := s.loadDeletedTopics(); err != nil {
		return err
	}
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		qdirs, err := s.fsys.ReadDir(filepath.Join(s.root, t.Name()))
		if err != nil {
			return fmt.Errorf("consume queue store: list topic %s: %w", t.Name(), err)
		}
		for _, q := range qdirs {
			id, err := strconv.ParseInt(q.Name(), 10, 32)
			if !q.IsDir() || err != nil {
				continue
			}
			if _, err := s.FindOrCreate(t.Name(), int32(id)); err != nil {
				return err
			}
		}
	}
	return s.dropDeletedTopicsQueues()
}

// Get returns the queue or nil if it does not exist.
func (s *ConsumeQueueStore) Get(topic string, queueID int32) *ConsumeQueue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.queues[topic][queueID]
}

// FindOrCreate returns the queue, opening or creating it.
func (s *ConsumeQueueStore) FindOrCreate(topic string, queueID int32) (*ConsumeQueue, error) {
	if cq := s.Get(topic, queueID); cq != nil {
		return cq, nil
	}
	if topic == "" || topic == "." || topic == ".." || strings.ContainsAny(topic, "/\\\x00") {
		return nil, fmt.Errorf("consume queue store: topic %q cannot name a directory: %w", topic, ErrMessageIllegal)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cq := s.queues[topic][queueID]; cq != nil {
		return cq, nil
	}
	dir := filepath.Join(s.root, topic, strconv.Itoa(int(queueID)))
	cq, err := openConsumeQueue(s.fsys, dir, topic, queueID, s.unitsPerFile, s.log)
	if err != nil {
		return nil, err
	}
	if s.queues[topic] == nil {
		s.queues[topic] = map[int32]*ConsumeQueue{}
	}
	s.queues[topic][queueID] = cq
	return cq, nil
}

// All returns a snapshot of every queue.
func (s *ConsumeQueueStore) All() []*ConsumeQueue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*ConsumeQueue
	for _, qs := range s.queues {
		for _, cq := range qs {
			out = append(out, cq)
		}
	}
	return out
}

// Queues returns the queues of one topic keyed by queue id (a copy).
func (s *ConsumeQueueStore) Queues(topic string) map[int32]*ConsumeQueue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.queues[topic])
}

// MaxPhysicOffset is the largest CommitLog end any queue points at: the
// dispatcher resumes from there after a restart (replays below it are
// idempotent).
func (s *ConsumeQueueStore) MaxPhysicOffset() int64 {
	var m int64
	for _, cq := range s.All() {
		m = max(m, cq.MaxPhysicOffset())
	}
	return m
}

// LogicsMsgTimestamp is the store timestamp of the newest dispatched message.
func (s *ConsumeQueueStore) LogicsMsgTimestamp() int64 { return s.lastTimestamp.Load() }

// noteTimestamp records a dispatched message's store timestamp.
func (s *ConsumeQueueStore) noteTimestamp(ts int64) {
	for {
		cur := s.lastTimestamp.Load()
		if ts <= cur || s.lastTimestamp.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// Flush makes every queue durable and returns the logicsMsgTimestamp for the
// checkpoint: the newest store timestamp dispatched before the flush started,
// so every message stored up to it is covered by durable units.
func (s *ConsumeQueueStore) Flush() (logicsMsgTimestamp int64, err error) {
	ts := s.lastTimestamp.Load()
	for _, cq := range s.All() {
		if err := cq.Flush(); err != nil {
			return 0, fmt.Errorf("consume queue %s/%d: flush: %w", cq.topic, cq.queueID, err)
		}
	}
	return ts, nil
}

// TruncateDirtyLogicFiles removes, in every queue, the units of messages at
// or past phyOffset (recovery, after the CommitLog's end is known; RocketMQ's
// truncateDirtyLogicFiles).
func (s *ConsumeQueueStore) TruncateDirtyLogicFiles(phyOffset int64) error {
	for _, cq := range s.All() {
		if err := cq.TruncateDirty(phyOffset); err != nil {
			return err
		}
	}
	return nil
}

// VerifyAfterCrash checks, in every queue, the units of messages at or after
// fromPhy against the CommitLog and cuts each queue at its first unit that a
// crash tore (RocketMQ instead re-dispatches the whole range during abnormal
// recovery; here the Raft FSM re-applies the log after its snapshot, which
// re-adds the cut units). Call it after an unclean shutdown, once the
// CommitLog is recovered, with fromPhy = the checkpoint's LogicsOffset (0
// without a checkpoint). It returns the number of queues cut.
func (s *ConsumeQueueStore) VerifyAfterCrash(src SegmentSource, fromPhy int64) (int, error) {
	n := 0
	for _, cq := range s.All() {
		cut, err := cq.verifyFrom(src, fromPhy)
		if err != nil {
			return n, fmt.Errorf("consume queue %s/%d: verify: %w", cq.topic, cq.queueID, err)
		}
		if cut {
			n++
		}
	}
	return n, nil
}

// CorrectMinOffset moves every queue's minimum past messages below the
// CommitLog's minimum offset.
func (s *ConsumeQueueStore) CorrectMinOffset(phyMinOffset int64) error {
	for _, cq := range s.All() {
		if err := cq.CorrectMinOffset(phyMinOffset); err != nil {
			return err
		}
	}
	return nil
}

// DeleteExpired implements PhyOffsetCleaner: it drops queue files that only
// point below phyMinOffset and returns how many went.
func (s *ConsumeQueueStore) DeleteExpired(phyMinOffset int64) (int, error) {
	total := 0
	for _, cq := range s.All() {
		n, err := cq.DeleteExpired(phyMinOffset)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// DeleteTopic destroys every queue of a topic (DELETE_TOPIC_IN_BROKER).
func (s *ConsumeQueueStore) DeleteTopic(topic string) error {
	s.mu.Lock()
	qs := s.queues[topic]
	delete(s.queues, topic)
	s.mu.Unlock()
	var first error
	for _, cq := range qs {
		cq.mu.Lock()
		err := cq.destroyLocked()
		cq.mu.Unlock()
		if err != nil && first == nil {
			first = err
		}
	}
	if len(qs) > 0 {
		for id := range qs {
			_ = s.fsys.Remove(filepath.Join(s.root, topic, strconv.Itoa(int(id))))
		}
		_ = s.fsys.Remove(filepath.Join(s.root, topic))
	}
	return first
}

// Close closes every queue (flush first for a clean shutdown).
func (s *ConsumeQueueStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for _, qs := range s.queues {
		for _, cq := range qs {
			if err := cq.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	s.queues = map[string]map[int32]*ConsumeQueue{}
	return first
}
