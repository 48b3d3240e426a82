package storage

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// fileNameDigits is the width of a segment name: its start offset, zero-padded
// (RocketMQ's UtilAll.offset2FileName).
const fileNameDigits = 20

// FileName returns the name of the file starting at offset: 20 zero-padded digits.
func FileName(offset int64) string {
	return fmt.Sprintf("%0*d", fileNameDigits, offset)
}

// parseFileName returns the start offset encoded in a segment name.
func parseFileName(name string) (int64, bool) {
	if len(name) != fileNameDigits {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil
}

// MappedFileQueue is an ordered list of same-sized mapped files in one
// directory, each named by its start offset, that together form one logical
// byte space (RocketMQ's MappedFileQueue). The CommitLog and every
// ConsumeQueue are one.
type MappedFileQueue struct {
	fsys     FS
	dir      string
	fileSize int

	// mu guards files. Files are only appended at the end (LastOrCreate) and
	// removed from either end (retention at the front, TruncateDirty at the back).
	mu    sync.RWMutex
	files []*MappedFile
	// buffered is applied to every file (see MappedFile.SetBuffered);
	// guarded by mu.
	buffered bool
}

// SetBuffered makes appends to all files, present and future, go through a
// pending buffer written by Flush/Commit (see MappedFile.SetBuffered).
func (q *MappedFileQueue) SetBuffered(on bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.buffered = on
	for _, mf := range q.files {
		mf.SetBuffered(on)
	}
}

// OpenMappedFileQueue creates dir if needed and opens every segment in it,
// sorted by offset. Files must all have fileSize bytes and be contiguous; a
// gap or a wrong size is ErrCorruptFile (the operator has to look: data is
// missing). Temporary files of a prepend that a crash interrupted before
// its rename are removed; other names in the directory are ignored.
func OpenMappedFileQueue(fsys FS, dir string, fileSize int) (*MappedFileQueue, error) {
	return openMappedFileQueue(fsys, dir, fileSize, nil)
}

// OpenMappedFileQueueWithGaps is OpenMappedFileQueue for a queue of data
// derived from another (a ConsumeQueue, derived from the CommitLog): a gap
// between segments is reported to gap, with the byte range [from, to) no
// file holds, instead of refusing the queue, and the files on both sides
// are opened (RocketMQ loads such a queue too). FindByOffset answers nil
// for an offset in the gap.
func OpenMappedFileQueueWithGaps(fsys FS, dir string, fileSize int, gap func(from, to int64)) (*MappedFileQueue, error) {
	if gap == nil {
		gap = func(int64, int64) {}
	}
	return openMappedFileQueue(fsys, dir, fileSize, gap)
}

func openMappedFileQueue(fsys FS, dir string, fileSize int, gap func(from, to int64)) (*MappedFileQueue, error) {
	if fileSize <= 0 {
		return nil, fmt.Errorf("%w: mapped file size %d for %s", ErrInvalidSize, fileSize, dir)
	}
	if err := MkdirAllDurable(fsys, dir); err != nil {
		return nil, err
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var offsets []int64
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if isSegmentTemp(e.Name()) {
			if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove the temporary file %s: %w", filepath.Join(dir, e.Name()), err)
			}
			continue
		}
		off, ok := parseFileName(e.Name())
		if !ok {
			continue
		}
		if off%int64(fileSize) != 0 {
			return nil, fmt.Errorf("%w: %s: offset %d is not a multiple of the file size %d", ErrCorruptFile, filepath.Join(dir, e.Name()), off, fileSize)
		}
		offsets = append(offsets, off)
	}
	slices.Sort(offsets)
	q := &MappedFileQueue{fsys: fsys, dir: dir, fileSize: fileSize}
	for i, off := range offsets {
		if i > 0 && off != offsets[i-1]+int64(fileSize) {
			if gap == nil {
				q.Close()
				return nil, fmt.Errorf("%w: %s: gap between segments %s and %s", ErrCorruptFile, dir, FileName(offsets[i-1]), FileName(off))
			}
			gap(offsets[i-1]+int64(fileSize), off)
		}
		mf, err := OpenMappedFile(fsys, filepath.Join(dir, FileName(off)), off, fileSize)
		if err != nil {
			q.Close()
			return nil, err
		}
		q.files = append(q.files, mf)
	}
	return q, nil
}

// Dir returns the queue's directory.
func (q *MappedFileQueue) Dir() string { return q.dir }

// FileSize returns the size of every file of the queue.
func (q *MappedFileQueue) FileSize() int { return q.fileSize }

// Files returns a snapshot of the files, oldest first.
func (q *MappedFileQueue) Files() []*MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return slices.Clone(q.files)
}

// First returns the oldest file, or nil.
func (q *MappedFileQueue) First() *MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return nil
	}
	return q.files[0]
}

// Last returns the newest file, or nil.
func (q *MappedFileQueue) Last() *MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return nil
	}
	return q.files[len(q.files)-1]
}

// LastOrCreate returns the newest file if it has room, else creates the next
// one. With no files, the first is created at startOffset rounded down to a
// file boundary.
func (q *MappedFileQueue) LastOrCreate(startOffset int64) (*MappedFile, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var next int64
	if n := len(q.files); n > 0 {
		last := q.files[n-1]
		if !last.IsFull() {
			return last, nil
		}
		next = last.FileFromOffset() + int64(q.fileSize)
	} else {
		next = startOffset - startOffset%int64(q.fileSize)
	}
	mf, err := OpenMappedFile(q.fsys, filepath.Join(q.dir, FileName(next)), next, q.fileSize)
	if err != nil {
		return nil, err
	}
	if q.buffered {
		mf.SetBuffered(true)
	}
	q.files = append(q.files, mf)
	return mf, nil
}

// FindByOffset returns the file holding offset, or nil if no file does (it
// was deleted, or is not written yet).
func (q *MappedFileQueue) FindByOffset(offset int64) *MappedFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return nil
	}
	first := q.files[0].FileFromOffset()
	if offset < first {
		return nil
	}
	if i := int((offset - first) / int64(q.fileSize)); i < len(q.files) && q.files[i].FileFromOffset() == offset-offset%int64(q.fileSize) {
		return q.files[i]
	}
	// Not contiguous (OpenMappedFileQueueWithGaps): the first file ending
	// past offset holds it unless offset lies in a gap.
	i, _ := slices.BinarySearchFunc(q.files, offset, func(mf *MappedFile, off int64) int {
		return cmp.Compare(mf.FileFromOffset()+int64(q.fileSize), off+1)
	})
	if i < len(q.files) && q.files[i].FileFromOffset() <= offset {
		return q.files[i]
	}
	return nil
}

// MinOffset returns the first file's start offset, or 0 when empty.
func (q *MappedFileQueue) MinOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return 0
	}
	return q.files[0].FileFromOffset()
}

// MaxOffset returns the end of the readable data: the last file's start
// offset plus its WrotePosition, or 0 when empty. (In buffered mode appends
// past it wait for the next Flush.)
func (q *MappedFileQueue) MaxOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.files) == 0 {
		return 0
	}
	last := q.files[len(q.files)-1]
	return last.FileFromOffset() + int64(last.WrotePosition())
}

// Flush flushes every file with unflushed data, oldest first, stopping at the
// first error.
func (q *MappedFileQueue) Flush() error {
	for _, mf := range q.Files() {
		if mf.FlushedPosition() >= mf.WrotePosition() && !mf.hasPending() && !mf.hasRandomDirty() {
			continue
		}
		if _, err := mf.Flush(); err != nil {
			if errors.Is(err, ErrFileClosed) {
				continue // deleted by retention meanwhile
			}
			return err
		}
	}
	return nil
}

func (m *MappedFile) hasRandomDirty() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dirtyHi > m.dirtyLo
}

// TruncateDirty drops everything past offset, for recovery: the file holding
// offset gets WrotePosition offset-start and its tail zeroed (durably), later
// files are destroyed. An offset at or before the first file's start leaves
// the first file empty.
func (q *MappedFileQueue) TruncateDirty(offset int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	keep := len(q.files)
	for i, mf := range q.files {
		end := mf.FileFromOffset() + int64(q.fileSize)
		if end <= offset {
			continue
		}
		if mf.FileFromOffset() <= offset || i == 0 {
			pos := max(0, int(offset-mf.FileFromOffset()))
			if err := mf.TruncateTail(pos); err != nil {
				return err
			}
			if _, err := mf.Flush(); err != nil {
				return err
			}
			continue
		}
		keep = min(keep, i)
	}
	for i := len(q.files) - 1; i >= keep; i-- {
		if err := q.files[i].Destroy(); err != nil {
			return err
		}
		q.files = q.files[:i]
	}
	return nil
}

// DeleteExpired destroys files from the front whose modification time is
// before olderThan, never touching the newest keepLast files, at most
// maxDelete per call (0 = no limit) so a big cleanup does not stall the disk.
// It stops at the first file that is not expired. It returns how many were
// deleted.
func (q *MappedFileQueue) DeleteExpired(olderThan time.Time, keepLast int, maxDelete int) (int, error) {
	keepLast = max(keepLast, 0)
	var victims []*MappedFile
	q.mu.RLock()
	for i := 0; i < len(q.files)-keepLast; i++ {
		if maxDelete > 0 && len(victims) >= maxDelete {
			break
		}
		if !q.files[i].ModTime().Before(olderThan) {
			break
		}
		victims = append(victims, q.files[i])
	}
	q.mu.RUnlock()
	return q.deleteFront(victims)
}

// DeleteBefore destroys files that lie wholly before offset (their end is at
// or before it), never the newest file, so MaxOffset survives. It returns how
// many were deleted.
func (q *MappedFileQueue) DeleteBefore(offset int64) (int, error) {
	var victims []*MappedFile
	q.mu.RLock()
	for i := 0; i < len(q.files)-1; i++ {
		if q.files[i].FileFromOffset()+int64(q.fileSize) > offset {
			break
		}
		victims = append(victims, q.files[i])
	}
	q.mu.RUnlock()
	return q.deleteFront(victims)
}

// deleteFront destroys victims (a prefix of files as seen earlier) in
// order, oldest first; readers holding views keep their mappings. Each
// file's name is removed while it is still the queue's first and listed,
// and it leaves the list only once that worked: so the files on disk stay
// contiguous whatever fails. A failed unlink stops the deletion with the
// file still first (the next pass retries it); removing the later ones
// meanwhile would leave a gap, and the queue would refuse to open. A
// failed directory sync does not stop it: names go in order, and the
// directory's next sync makes all their removals durable. It returns how
// many files left the list.
func (q *MappedFileQueue) deleteFront(victims []*MappedFile) (int, error) {
	n := 0
	var first error
	for _, mf := range victims {
		q.mu.Lock()
		if len(q.files) == 0 || q.files[0] != mf {
			q.mu.Unlock()
			break
		}
		if err := q.fsys.Remove(mf.Path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			q.mu.Unlock()
			return n, fmt.Errorf("remove %s: %w", mf.Path(), err)
		}
		q.files = slices.Delete(q.files, 0, 1)
		q.mu.Unlock()
		n++
		// Unmaps once the last view is released, and syncs the directory.
		if err := mf.Destroy(); err != nil && first == nil {
			first = err
		}
	}
	return n, first
}

// Close closes every file without flushing (call Flush first for a clean
// shutdown). Views keep their mappings until released.
func (q *MappedFileQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var first error
	for _, mf := range q.files {
		if err := mf.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Destroy destroys every file (drop a whole ConsumeQueue of a deleted
// topic, reset a Raft log), and the temporary file of a prepend whose own
// removal failed, so the directory can be removed. Files go oldest first,
// each leaving the list only once its name is removed, as in deleteFront:
// a failed unlink stops it with that file and the later ones still listed
// and on disk, so what is left stays contiguous (a strict queue opened
// over it would refuse a gap) and calling Destroy again finishes the job.
func (q *MappedFileQueue) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var first error
	for len(q.files) > 0 {
		mf := q.files[0]
		if err := q.fsys.Remove(mf.Path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", mf.Path(), err)
		}
		q.files = slices.Delete(q.files, 0, 1)
		// Unmaps once the last view is released, and syncs the directory
		// (a failure there does not stop it: names go in order, and the
		// directory's next sync makes all their removals durable).
		if err := mf.Destroy(); err != nil && first == nil {
			first = err
		}
	}
	if err := removeSegmentTempFiles(q.fsys, q.dir); err != nil && first == nil {
		first = err
	}
	return first
}

// isSegmentTemp reports whether name is a temporary file PrependToFilled
// writes a segment under (WriteFileAtomic of a segment name).
func isSegmentTemp(name string) bool {
	target, ok := tempTarget(name)
	return ok && isSegmentName(target)
}

func isSegmentName(name string) bool {
	_, ok := parseFileName(name)
	return ok
}

// removeSegmentTempFiles removes the segments' temporary files from dir.
// The caller holds q.mu, so no prepend is under way.
func removeSegmentTempFiles(fsys FS, dir string) error {
	return removeTempFiles(fsys, dir, isSegmentName)
}
