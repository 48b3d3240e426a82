package timerindex

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// appliedName is the file of the applied mark, written without sync after
// each entry: the Raft index (8 bytes LE), a hash of the boot id of the
// machine that wrote it (8 bytes LE) and a CRC32-C of both. A mark of an
// earlier version (index and CRC only) is read as written in this boot.
const appliedName = "APPLIED"

// intentOff is where the write-ahead intent of the entry being applied
// starts in the applied mark's file (after the mark): the entry's Raft
// index (8 bytes LE), the boot hash (8), a count n (4), n pairs of a bucket
// and its size before the entry (8+8 each) and a CRC32-C of all that. Open
// cuts the listed buckets back to those sizes when the entry is not marked
// applied, so re-applying it writes the same bytes at the same positions.
const intentOff = 20

// maxIntent bounds the buckets of an intent that Open reads.
const maxIntent = 1 << 16

// maxSynced bounds the buckets of a synced mark that Open reads (more than
// the buckets of a year).
const maxSynced = 1 << 25

// asideSuffix names a bucket file an advance removed, kept until a Sync
// after its entry, so that undoing the entry after a kill, or cutting the
// files back to the synced mark after a reboot, finds it again.
const asideSuffix = ".gone"

// syncedName is the file of the synced mark, replaced atomically by Sync
// once every file and directory is durable: the applied mark at that point
// (8 bytes LE), the count and (bucket, size) pairs of the bucket files then
// (encodeSynced), and a CRC32-C of all of it.
const syncedName = "SYNCED"

// bootID identifies the lifetime of the page cache holding the files'
// unsynced writes (the boot; the process under the crashfs tag). Tests
// replace it to simulate a reboot.
var bootID = storage.PageCacheID

// bootHash is what a mark stores of a boot id; 0 means unknown.
func bootHash(id string) uint64 {
	if id == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64() | 1
}

// maxOpen bounds the append handles kept open; writes go to few buckets at
// a time (the near future), so the cache rarely turns over.
const maxOpen = 64

// readChunk is how many records a move reads at a time.
const readChunk = 4096

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("timerindex: closed")

// Index is the on-disk timer index of one replica. Its methods are safe for
// concurrent use: the FSM appends and advances, the leader's timer service
// reads, a snapshot's Persist syncs.
type Index struct {
	fs  storage.FS
	dir string
	log *zap.Logger

	mu sync.Mutex
	// Guarded by mu.
	present map[int64]uint64 // bucket>>6 → one bit per bucket whose file holds records
	open    map[int64]*openFile
	dirty   map[int64]struct{} // buckets written since the last Sync
	removed map[int64]struct{} // group directories with a removal since the last Sync
	dirs    map[int64]bool     // group directories known to exist
	// groupMin is, per group directory with records, a lower bound of
	// their queue offsets (exact after Open and appends; it may stay low
	// after a removal, which only keeps old CommitLog segments longer).
	groupMin map[int64]int64
	applied  uint64
	mark     storage.File
	boot     uint64 // bootHash of this boot, written with the applied mark
	// The entry being applied (0: none, see Begin), the buckets it
	// touched with their sizes before it, in intent order, and the
	// buckets its advance set aside.
	intentEntry uint64
	intent      []bucketSize
	aside       []int64
	// gone are buckets set aside by applied entries, removed once a
	// Sync has recorded a synced mark past them.
	gone   map[int64]struct{}
	closed bool
}

type bucketSize struct{ bucket, size int64 }

type openFile struct {
	f    storage.File
	size int64
}

// Open opens (or creates) the index under dir on fsys. A file whose size is
// not a whole number of records (a torn append) is cut back to the last
// whole record; an empty one is removed.
func Open(fsys storage.FS, dir string, log *zap.Logger) (*Index, error) {
	if log == nil {
		log = zap.NewNop()
	}
	x := &Index{fs: fsys, dir: dir, log: log, present: map[int64]uint64{}, open: map[int64]*openFile{},
		dirty: map[int64]struct{}{}, removed: map[int64]struct{}{}, dirs: map[int64]bool{}, groupMin: map[int64]int64{}, gone: map[int64]struct{}{}}
	if err := storage.MkdirAllDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("timerindex: %w", err)
	}
	// A crash between a synced-mark write's create and rename leaves its
	// temporary file; nothing writes the mark while the index is closed.
	if err := storage.RemoveTempFiles(fsys, filepath.Join(dir, syncedName)); err != nil {
		return nil, fmt.Errorf("timerindex: %w", err)
	}
	var err error
	if x.mark, err = fsys.OpenFile(filepath.Join(dir, appliedName), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, fmt.Errorf("timerindex: %w", err)
	}
	x.boot = bootHash(bootID())
	var synced []bucketSize
	x.applied, synced = x.recoverApplied()
	// An intent is read only if written in this boot (its writes are in
	// this page cache), whatever the mark says.
	var undo []bucketSize
	entry, sizes, ok := x.readIntent()
	switch {
	case synced != nil:
		err = x.restoreSynced(synced)
	case ok && entry > x.applied:
		log.Info("timer index: undoing the writes of an entry cut short by the last stop",
			zap.Uint64("entry", entry), zap.Uint64("applied", x.applied))
		undo = sizes
		fallthrough
	default:
		err = x.undo(undo)
	}
	if err != nil {
		x.mark.Close()
		return nil, err
	}
	groups, err := fsys.ReadDir(dir)
	if err != nil {
		x.mark.Close()
		return nil, fmt.Errorf("timerindex: %w", err)
	}
	for _, g := range groups {
		if !g.IsDir() {
			continue
		}
		gid, err := strconv.ParseInt(g.Name(), 10, 64)
		if err != nil {
			continue
		}
		x.dirs[gid] = true
		files, err := fsys.ReadDir(filepath.Join(dir, g.Name()))
		if err != nil {
			x.mark.Close()
			return nil, fmt.Errorf("timerindex: %w", err)
		}
		for _, e := range files {
			b, err := strconv.ParseInt(e.Name(), 10, 64)
			if err != nil || e.IsDir() || b>>12 != gid {
				continue
			}
			if err := x.recoverFile(b); err != nil {
				x.mark.Close()
				return nil, err
			}
		}
	}
	return x, nil
}

// undo puts the files back as they were before an entry that was not
// marked applied (a process killed while applying it): the bucket files
// its advance set aside (size -1 in sizes) are renamed back and the
// buckets it appended to are cut to their sizes before it. Files set
// aside by earlier entries stay aside until the next Sync.
func (x *Index) undo(sizes []bucketSize) error {
	err := x.walkAside(func(b int64, aside string) error {
		if slices.Contains(sizes, bucketSize{b, -1}) {
			return x.fs.Rename(aside, x.path(b))
		}
		x.gone[b] = struct{}{}
		return nil
	})
	if err != nil {
		return err
	}
	for _, bs := range sizes {
		if bs.size >= 0 {
			if err := x.cut(bs.bucket, bs.size); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreSynced puts the files back as they were at the synced mark (after
// a reboot: the page cache that held later writes is gone, some of them
// reached the disk): every bucket the mark lists is cut to its size then
// (renamed back if set aside since), every other is removed. Re-applying
// the log after the mark then writes every bucket exactly as the peers did.
func (x *Index) restoreSynced(synced []bucketSize) error {
	size := make(map[int64]int64, len(synced))
	for _, bs := range synced {
		size[bs.bucket] = bs.size
	}
	err := x.walkAside(func(b int64, aside string) error {
		if _, ok := size[b]; ok {
			if _, err := x.fs.Stat(x.path(b)); errors.Is(err, fs.ErrNotExist) {
				return x.fs.Rename(aside, x.path(b))
			}
		}
		return x.fs.Remove(aside)
	})
	if err != nil {
		return err
	}
	err = x.walkBuckets(func(b int64) error {
		if n, ok := size[b]; ok {
			return x.cut(b, n)
		}
		return x.fs.Remove(x.path(b))
	})
	if err != nil {
		return err
	}
	x.log.Info("timer index: no applied mark of this boot; the files are cut back to the synced mark and the entries after it indexed again",
		zap.Uint64("synced", x.applied))
	return nil
}

// walkBuckets calls fn for every bucket file (by number).
func (x *Index) walkBuckets(fn func(b int64) error) error {
	return x.walk(func(gid int64, name string) error {
		if b, err := strconv.ParseInt(name, 10, 64); err == nil && b>>12 == gid {
			return fn(b)
		}
		return nil
	})
}

// walkAside calls fn for every bucket file set aside.
func (x *Index) walkAside(fn func(b int64, aside string) error) error {
	return x.walk(func(gid int64, name string) error {
		num, ok := strings.CutSuffix(name, asideSuffix)
		if !ok {
			return nil
		}
		if b, err := strconv.ParseInt(num, 10, 64); err == nil && b>>12 == gid {
			return fn(b, x.path(b)+asideSuffix)
		}
		return nil
	})
}

func (x *Index) walk(fn func(gid int64, name string) error) error {
	groups, err := x.fs.ReadDir(x.dir)
	if err != nil {
		return fmt.Errorf("timerindex: %w", err)
	}
	for _, g := range groups {
		gid, err := strconv.ParseInt(g.Name(), 10, 64)
		if err != nil || !g.IsDir() {
			continue
		}
		files, err := x.fs.ReadDir(filepath.Join(x.dir, g.Name()))
		if err != nil {
			return fmt.Errorf("timerindex: %w", err)
		}
		for _, e := range files {
			if e.IsDir() {
				continue
			}
			if err := fn(gid, e.Name()); err != nil {
				return fmt.Errorf("timerindex: %w", err)
			}
		}
	}
	return nil
}

// cut cuts bucket b's file to size bytes (removes it at 0).
func (x *Index) cut(b, size int64) error {
	name := x.path(b)
	if size == 0 {
		if err := x.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("timerindex: %w", err)
		}
		return nil
	}
	f, err := x.fs.OpenFile(name, os.O_RDWR, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("timerindex: %w", err)
	}
	cur, err := f.Size()
	if err == nil && cur > size {
		err = f.Truncate(size)
	}
	f.Close()
	if err != nil {
		return fmt.Errorf("timerindex: %w", err)
	}
	return nil
}

// readIntent reads the write-ahead intent (ok false: none, damaged or of
// another boot).
func (x *Index) readIntent() (entry uint64, sizes []bucketSize, ok bool) {
	var head [20]byte
	if n, _ := x.mark.ReadAt(head[:], intentOff); n != len(head) {
		return 0, nil, false
	}
	count := binary.LittleEndian.Uint32(head[16:])
	if count > maxIntent {
		return 0, nil, false
	}
	buf := make([]byte, len(head)+int(count)*16+4)
	n, _ := x.mark.ReadAt(buf, intentOff)
	return decodeIntent(buf[:n], x.boot)
}

// encodeIntent is the intent of entry written in boot (see intentOff).
func encodeIntent(entry, boot uint64, sizes []bucketSize) []byte {
	buf := make([]byte, 20, 20+len(sizes)*16+4)
	binary.LittleEndian.PutUint64(buf, entry)
	binary.LittleEndian.PutUint64(buf[8:], boot)
	binary.LittleEndian.PutUint32(buf[16:], uint32(len(sizes)))
	for _, bs := range sizes {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(bs.bucket))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(bs.size))
	}
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// decodeIntent decodes an intent at the start of b (bytes after it are
// ignored). ok is false when it is short, damaged, or not of boot (an
// unknown boot, 0, matches none); it never panics.
func decodeIntent(b []byte, boot uint64) (entry uint64, sizes []bucketSize, ok bool) {
	if len(b) < 24 || boot == 0 || binary.LittleEndian.Uint64(b[8:16]) != boot {
		return 0, nil, false
	}
	count := binary.LittleEndian.Uint32(b[16:20])
	if count > maxIntent || len(b) < 24+int(count)*16 {
		return 0, nil, false
	}
	body := b[:20+int(count)*16]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(body):]) {
		return 0, nil, false
	}
	for p := body[20:]; len(p) >= 16; p = p[16:] {
		sizes = append(sizes, bucketSize{int64(binary.LittleEndian.Uint64(p)), int64(binary.LittleEndian.Uint64(p[8:]))})
	}
	return binary.LittleEndian.Uint64(b[:8]), sizes, true
}

// recoverApplied chooses where re-applying the log must start writing. The
// applied mark is exact while the page cache that holds the files' last
// writes survives, that is after a process restart. After a reboot (another
// boot id, or one that cannot be read) the files may have lost any write
// since the last Sync, so the synced mark is used: entries after it are
// written again, and a record that did survive is then a duplicate (a
// second delivery), never a loss.
func (x *Index) recoverApplied() (applied uint64, synced []bucketSize) {
	var buf [20]byte
	n, _ := x.mark.ReadAt(buf[:], 0)
	legacy := crc32.Checksum(buf[:8], castagnoli) == binary.LittleEndian.Uint32(buf[8:12])
	switch {
	case n == 20 && crc32.Checksum(buf[:16], castagnoli) == binary.LittleEndian.Uint32(buf[16:]):
		if x.boot != 0 && binary.LittleEndian.Uint64(buf[8:16]) == x.boot {
			return binary.LittleEndian.Uint64(buf[:8]), nil
		}
	case legacy && (n == 12 || n == 20 && binary.LittleEndian.Uint64(buf[12:20]) == 0):
		// An earlier version's mark, which had no boot id, is read as
		// before (trusted) until this version rewrites it (an intent
		// written after it leaves zeros between the two).
		return binary.LittleEndian.Uint64(buf[:8]), nil
	case n == 0 || buf == [20]byte{}:
		// Never written (a new index; an intent may follow), or lost
		// with its page cache. Either way no entry after the synced mark
		// is marked applied: the files are cut back to it.
		applied, synced, _ := readSynced(x.fs, filepath.Join(x.dir, syncedName))
		return applied, synced
	}
	applied, synced, err := readSynced(x.fs, filepath.Join(x.dir, syncedName))
	if err != nil || synced == nil {
		// No sizes (a mark of an earlier version): the files are kept,
		// so a surviving record is indexed twice.
		x.log.Warn("timer index: the machine restarted since the applied mark was written; entries after the synced mark are indexed again",
			zap.Uint64("synced", applied))
		return applied, nil
	}
	return applied, synced
}

// readSynced reads the synced mark: the applied mark at the last Sync and
// the size of every bucket file then (nil for a mark of an earlier
// version, which has none). A mark that is missing or damaged reads as 0:
// the whole log after the snapshot is indexed again.
func readSynced(fsys storage.FS, name string) (uint64, []bucketSize, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, nil, err
	}
	if size > 12+4+maxSynced*16 {
		return 0, nil, ErrCorrupt
	}
	buf := make([]byte, size)
	if n, _ := f.ReadAt(buf, 0); int64(n) != size {
		return 0, nil, ErrCorrupt
	}
	return decodeSynced(buf)
}

// decodeSynced decodes a synced mark: the applied mark (8 bytes LE), then
// (absent in the earlier 12-byte form) a count n (4) and n pairs of a
// bucket and its size (8+8), and a CRC32-C of all that.
func decodeSynced(b []byte) (uint64, []bucketSize, error) {
	if len(b) < 12 || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, ErrCorrupt
	}
	applied := binary.LittleEndian.Uint64(b)
	if len(b) == 12 {
		return applied, nil, nil
	}
	if len(b) < 16 || len(b) != 16+int(binary.LittleEndian.Uint32(b[8:12]))*16 {
		return 0, nil, ErrCorrupt
	}
	sizes := []bucketSize{}
	for p := b[12 : len(b)-4]; len(p) >= 16; p = p[16:] {
		sizes = append(sizes, bucketSize{int64(binary.LittleEndian.Uint64(p)), int64(binary.LittleEndian.Uint64(p[8:]))})
	}
	return applied, sizes, nil
}

// encodeSynced is the synced mark of applied with the buckets' sizes.
func encodeSynced(applied uint64, sizes []bucketSize) []byte {
	buf := binary.LittleEndian.AppendUint64(make([]byte, 0, 16+len(sizes)*16), applied)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(sizes)))
	for _, bs := range sizes {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(bs.bucket))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(bs.size))
	}
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

func (x *Index) recoverFile(b int64) error {
	name := x.path(b)
	f, err := x.fs.OpenFile(name, os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("timerindex: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("timerindex: %w", err)
	}
	if whole := size - size%RecordSize; whole != size {
		x.log.Warn("timer index: cutting a torn record", zap.String("file", name), zap.Int64("size", size))
		if err := f.Truncate(whole); err != nil {
			return fmt.Errorf("timerindex: %w", err)
		}
		size = whole
	}
	if size == 0 {
		f.Close()
		return x.fs.Remove(name)
	}
	buf := make([]byte, readChunk*RecordSize)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n == 0 && err != nil {
			return fmt.Errorf("timerindex: %w", err)
		}
		for i := 0; i+RecordSize <= n; i += RecordSize {
			if r, err := DecodeRecord(buf[i:]); err == nil {
				x.noteMinLocked(b, r.QueueOffset)
			}
		}
	}
	x.setBit(b)
	return nil
}

func (x *Index) noteMinLocked(b, queueOffset int64) {
	if m, ok := x.groupMin[b>>12]; !ok || queueOffset < m {
		x.groupMin[b>>12] = queueOffset
	}
}

// MinQueueOffset is a lower bound of the queue offsets of the records
// held (false: none). Retention keeps the CommitLog from there on, so a
// pending timer's message outlives fileReservedTime.
func (x *Index) MinQueueOffset() (int64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	best, ok := int64(0), false
	for _, m := range x.groupMin {
		if !ok || m < best {
			best, ok = m, true
		}
	}
	return best, ok
}

func (x *Index) path(b int64) string {
	return filepath.Join(x.dir, strconv.FormatInt(b>>12, 10), strconv.FormatInt(b, 10))
}

func (x *Index) setBit(b int64)      { x.present[b>>6] |= 1 << uint64(b&63) }
func (x *Index) hasBit(b int64) bool { return x.present[b>>6]&(1<<uint64(b&63)) != 0 }

func (x *Index) clearBit(b int64) {
	w := x.present[b>>6] &^ (1 << uint64(b&63))
	if w == 0 {
		delete(x.present, b>>6)
	} else {
		x.present[b>>6] = w
	}
}

// fileLocked returns the append handle of bucket b, creating the file.
func (x *Index) fileLocked(b int64) (*openFile, error) {
	if of := x.open[b]; of != nil {
		return of, nil
	}
	if len(x.open) >= maxOpen {
		for k, of := range x.open {
			of.f.Close()
			delete(x.open, k)
		}
	}
	if gid := b >> 12; !x.dirs[gid] {
		if err := x.fs.MkdirAll(filepath.Dir(x.path(b)), 0o755); err != nil {
			return nil, err
		}
		x.dirs[gid] = true
	}
	f, err := x.fs.OpenFile(x.path(b), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	of := &openFile{f: f, size: size - size%RecordSize}
	x.open[b] = of
	return of, nil
}

// Append adds records to bucket b.
func (x *Index) Append(b int64, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	return x.appendLocked(b, recs)
}

func (x *Index) appendLocked(b int64, recs []Record) error {
	of, err := x.fileLocked(b)
	if err != nil {
		return fmt.Errorf("timerindex: append to bucket %d: %w", b, err)
	}
	if x.intentEntry != 0 && !slices.ContainsFunc(x.intent, func(bs bucketSize) bool { return bs.bucket == b }) {
		x.intent = append(x.intent, bucketSize{b, of.size})
		if err := x.writeIntentLocked(); err != nil {
			return err
		}
	}
	buf := make([]byte, 0, len(recs)*RecordSize)
	for _, r := range recs {
		buf = AppendRecord(buf, r)
	}
	if _, err := of.f.WriteAt(buf, of.size); err != nil {
		return fmt.Errorf("timerindex: append to bucket %d: %w", b, err)
	}
	of.size += int64(len(buf))
	x.dirty[b] = struct{}{}
	x.setBit(b)
	for _, r := range recs {
		x.noteMinLocked(b, r.QueueOffset)
	}
	return nil
}

// Read returns up to max records of bucket b from the from-th on, and the
// number of records the bucket holds. A record that fails its checksum is
// returned with QueueOffset -1 (the caller skips it and says so). A bucket
// without a file holds nothing.
func (x *Index) Read(b, from int64, max int) ([]Record, int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, 0, ErrClosed
	}
	return x.readLocked(b, from, max)
}

func (x *Index) readLocked(b, from int64, max int) ([]Record, int64, error) {
	if !x.hasBit(b) {
		return nil, 0, nil
	}
	of, err := x.fileLocked(b)
	if err != nil {
		return nil, 0, fmt.Errorf("timerindex: read bucket %d: %w", b, err)
	}
	total := of.size / RecordSize
	if from < 0 {
		from = 0
	}
	n := min(int64(max), total-from)
	if n <= 0 {
		return nil, total, nil
	}
	buf := make([]byte, n*RecordSize)
	if _, err := of.f.ReadAt(buf, from*RecordSize); err != nil {
		return nil, total, fmt.Errorf("timerindex: read bucket %d: %w", b, err)
	}
	recs := make([]Record, n)
	for i := range recs {
		r, err := DecodeRecord(buf[i*RecordSize:])
		if err != nil {
			x.log.Error("timer index: corrupt record skipped", zap.Int64("bucket", b), zap.Int64("record", from+int64(i)))
			r = Record{QueueOffset: -1}
		}
		recs[i] = r
	}
	return recs, total, nil
}

// Next returns the first bucket in [from, to] whose file holds records.
func (x *Index) Next(from, to int64) (int64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.nextLocked(from, to)
}

func (x *Index) nextLocked(from, to int64) (int64, bool) {
	best, found := int64(0), false
	for w, word := range x.present {
		if w < from>>6 || w > to>>6 {
			continue
		}
		if w == from>>6 {
			word &^= (1 << uint64(from&63)) - 1
		}
		if word == 0 {
			continue
		}
		b := w<<6 | int64(bits.TrailingZeros64(word))
		if b <= to && (!found || b < best) {
			best, found = b, true
		}
	}
	return best, found
}

// Buckets returns the number of buckets that hold records.
func (x *Index) Buckets() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, w := range x.present {
		n += bits.OnesCount64(w)
	}
	return n
}

// Advance is the file side of a timer cursor moving from bucket from (of
// which the first done records were delivered) to bucket to: the records
// of from after done, and every record of a bucket between the two, were
// written after the leader looked (late arrivals), so they move to to;
// then those buckets' files are removed.
func (x *Index) Advance(from, done, to int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if to <= from {
		return nil
	}
	var srcs []int64
	for w, word := range x.present {
		for word != 0 {
			b := w<<6 | int64(bits.TrailingZeros64(word))
			word &= word - 1
			if b >= from && b < to {
				srcs = append(srcs, b)
			}
		}
	}
	slices.Sort(srcs)
	moved := false
	for _, b := range srcs {
		skip := int64(0)
		if b == from {
			skip = done
		}
		for {
			recs, total, err := x.readLocked(b, skip, readChunk)
			if err != nil {
				return err
			}
			// Nothing to move creates no file for to: the cursor may
			// advance to a bucket without records.
			if len(recs) > 0 {
				if err := x.appendLocked(to, recs); err != nil {
					return err
				}
			}
			moved = moved || len(recs) > 0
			skip += int64(len(recs))
			if skip >= total {
				break
			}
		}
	}
	// A removal may reach the disk before unsynced appends do: the moved
	// records are made durable first, so a power loss can lose the
	// removal (the records are moved again, duplicates) but not the
	// records.
	if moved {
		if err := x.syncBucketLocked(to); err != nil {
			return fmt.Errorf("timerindex: advance to bucket %d: %w", to, err)
		}
	}
	for _, b := range srcs {
		if err := x.removeLocked(b, x.intentEntry != 0); err != nil {
			return err
		}
	}
	return nil
}

// syncBucketLocked makes bucket b's file and its directory entries durable.
func (x *Index) syncBucketLocked(b int64) error {
	of, err := x.fileLocked(b)
	if err != nil {
		return err
	}
	if err := of.f.Sync(); err != nil {
		return err
	}
	if err := x.fs.SyncDir(filepath.Dir(x.path(b))); err != nil {
		return err
	}
	return x.fs.SyncDir(x.dir)
}

// DropBelow removes every bucket before b (they were passed by the cursor
// of a snapshot this replica restored).
func (x *Index) DropBelow(b int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	var drop []int64
	for w, word := range x.present {
		for word != 0 {
			c := w<<6 | int64(bits.TrailingZeros64(word))
			word &= word - 1
			if c < b {
				drop = append(drop, c)
			}
		}
	}
	for _, c := range drop {
		if err := x.removeLocked(c, false); err != nil {
			return err
		}
	}
	return nil
}

// removeLocked removes bucket b's file, or with aside renames it until
// the entry being applied is marked (SetApplied removes it then).
func (x *Index) removeLocked(b int64, aside bool) error {
	if of := x.open[b]; of != nil {
		of.f.Close()
		delete(x.open, b)
	}
	delete(x.dirty, b)
	x.removed[b>>12] = struct{}{}
	x.clearBit(b)
	if gid := b >> 12; !x.groupHasBitsLocked(gid) {
		delete(x.groupMin, gid)
	}
	if aside {
		if err := x.fs.Rename(x.path(b), x.path(b)+asideSuffix); err != nil {
			return fmt.Errorf("timerindex: set bucket %d aside: %w", b, err)
		}
		x.aside = append(x.aside, b)
		x.intent = append(x.intent, bucketSize{b, -1})
		return x.writeIntentLocked()
	}
	if err := x.fs.Remove(x.path(b)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("timerindex: remove bucket %d: %w", b, err)
	}
	return nil
}

func (x *Index) groupHasBitsLocked(gid int64) bool {
	for w := gid << 6; w < (gid+1)<<6; w++ {
		if x.present[w] != 0 {
			return true
		}
	}
	return false
}

// Applied is the Raft index of the last entry whose effects are in the
// files (0: unknown). Entries at or below it are not applied to the files
// again when Raft re-applies the log after a restart.
func (x *Index) Applied() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.applied
}

// Begin starts applying entry i, whose Appends and Advance end with
// SetApplied(i). Before the first write to a bucket, the bucket's size is
// recorded in a write-ahead intent next to the applied mark (page cache
// only), and an advance sets its sources aside instead of removing them:
// if the process dies before SetApplied, Open puts the files back as they
// were before i, so Raft's re-apply of i writes the same bytes at the same
// positions as on every other replica. buckets, when known, are recorded
// in one write.
func (x *Index) Begin(i uint64, buckets ...int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	x.intentEntry, x.intent, x.aside = i, x.intent[:0], x.aside[:0]
	if len(buckets) == 0 {
		return nil
	}
	for _, b := range buckets {
		of, err := x.fileLocked(b)
		if err != nil {
			return fmt.Errorf("timerindex: bucket %d: %w", b, err)
		}
		if !slices.ContainsFunc(x.intent, func(bs bucketSize) bool { return bs.bucket == b }) {
			x.intent = append(x.intent, bucketSize{b, of.size})
		}
	}
	return x.writeIntentLocked()
}

func (x *Index) writeIntentLocked() error {
	if _, err := x.mark.WriteAt(encodeIntent(x.intentEntry, x.boot, x.intent), intentOff); err != nil {
		return fmt.Errorf("timerindex: intent of entry %d: %w", x.intentEntry, err)
	}
	return nil
}

// SetApplied records that the effects of entry i are in the files. The
// bucket files its advance set aside are removed by the next Sync, once
// the synced mark no longer needs them.
func (x *Index) SetApplied(i uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	var buf [20]byte
	binary.LittleEndian.PutUint64(buf[:8], i)
	binary.LittleEndian.PutUint64(buf[8:16], x.boot)
	binary.LittleEndian.PutUint32(buf[16:], crc32.Checksum(buf[:16], castagnoli))
	if _, err := x.mark.WriteAt(buf[:], 0); err != nil {
		return fmt.Errorf("timerindex: applied mark: %w", err)
	}
	x.applied = i
	for _, b := range x.aside {
		x.gone[b] = struct{}{}
	}
	x.intentEntry, x.intent, x.aside = 0, x.intent[:0], x.aside[:0]
	return nil
}

// Sync makes every write so far durable: the bucket files written since
// the last Sync, their directories and the applied mark; then it records
// the applied mark as the synced mark with every bucket's size at that
// mark (an entry being applied counts as not yet applied), where the files
// are cut back to and indexing restarts after a reboot; then it removes
// the bucket files set aside by applied entries.
func (x *Index) Sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	var errs []error
	dirs := map[int64]bool{}
	for b := range x.dirty {
		of, err := x.fileLocked(b)
		if err == nil {
			err = of.f.Sync()
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dirs[b>>12] = true
		delete(x.dirty, b)
	}
	for _, b := range x.aside {
		// Set aside by the entry being applied: the mark lists them.
		f, err := x.fs.OpenFile(x.path(b)+asideSuffix, os.O_RDONLY, 0)
		if err == nil {
			err = f.Sync()
			f.Close()
		}
		errs = append(errs, err)
	}
	for gid := range x.removed {
		dirs[gid] = true
		delete(x.removed, gid)
	}
	for gid := range dirs {
		errs = append(errs, x.fs.SyncDir(filepath.Join(x.dir, strconv.FormatInt(gid, 10))))
	}
	errs = append(errs, x.fs.SyncDir(x.dir), x.mark.Sync())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	sizes, err := x.sizesAtAppliedLocked()
	if err != nil {
		return fmt.Errorf("timerindex: synced mark: %w", err)
	}
	if err := storage.WriteFileAtomic(x.fs, filepath.Join(x.dir, syncedName), encodeSynced(x.applied, sizes)); err != nil {
		return fmt.Errorf("timerindex: synced mark: %w", err)
	}
	for b := range x.gone {
		if err := x.fs.Remove(x.path(b) + asideSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("timerindex: remove bucket %d: %w", b, err)
		}
		x.removed[b>>12] = struct{}{}
		delete(x.gone, b)
	}
	return nil
}

// sizesAtAppliedLocked lists every bucket file's size as of the applied
// mark: the current sizes, except for the buckets of an entry being
// applied (their sizes before it, and its advance's sources set aside).
func (x *Index) sizesAtAppliedLocked() ([]bucketSize, error) {
	before := map[int64]int64{}
	for _, bs := range x.intent {
		before[bs.bucket] = bs.size
	}
	var out []bucketSize
	for w, word := range x.present {
		for word != 0 {
			b := w<<6 | int64(bits.TrailingZeros64(word))
			word &= word - 1
			if n, ok := before[b]; ok && n >= 0 {
				if n > 0 {
					out = append(out, bucketSize{b, n})
				}
				continue
			}
			if of := x.open[b]; of != nil {
				out = append(out, bucketSize{b, of.size})
				continue
			}
			fi, err := x.fs.Stat(x.path(b))
			if err != nil {
				return nil, err
			}
			out = append(out, bucketSize{b, fi.Size() - fi.Size()%RecordSize})
		}
	}
	for _, b := range x.aside {
		fi, err := x.fs.Stat(x.path(b) + asideSuffix)
		if err != nil {
			return nil, err
		}
		out = append(out, bucketSize{b, fi.Size() - fi.Size()%RecordSize})
	}
	slices.SortFunc(out, func(a, b bucketSize) int { return cmp.Compare(a.bucket, b.bucket) })
	return out, nil
}

// Close closes the open files. Writes are not synced (Sync is).
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	var errs []error
	for b, of := range x.open {
		errs = append(errs, of.f.Close())
		delete(x.open, b)
	}
	return errors.Join(append(errs, x.mark.Close())...)
}
