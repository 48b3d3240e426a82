package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// IndexFile layout, identical to RocketMQ's store/index/IndexFile so the
// files are recognisable to anyone who knows that format:
//
//	header (40 bytes): beginTimestamp i64, endTimestamp i64, beginPhyOffset i64,
//	                   endPhyOffset i64, hashSlotCount i32, indexCount i32
//	hashSlotNum × 4-byte slots: the number of the newest index item whose key
//	                   hashes to that slot (0 = empty)
//	indexNum × 20-byte items: keyHash i32, phyOffset i64, timeDiff i32 (seconds
//	                   since beginTimestamp), prevIndex i32 (the older item in the
//	                   same slot, 0 = end of chain)
//
// Item number 0 is never used (indexCount starts at 1, as in RocketMQ), so 0
// can mean "no item" in slots and chains. All integers are big-endian.
const (
	indexHeaderSize = 40
	indexSlotSize   = 4
	indexItemSize   = 20
	// invalidIndex marks an empty slot or the end of a chain.
	invalidIndex = 0

	// DefaultMaxHashSlotNum is RocketMQ's maxHashSlotNum default.
	DefaultMaxHashSlotNum = 5_000_000
	// DefaultMaxIndexNum is RocketMQ's maxIndexNum default.
	DefaultMaxIndexNum = 20_000_000

	// indexFileNameLayout is RocketMQ's UtilAll.timeMillisToHumanString
	// (yyyyMMddHHmmssSSS): index files are named by creation time.
	indexFileNameLayout = "20060102150405.000"
)

// header field positions.
const (
	ihBeginTimestamp = 0
	ihEndTimestamp   = 8
	ihBeginPhyOffset = 16
	ihEndPhyOffset   = 24
	ihHashSlotCount  = 32
	ihIndexCount     = 36
)

// IndexFileSize is the byte size of one index file with the given geometry.
func IndexFileSize(hashSlotNum, indexNum int) int {
	return indexHeaderSize + hashSlotNum*indexSlotSize + indexNum*indexItemSize
}

// javaStringHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... over
// UTF-16 code units with int32 overflow. RocketMQ hashes index keys this way,
// so we must too for files to mean the same thing.
func javaStringHashCode(s string) int32 {
	return javaStringHashFrom(0, s)
}

// javaStringHashFrom continues javaStringHashCode over s from the hash h of
// a prefix: hash(a+b) = javaStringHashFrom(hash(a), b), so index keys are
// hashed without building topic#key.
func javaStringHashFrom(h int32, s string) int32 {
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + r1
			h = 31*h + r2
			continue
		}
		h = 31*h + r
	}
	return h
}

// indexKeyHash is RocketMQ's IndexFile.indexKeyHashMethod: abs(hashCode),
// where Java's Math.abs(Integer.MIN_VALUE) stays negative and is then mapped
// to 0.
func indexKeyHash(key string) int32 {
	return absKeyHash(javaStringHashCode(key))
}

// topicKeyHash is indexKeyHash(indexKey(topic, key)) without the
// concatenation (dispatch hot path).
func topicKeyHash(topic, key string) int32 {
	return absKeyHash(javaStringHashFrom(javaStringHashFrom(0, topic)*31+'#', key))
}

func absKeyHash(h int32) int32 {
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		return -h
	}
	return h
}

// indexKey builds the key stored in the index: RocketMQ's IndexService.buildKey.
func indexKey(topic, key string) string { return topic + "#" + key }

// indexFileName names an index file by its creation time (local time, as
// RocketMQ does) without the dot of the Go layout.
func indexFileName(t time.Time) string {
	s := t.Format(indexFileNameLayout)
	return s[:14] + s[15:]
}

// indexHeader is the in-memory copy of an index file's 40-byte header.
type indexHeader struct {
	beginTimestamp int64
	endTimestamp   int64
	beginPhyOffset int64
	endPhyOffset   int64
	hashSlotCount  int32
	indexCount     int32
}

func (h *indexHeader) encode(b []byte) {
	binary.BigEndian.PutUint64(b[ihBeginTimestamp:], uint64(h.beginTimestamp))
	binary.BigEndian.PutUint64(b[ihEndTimestamp:], uint64(h.endTimestamp))
	binary.BigEndian.PutUint64(b[ihBeginPhyOffset:], uint64(h.beginPhyOffset))
	binary.BigEndian.PutUint64(b[ihEndPhyOffset:], uint64(h.endPhyOffset))
	binary.BigEndian.PutUint32(b[ihHashSlotCount:], uint32(h.hashSlotCount))
	binary.BigEndian.PutUint32(b[ihIndexCount:], uint32(h.indexCount))
}

func decodeIndexHeader(b []byte) indexHeader {
	return indexHeader{
		beginTimestamp: int64(binary.BigEndian.Uint64(b[ihBeginTimestamp:])),
		endTimestamp:   int64(binary.BigEndian.Uint64(b[ihEndTimestamp:])),
		beginPhyOffset: int64(binary.BigEndian.Uint64(b[ihBeginPhyOffset:])),
		endPhyOffset:   int64(binary.BigEndian.Uint64(b[ihEndPhyOffset:])),
		hashSlotCount:  int32(binary.BigEndian.Uint32(b[ihHashSlotCount:])),
		indexCount:     int32(binary.BigEndian.Uint32(b[ihIndexCount:])),
	}
}

// indexStorage is the part of a *MappedFile an IndexFile needs: random-access
// reads of the whole mapping and positioned writes. Kept as a seam so the
// slot/chain logic is testable on a plain byte slice.
type indexStorage interface {
	Bytes() []byte
	WriteAt(p []byte, pos int) error
}

// IndexFile is one hash index file. It is not safe for concurrent use: the
// IndexService serializes writers and readers with its lock.
type IndexFile struct {
	name        string
	st          indexStorage
	hashSlotNum int
	indexNum    int
	hdr         indexHeader
	// scratch stages the item, slot and header bytes of a put: a local
	// array passed to the indexStorage interface escapes, and that was
	// three allocations per indexed key on every replica.
	scratch [indexHeaderSize]byte
	// synced and syncedEnd are the indexCount and endTimestamp on disk for
	// certain: as of the last completed flush, or as Load or a backfill's
	// move found the file (0 for a file created since); IndexService.mu.
	synced    int32
	syncedEnd int64
	// fresh is set when the file had no header and got a new one here: a
	// file created just before a crash may not have its header on disk.
	fresh bool
}

// newIndexFile wraps fresh or existing storage. For a fresh file (indexCount
// 0 on disk) the header starts at indexCount 1 and, like RocketMQ, inherits
// the previous file's end offset and timestamp so time-range checks stay
// meaningful before the first put.
func newIndexFile(name string, st indexStorage, hashSlotNum, indexNum int, prevEndPhy, prevEndTs int64) (*IndexFile, error) {
	if len(st.Bytes()) < IndexFileSize(hashSlotNum, indexNum) {
		return nil, fmt.Errorf("index file %s: mapping of %d bytes is smaller than %d slots + %d items need (%d bytes): %w",
			name, len(st.Bytes()), hashSlotNum, indexNum, IndexFileSize(hashSlotNum, indexNum), ErrCorruptFile)
	}
	f := &IndexFile{name: name, st: st, hashSlotNum: hashSlotNum, indexNum: indexNum}
	f.hdr = decodeIndexHeader(st.Bytes())
	if f.hdr.indexCount <= 0 {
		f.fresh = true
		f.hdr = indexHeader{indexCount: 1}
		if prevEndPhy > 0 {
			f.hdr.beginPhyOffset, f.hdr.endPhyOffset = prevEndPhy, prevEndPhy
		}
		if prevEndTs > 0 {
			// One past the previous end, so that the checkpoint can keep
			// the previous file and drop this one after a crash (Flush)
			// even when this file's keys come from a clock behind.
			f.hdr.beginTimestamp, f.hdr.endTimestamp = prevEndTs, prevEndTs+1
		}
		if err := f.writeHeader(); err != nil {
			return nil, err
		}
	}
	if int(f.hdr.indexCount) > indexNum {
		return nil, fmt.Errorf("index file %s: header says %d items but the file holds at most %d: %w",
			name, f.hdr.indexCount, indexNum, ErrCorruptFile)
	}
	return f, nil
}

// Name is the file's path.
func (f *IndexFile) Name() string { return f.name }

// BeginTimestamp is the store timestamp of the first key (or the previous
// file's end when empty).
func (f *IndexFile) BeginTimestamp() int64 { return f.hdr.beginTimestamp }

// EndTimestamp is the newest store timestamp of a key.
func (f *IndexFile) EndTimestamp() int64 { return f.hdr.endTimestamp }

// BeginPhyOffset is the CommitLog offset of the first indexed message.
func (f *IndexFile) BeginPhyOffset() int64 { return f.hdr.beginPhyOffset }

// EndPhyOffset is the CommitLog offset of the newest indexed message.
func (f *IndexFile) EndPhyOffset() int64 { return f.hdr.endPhyOffset }

// IndexCount is the number of items used plus one (item 0 is reserved).
func (f *IndexFile) IndexCount() int { return int(f.hdr.indexCount) }

// IsWriteFull reports whether no item is left.
func (f *IndexFile) IsWriteFull() bool { return int(f.hdr.indexCount) >= f.indexNum }

func (f *IndexFile) writeHeader() error {
	b := f.scratch[:indexHeaderSize]
	f.hdr.encode(b)
	return f.st.WriteAt(b, 0)
}

func (f *IndexFile) slotPos(keyHash int32) int {
	return indexHeaderSize + int(keyHash)%f.hashSlotNum*indexSlotSize
}

func (f *IndexFile) itemPos(n int32) int {
	return indexHeaderSize + f.hashSlotNum*indexSlotSize + int(n)*indexItemSize
}

// PutKey adds key → phyOffset. It returns ErrFileFull when the file has
// no item left; the caller rolls to a new file.
func (f *IndexFile) PutKey(key string, phyOffset, storeTimestamp int64) error {
	return f.putHash(indexKeyHash(key), phyOffset, storeTimestamp, 0)
}

// putHash is PutKey with the key already hashed (indexKeyHash); the file's
// end time becomes at least endFloor (IndexService.floor).
func (f *IndexFile) putHash(keyHash int32, phyOffset, storeTimestamp, endFloor int64) error {
	if f.IsWriteFull() {
		return storage.ErrFileFull
	}
	b := f.st.Bytes()
	sp := f.slotPos(keyHash)
	slotValue := int32(binary.BigEndian.Uint32(b[sp:]))
	if slotValue <= invalidIndex || slotValue >= f.hdr.indexCount {
		slotValue = invalidIndex
	}
	// Time is stored in seconds relative to the file's first key, clamped
	// like RocketMQ so a clock step backwards never yields a negative diff
	// (a negative diff ends chain walks).
	var timeDiff int64
	if f.hdr.beginTimestamp > 0 {
		timeDiff = (storeTimestamp - f.hdr.beginTimestamp) / 1000
		timeDiff = max(0, min(timeDiff, math.MaxInt32))
	}
	n := f.hdr.indexCount
	item := f.scratch[:indexItemSize]
	binary.BigEndian.PutUint32(item[0:], uint32(keyHash))
	binary.BigEndian.PutUint64(item[4:], uint64(phyOffset))
	binary.BigEndian.PutUint32(item[12:], uint32(int32(timeDiff)))
	binary.BigEndian.PutUint32(item[16:], uint32(slotValue))
	// Item first, slot second: a reader that sees the new slot value always
	// finds a complete item behind it.
	if err := f.st.WriteAt(item, f.itemPos(n)); err != nil {
		return err
	}
	slot := f.scratch[:indexSlotSize]
	binary.BigEndian.PutUint32(slot, uint32(n))
	if err := f.st.WriteAt(slot, sp); err != nil {
		return err
	}
	if n <= 1 {
		f.hdr.beginPhyOffset = phyOffset
		f.hdr.beginTimestamp = storeTimestamp
	}
	if slotValue == invalidIndex {
		f.hdr.hashSlotCount++
	}
	f.hdr.indexCount++
	f.hdr.endPhyOffset = phyOffset
	// Never backwards (a leader whose clock is behind the last one's), and
	// past a checkpoint's time: the checkpoint relies on a file's end time
	// on disk only growing, past its own once the file takes keys it lacks.
	f.hdr.endTimestamp = max(f.hdr.endTimestamp, storeTimestamp, endFloor)
	return f.writeHeader()
}

// IsTimeMatched reports whether [begin, end] overlaps the file's time span
// (RocketMQ's IndexFile.isTimeMatched).
func (f *IndexFile) IsTimeMatched(begin, end int64) bool {
	b, e := f.hdr.beginTimestamp, f.hdr.endTimestamp
	return (begin < b && end > e) || (begin >= b && begin <= e) || (end >= b && end <= e)
}

// SelectPhyOffsets appends to dst the physical offsets of items whose key is
// key and whose store time (second precision) is within [begin, end], newest
// first, until dst holds maxNum entries.
func (f *IndexFile) SelectPhyOffsets(dst []int64, key string, maxNum int, begin, end int64) []int64 {
	if f.hdr.indexCount <= 1 {
		return dst
	}
	b := f.st.Bytes()
	keyHash := indexKeyHash(key)
	next := int32(binary.BigEndian.Uint32(b[f.slotPos(keyHash):]))
	// Items in use are 1..indexCount-1; in a full file indexCount is one
	// past the last item, so a damaged slot naming it would read past the
	// mapping.
	if next <= invalidIndex || next >= f.hdr.indexCount {
		return dst
	}
	// Chains only point to older items; the visited bound protects against
	// a corrupt file whose chain loops.
	for steps := int32(0); len(dst) < maxNum && steps < f.hdr.indexCount; steps++ {
		p := f.itemPos(next)
		hashRead := int32(binary.BigEndian.Uint32(b[p:]))
		phyRead := int64(binary.BigEndian.Uint64(b[p+4:]))
		diff := int64(int32(binary.BigEndian.Uint32(b[p+12:])))
		prev := int32(binary.BigEndian.Uint32(b[p+16:]))
		if diff < 0 {
			break
		}
		timeRead := f.hdr.beginTimestamp + diff*1000
		if hashRead == keyHash && timeRead >= begin && timeRead <= end {
			dst = append(dst, phyRead)
		}
		if prev <= invalidIndex || prev > f.hdr.indexCount || prev >= next || timeRead < begin {
			break
		}
		next = prev
	}
	return dst
}

// QueryOffsetResult is the answer of IndexService.QueryOffset.
type QueryOffsetResult struct {
	// PhyOffsets are CommitLog offsets of matching messages, newest first.
	// Hash collisions are possible: callers compare the real key.
	PhyOffsets []int64
	// IndexLastUpdateTimestamp and IndexLastUpdatePhyOffset describe the
	// newest index entry (RocketMQ returns them to the client).
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyOffset int64
}

// IndexService maintains the index files under storePathRootDir/index: it
// indexes every message by topic#KEY for each of its KEYS and by
// topic#UNIQ_KEY, and answers QUERY_MESSAGE by key and time range.
type IndexService struct {
	fsys        storage.FS
	dir         string
	hashSlotNum int
	indexNum    int
	now         func() time.Time
	log         *zap.Logger

	// mu guards files, the files' headers and contents, maxIndexedPhy and
	// rebuildFrom: writers (BuildIndex, deletion) take it exclusively,
	// queries shared.
	mu            sync.RWMutex
	files         []*IndexFile // oldest first
	mfs           []*storage.MappedFile
	maxIndexedPhy int64 // CommitLog offset of the newest indexed message, -1 if none
	rebuildFrom   int64 // see RebuildFrom; -1 if nothing was dropped at Load
	// floor is one past the newest index time a checkpoint may hold (the
	// one Load got, or one a flush returned): a key put after it moves its
	// file's end time to at least this, so a crash recovery that reads the
	// header drops the file.
	floor int64
}

// NewIndexService returns a service over dir with the given geometry
// (DefaultMaxHashSlotNum, DefaultMaxIndexNum in production). now names new
// files; nil means time.Now.
func NewIndexService(fsys storage.FS, dir string, hashSlotNum, indexNum int, now func() time.Time, log *zap.Logger) *IndexService {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &IndexService{fsys: fsys, dir: dir, hashSlotNum: hashSlotNum, indexNum: indexNum, now: now, log: log,
		maxIndexedPhy: -1, rebuildFrom: -1}
}

// Load opens the existing index files, oldest first. After a crash
// (lastExitOK false) files with entries newer than the checkpoint's
// indexMsgTimestamp may hold torn writes, so they are dropped like RocketMQ
// does, and so is a file without a header (created just before the
// crash); RebuildFrom then says where the dispatcher must re-index from.
func (s *IndexService) Load(lastExitOK bool, indexMsgTimestamp int64) error {
	if s.hashSlotNum <= 0 || s.indexNum <= 1 {
		return fmt.Errorf("%w: index geometry: maxHashSlotNum %d and maxIndexNum %d must be positive (maxIndexNum > 1)",
			ErrInvalidConfig, s.hashSlotNum, s.indexNum)
	}
	if err := storage.MkdirAllDurable(s.fsys, s.dir); err != nil {
		return fmt.Errorf("index: create %s: %w", s.dir, err)
	}
	ents, err := s.fsys.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("index: list %s: %w", s.dir, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents { // ReadDir sorts by name, and names sort by creation time
		if e.IsDir() || !isIndexFileName(e.Name()) {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		mf, f, err := s.openFile(path, 0, 0)
		if err != nil {
			return err
		}
		if !lastExitOK && (f.EndTimestamp() > indexMsgTimestamp || f.fresh) {
			s.log.Warn("dropping index file newer than the checkpoint after a crash; it will be rebuilt",
				zap.String("file", path), zap.Int64("endTimestamp", f.EndTimestamp()), zap.Int64("checkpoint", indexMsgTimestamp))
			from := f.BeginPhyOffset()
			if len(s.files) > 0 {
				from = s.files[len(s.files)-1].EndPhyOffset()
			}
			if s.rebuildFrom < 0 || from < s.rebuildFrom {
				s.rebuildFrom = from
			}
			if err := mf.Destroy(); err != nil {
				return fmt.Errorf("index: drop %s: %w", path, err)
			}
			continue
		}
		f.markSynced(f.IndexCount(), f.EndTimestamp())
		s.files = append(s.files, f)
		s.mfs = append(s.mfs, mf)
		if f.IndexCount() > 1 {
			s.maxIndexedPhy = f.EndPhyOffset()
		}
	}
	s.floor = max(s.floor, indexMsgTimestamp+1)
	return nil
}

func isIndexFileName(name string) bool {
	if len(name) != 17 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return false
		}
	}
	return true
}

func (s *IndexService) openFile(path string, prevEndPhy, prevEndTs int64) (*storage.MappedFile, *IndexFile, error) {
	mf, err := storage.OpenMappedFile(s.fsys, path, 0, IndexFileSize(s.hashSlotNum, s.indexNum))
	if err != nil {
		return nil, nil, fmt.Errorf("index: open %s: %w", path, err)
	}
	f, err := newIndexFile(path, mf, s.hashSlotNum, s.indexNum, prevEndPhy, prevEndTs)
	if err != nil {
		mf.Close()
		return nil, nil, err
	}
	return mf, f, nil
}

// RebuildFrom returns the CommitLog offset from which messages must be
// dispatched again to rebuild index files dropped by Load, or -1 if none
// were dropped. Replaying already indexed messages is harmless: BuildIndex
// skips them.
func (s *IndexService) RebuildFrom() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rebuildFrom
}

// lastWritableLocked returns the newest file with room, creating one (named
// by the current time, strictly after the previous name) when needed.
func (s *IndexService) lastWritableLocked() (*IndexFile, error) {
	var prevEndPhy, prevEndTs int64
	if n := len(s.files); n > 0 && !s.files[n-1].IsWriteFull() {
		return s.files[n-1], nil // the per-message path: no clock read, no formatting
	}
	name := indexFileName(s.now())
	if n := len(s.files); n > 0 {
		last := s.files[n-1]
		prevEndPhy, prevEndTs = last.EndPhyOffset(), last.EndTimestamp()
		// Names must keep sorting in creation order even if two files are
		// created in one millisecond or the clock steps back.
		if prev := filepath.Base(last.Name()); name <= prev {
			name = nextIndexFileName(prev)
		}
	}
	mf, f, err := s.openFile(filepath.Join(s.dir, name), prevEndPhy, prevEndTs)
	if err != nil {
		return nil, err
	}
	// The full predecessor is made durable by the next periodic flush, not
	// here: an msync of a production-sized file under mu would stall
	// dispatching and queries.
	s.files = append(s.files, f)
	s.mfs = append(s.mfs, mf)
	s.log.Info("created index file", zap.String("file", f.Name()))
	return f, nil
}

// nextIndexFileName returns the 17-digit name one millisecond after prev.
func nextIndexFileName(prev string) string {
	t, err := time.ParseInLocation(indexFileNameLayout, prev[:14]+"."+prev[14:], time.Local)
	if err != nil {
		return prev // not reachable for names this package wrote
	}
	return indexFileName(t.Add(time.Millisecond))
}

// BuildIndex indexes one message: topic#UNIQ_KEY and topic#K for every
// space-separated K in keys (RocketMQ's IndexService.buildIndex). Rolled-back
// transactional messages are not indexed; messages at or below the newest
// indexed offset were indexed before (a replay) and are skipped.
func (s *IndexService) BuildIndex(topic, keys, uniqKey string, sysFlag int32, phyOffset, storeTimestamp int64) error {
	if !indexable(keys, uniqKey, sysFlag) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if phyOffset <= s.maxIndexedPhy {
		return nil
	}
	if err := putKeys(s.lastWritableLocked, s.floor, topic, keys, uniqKey, phyOffset, storeTimestamp); err != nil {
		return err
	}
	s.maxIndexedPhy = phyOffset
	return nil
}

// indexable reports whether a message gets index entries: it has a key
// and is not a rolled-back transactional message.
func indexable(keys, uniqKey string, sysFlag int32) bool {
	return sysFlag&wire.SysFlagTransMask != wire.SysFlagTransRollback && (uniqKey != "" || strings.TrimSpace(keys) != "")
}

// putKeys puts a message's UNIQ_KEY and each of its keys into the file
// writable returns, rolling to a new one when it is full: the one way
// messages are indexed, for the live tail (BuildIndex) and for a catch-up's
// older range (IndexBackfill, whose files are flushed before they join
// the service, so endFloor 0).
func putKeys(writable func() (*IndexFile, error), endFloor int64, topic, keys, uniqKey string, phyOffset, storeTimestamp int64) error {
	put := func(key string) error {
		f, err := writable()
		if err != nil {
			return err
		}
		h := topicKeyHash(topic, key)
		err = f.putHash(h, phyOffset, storeTimestamp, endFloor)
		if errors.Is(err, storage.ErrFileFull) {
			if f, err = writable(); err != nil {
				return err
			}
			err = f.putHash(h, phyOffset, storeTimestamp, endFloor)
		}
		return err
	}
	if uniqKey != "" {
		if err := put(uniqKey); err != nil {
			return fmt.Errorf("index: message at %d, uniq key %q: %w", phyOffset, uniqKey, err)
		}
	}
	for k := range strings.SplitSeq(keys, " ") {
		if k == "" {
			continue
		}
		if err := put(k); err != nil {
			return fmt.Errorf("index: message at %d, key %q: %w", phyOffset, k, err)
		}
	}
	return nil
}

// QueryOffset returns up to maxNum CommitLog offsets of messages of topic
// indexed under key with a store time in [begin, end] (milliseconds; the
// index keeps second precision), newest first.
func (s *IndexService) QueryOffset(topic, key string, maxNum int, begin, end int64) QueryOffsetResult {
	var res QueryOffsetResult
	if maxNum <= 0 {
		return res
	}
	k := indexKey(topic, key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i := len(s.files) - 1; i >= 0; i-- {
		f := s.files[i]
		if i == len(s.files)-1 {
			res.IndexLastUpdateTimestamp = f.EndTimestamp()
			res.IndexLastUpdatePhyOffset = f.EndPhyOffset()
		}
		if f.IsTimeMatched(begin, end) {
			res.PhyOffsets = f.SelectPhyOffsets(res.PhyOffsets, k, maxNum, begin, end)
		}
		// Older files only hold older entries.
		if f.BeginTimestamp() < begin || len(res.PhyOffsets) >= maxNum {
			break
		}
	}
	return res
}

// Files returns the number of index files.
func (s *IndexService) Files() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.files)
}

// Flush makes every index file durable and returns the indexMsgTimestamp
// for the checkpoint (see flush). It runs at snapshots, catch-ups and
// close.
func (s *IndexService) Flush() (indexMsgTimestamp int64, err error) { return s.flush(true) }

// FlushSealed is the periodic checkpoint's flush: it makes the files that
// are no longer written durable but not the live one (RocketMQ, too,
// flushes an index file when it fills). Every key lands on a random page
// of the live file's hash-slot table, so flushed every second nearly the
// whole table would be written back, and each page faulted again at its
// next write.
//
// While the live file holds keys no flush covered, the time returned is
// one below the end time its last flush made durable. A file's end time
// only grows, so whatever pages of it were written back since, its header
// on disk says at least that much: a crash recovery drops it and the
// dispatcher indexes it again from the CommitLog. The live file is flushed
// here too until its durable end time is past the sealed files' (a new
// file, once), so that they are kept.
func (s *IndexService) FlushSealed() (indexMsgTimestamp int64, err error) { return s.flush(false) }

// flush returns the newest end time of all files when the live file is
// durable as of the moment flush read it (all, or nothing since its last
// flush), and raises the floor above it: a key put after that moment, even
// one stored in the same millisecond or from a clock behind, moves its
// file's end time past the checkpoint's, so a crash recovery drops the
// file if its header was written back with that key. (If the key's
// hash-slot page reached the disk without the header, the file is kept and
// misses the keys in that slot's chain; the window lasts until the next
// periodic checkpoint, a second at most, after a snapshot, catch-up, idle
// spell or start.)
func (s *IndexService) flush(all bool) (indexMsgTimestamp int64, err error) {
	s.mu.Lock()
	n := len(s.files)
	if n == 0 {
		s.mu.Unlock()
		return 0, nil
	}
	mfs := slices.Clone(s.mfs)
	live := s.files[n-1]
	count, end, syncedEnd := live.IndexCount(), live.EndTimestamp(), live.syncedEnd
	dirty := int32(count) > live.synced
	var sealedEnd int64
	for _, f := range s.files[:n-1] {
		sealedEnd = max(sealedEnd, f.EndTimestamp())
	}
	if !all && dirty {
		all = syncedEnd <= sealedEnd
	}
	ckpt := max(end, sealedEnd) // the live file is durable up to end: see below
	if all || !dirty {
		s.floor = max(s.floor, ckpt+1)
	}
	s.mu.Unlock()
	if !all {
		mfs = mfs[:n-1]
	}
	for _, mf := range mfs {
		if _, err := mf.Flush(); err != nil && !errors.Is(err, ErrFileClosed) {
			return 0, fmt.Errorf("index: flush %s: %w", mf.Path(), err)
		}
	}
	if !all && dirty {
		return syncedEnd - 1, nil // > sealedEnd >= 0
	}
	if all {
		s.mu.Lock()
		live.markSynced(count, end)
		s.mu.Unlock()
	}
	return ckpt, nil
}

// markSynced records that the file is on disk up to count entries and end
// time end.
func (f *IndexFile) markSynced(count int, end int64) {
	f.synced = max(f.synced, int32(count))
	f.syncedEnd = max(f.syncedEnd, end)
}

// DeleteExpired implements PhyOffsetCleaner: it destroys index files, oldest
// first and never the newest, whose entries all point below phyMinOffset.
func (s *IndexService) DeleteExpired(phyMinOffset int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(s.files)-1 && s.files[n].EndPhyOffset() < phyMinOffset {
		n++
	}
	victims := slices.Clone(s.mfs[:n])
	s.files = slices.Delete(s.files, 0, n)
	s.mfs = slices.Delete(s.mfs, 0, n)
	for i, mf := range victims {
		if err := mf.Destroy(); err != nil {
			return i, fmt.Errorf("index: delete %s: %w", mf.Path(), err)
		}
	}
	return n, nil
}

// Close closes the index files (flush first for a clean shutdown).
func (s *IndexService) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for _, mf := range s.mfs {
		if err := mf.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.files, s.mfs = nil, nil
	return first
}
