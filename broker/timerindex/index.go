package timerindex

import (
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
	"sync"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// appliedName is the file of the applied mark, written without sync after
// each entry: the Raft index (8 bytes LE), a hash of the boot id of the
// machine that wrote it (8 bytes LE) and a CRC32-C of both. A mark of an
// earlier version (index and CRC only) is read as written in this boot.
const appliedName = "APPLIED"

// syncedName is the file of the synced mark, replaced atomically by Sync
// once every file and directory is durable: the applied mark at that point
// (8 bytes LE) and a CRC32-C of it.
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
	closed   bool
}

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
		dirty: map[int64]struct{}{}, removed: map[int64]struct{}{}, dirs: map[int64]bool{}, groupMin: map[int64]int64{}}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("timerindex: %w", err)
	}
	groups, err := fsys.ReadDir(dir)
	if err != nil {
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
			return nil, fmt.Errorf("timerindex: %w", err)
		}
		for _, e := range files {
			b, err := strconv.ParseInt(e.Name(), 10, 64)
			if err != nil || e.IsDir() || b>>12 != gid {
				continue
			}
			if err := x.recoverFile(b); err != nil {
				return nil, err
			}
		}
	}
	if x.mark, err = fsys.OpenFile(filepath.Join(dir, appliedName), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, fmt.Errorf("timerindex: %w", err)
	}
	x.boot = bootHash(bootID())
	x.applied = x.recoverApplied()
	return x, nil
}

// recoverApplied chooses where re-applying the log must start writing. The
// applied mark is exact while the page cache that holds the files' last
// writes survives, that is after a process restart. After a reboot (another
// boot id, or one that cannot be read) the files may have lost any write
// since the last Sync, so the synced mark is used: entries after it are
// written again, and a record that did survive is then a duplicate (a
// second delivery), never a loss.
func (x *Index) recoverApplied() uint64 {
	var buf [20]byte
	n, _ := x.mark.ReadAt(buf[:], 0)
	switch {
	case n == 20 && crc32.Checksum(buf[:16], castagnoli) == binary.LittleEndian.Uint32(buf[16:]):
		if x.boot != 0 && binary.LittleEndian.Uint64(buf[8:16]) == x.boot {
			return binary.LittleEndian.Uint64(buf[:8])
		}
	case n == 12 && crc32.Checksum(buf[:8], castagnoli) == binary.LittleEndian.Uint32(buf[8:12]):
		// An earlier version's mark, which had no boot id, is read as
		// before (trusted) until this version rewrites it.
		return binary.LittleEndian.Uint64(buf[:8])
	case n == 0:
		// Never written (a new index), or lost with its page cache.
		synced, _ := readSynced(x.fs, filepath.Join(x.dir, syncedName))
		return synced
	}
	synced, _ := readSynced(x.fs, filepath.Join(x.dir, syncedName))
	x.log.Warn("timer index: the machine restarted since the applied mark was written; entries after the synced mark are indexed again",
		zap.Uint64("synced", synced))
	return synced
}

// readSynced reads the synced mark (0 when missing or damaged: the whole
// log after the snapshot is indexed again).
func readSynced(fsys storage.FS, name string) (uint64, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf [12]byte
	if n, _ := f.ReadAt(buf[:], 0); n != len(buf) ||
		crc32.Checksum(buf[:8], castagnoli) != binary.LittleEndian.Uint32(buf[8:]) {
		return 0, ErrCorrupt
	}
	return binary.LittleEndian.Uint64(buf[:8]), nil
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
			if err := x.appendLocked(to, recs); err != nil {
				return err
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
		if err := x.removeLocked(b); err != nil {
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
		if err := x.removeLocked(c); err != nil {
			return err
		}
	}
	return nil
}

func (x *Index) removeLocked(b int64) error {
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

// SetApplied records that the effects of entry i are in the files.
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
	return nil
}

// Sync makes every write so far durable: the bucket files written since
// the last Sync, their directories and the applied mark; then it records
// the applied mark as the synced mark, where indexing restarts after a
// reboot.
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
	var buf [12]byte
	binary.LittleEndian.PutUint64(buf[:8], x.applied)
	binary.LittleEndian.PutUint32(buf[8:], crc32.Checksum(buf[:8], castagnoli))
	if err := storage.WriteFileAtomic(x.fs, filepath.Join(x.dir, syncedName), buf[:]); err != nil {
		return fmt.Errorf("timerindex: synced mark: %w", err)
	}
	return nil
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
