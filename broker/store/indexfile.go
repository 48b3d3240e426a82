package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unicode/utf16"
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
	var h int32
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
	h := javaStringHashCode(key)
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
		f.hdr = indexHeader{indexCount: 1}
		if prevEndPhy > 0 {
			f.hdr.beginPhyOffset, f.hdr.endPhyOffset = prevEndPhy, prevEndPhy
		}
		if prevEndTs > 0 {
			f.hdr.beginTimestamp, f.hdr.endTimestamp = prevEndTs, prevEndTs
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

// EndTimestamp is the store timestamp of the newest key.
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
	var b [indexHeaderSize]byte
	f.hdr.encode(b[:])
	return f.st.WriteAt(b[:], 0)
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
	if f.IsWriteFull() {
		return ErrFileFull
	}
	b := f.st.Bytes()
	keyHash := indexKeyHash(key)
	sp := f.slotPos(keyHash)
	slotValue := int32(binary.BigEndian.Uint32(b[sp:]))
	if slotValue <= invalidIndex || slotValue > f.hdr.indexCount {
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
	var item [indexItemSize]byte
	binary.BigEndian.PutUint32(item[0:], uint32(keyHash))
	binary.BigEndian.PutUint64(item[4:], uint64(phyOffset))
	binary.BigEndian.PutUint32(item[12:], uint32(int32(timeDiff)))
	binary.BigEndian.PutUint32(item[16:], uint32(slotValue))
	// Item first, slot second: a reader that sees the new slot value always
	// finds a complete item behind it.
	if err := f.st.WriteAt(item[:], f.itemPos(n)); err != nil {
		return err
	}
	var slot [indexSlotSize]byte
	binary.BigEndian.PutUint32(slot[:], uint32(n))
	if err := f.st.WriteAt(slot[:], sp); err != nil {
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
	f.hdr.endTimestamp = storeTimestamp
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
	if next <= invalidIndex || next > f.hdr.indexCount {
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
