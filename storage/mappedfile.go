package storage

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MappedFile is one preallocated, memory-mapped file of fixed size: a
// CommitLog segment, a ConsumeQueue file or an index file (RocketMQ's
// MappedFile).
//
// Writes go into the mapping at WrotePosition (Append, single writer) or
// anywhere (WriteAt); Flush makes them durable. Readers take refcounted views
// (Read) that are never past WrotePosition. The mapping lives until Close or
// Destroy *and* the last view is released, so a reader can never touch an
// unmapped page.
type MappedFile struct {
	fsys FS
	path string
	from int64
	size int
	// file and data are set once in OpenMappedFile and never reassigned; data
	// is only touched while the file is mapped (see unmapped).
	file File
	data []byte

	// wrote is the end of valid data; stored after the bytes are copied, so a
	// reader that loads it sees them. flushed is the durable prefix.
	wrote   atomic.Int64
	flushed atomic.Int64
	// reserved is where the next append goes: wrote plus pending bytes in
	// buffered mode, equal to wrote otherwise. Written under mu.
	reserved atomic.Int64

	// refs counts the owner (1 until Close/Destroy) plus live views.
	refs      atomic.Int64
	closed    atomic.Bool
	destroyed atomic.Bool

	// mu guards writes into data, the random-write dirty range and unmapped.
	// Append takes it briefly; Flush holds it across msync only when random
	// writes are pending (index files), so append-only files never block on a
	// flush.
	mu       sync.Mutex
	dirtyLo  int // random writes (WriteAt) not yet flushed: [dirtyLo, dirtyHi)
	dirtyHi  int
	unmapped bool
	// cleanupErr records the munmap/close error of the final release.
	cleanupErr error
	// buffered makes appends go to an in-memory pending buffer that Flush
	// writes with ONE pwrite before syncing (reads still use the mapping:
	// same page cache). With frequent syncs (SYNC_FLUSH group commit) this
	// replaces a page fault + page_mkwrite per re-dirtied page, or a pwrite
	// per message, by one system call per group.
	buffered bool
	// pending holds appended bytes for [pendingStart, reserved) not yet
	// written to the file; spare is the recycled other buffer. Guarded by mu.
	pending      []byte
	spare        []byte
	pendingStart int

	// flushMu serializes Flush and Commit, so flushed only moves forward
	// and commits land in order, and keeps truncations (SetWrotePosition,
	// TruncateTail) out of a commit's pwrite, which runs without mu: a
	// cut made meanwhile would have the old bytes written back past it
	// and WrotePosition moved back over them. Taken before mu.
	flushMu sync.Mutex
}

// OpenMappedFile opens the file at path, creating and preallocating it with
// real blocks (fallocate mode 0) if it is new or short, and maps size bytes.
// fileFromOffset is the logical offset of byte 0 (the name of a segment).
//
// A new file starts with WrotePosition 0. An existing file opens with
// WrotePosition = Size (everything readable) and FlushedPosition 0; recovery
// lowers WrotePosition with SetWrotePosition or TruncateTail. If the disk has
// no room, the error wraps ErrDiskFull and no mapping is made: mapping a
// sparse file on a full disk would turn the first write into a SIGBUS.
func OpenMappedFile(fsys FS, path string, fileFromOffset int64, size int) (*MappedFile, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: mapped file %s: size %d", ErrInvalidSize, path, size)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	cur, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	if cur > int64(size) {
		f.Close()
		return nil, fmt.Errorf("%w: %s has %d bytes, expected %d (mapped file size changed?)", ErrCorruptFile, path, cur, size)
	}
	created := cur == 0
	// A file this call created goes again on failure: left behind, it would
	// be opened next time as an existing file, whole and readable, where
	// the caller expects a new empty one.
	fail := func(err error) (*MappedFile, error) {
		f.Close()
		if created {
			fsys.Remove(path)
		}
		return nil, err
	}
	if cur < int64(size) {
		if err := f.Fallocate(int64(size)); err != nil {
			if IsNoSpace(err) {
				err = diskFullError("fallocate", path, err)
			}
			return fail(err)
		}
		// Make the new size and the name durable before anything is written
		// at offsets only reachable through them.
		if err := f.Sync(); err != nil {
			return fail(err)
		}
		if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
			return fail(err)
		}
	}
	data, err := f.Mmap(size)
	if err != nil {
		return fail(err)
	}
	m := &MappedFile{fsys: fsys, path: path, from: fileFromOffset, size: size, file: f, data: data}
	m.refs.Store(1)
	if !created {
		m.wrote.Store(int64(size))
		m.reserved.Store(int64(size))
		m.pendingStart = size
	}
	return m, nil
}

// Path returns the file's path.
func (m *MappedFile) Path() string { return m.path }

// FileFromOffset returns the logical offset of the file's first byte.
func (m *MappedFile) FileFromOffset() int64 { return m.from }

// Size returns the mapped size in bytes.
func (m *MappedFile) Size() int { return m.size }

// WrotePosition returns the end of the valid data, relative to the file.
func (m *MappedFile) WrotePosition() int { return int(m.wrote.Load()) }

// FlushedPosition returns how much of the file is known durable.
func (m *MappedFile) FlushedPosition() int { return int(m.flushed.Load()) }

// AppendPosition returns where the next append goes: WrotePosition plus
// appended bytes still pending in buffered mode.
func (m *MappedFile) AppendPosition() int { return int(m.reserved.Load()) }

// Remaining returns the free bytes after AppendPosition.
func (m *MappedFile) Remaining() int { return m.size - m.AppendPosition() }

// IsFull reports whether no byte is left after AppendPosition.
func (m *MappedFile) IsFull() bool { return m.AppendPosition() >= m.size }

// setPositionsLocked moves wrote and reserved to pos, dropping pending bytes.
func (m *MappedFile) setPositionsLocked(pos int) {
	m.wrote.Store(int64(pos))
	m.reserved.Store(int64(pos))
	m.pending = m.pending[:0]
	m.pendingStart = pos
	if m.flushed.Load() > int64(pos) {
		m.flushed.Store(int64(pos))
	}
}

// SetWrotePosition sets the end of the valid data, for recovery. The flushed
// position is lowered with it if needed. It does not clear bytes past pos; use
// TruncateTail for that.
func (m *MappedFile) SetWrotePosition(pos int) {
	pos = max(0, min(pos, m.size))
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setPositionsLocked(pos)
}

// TruncateTail sets WrotePosition to pos and zeroes every non-zero byte from
// pos to the end of the file (the zeros are durable after the next Flush).
// Recovery uses it so that stale but well-formed entries past a torn point
// can never be mistaken for new data after a later crash.
func (m *MappedFile) TruncateTail(pos int) error {
	if !m.Retain() {
		return fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	defer m.Release()
	pos = max(0, min(pos, m.size))
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setPositionsLocked(pos)
	hi := m.zeroFromLocked(pos)
	if hi > 0 {
		m.markDirtyLocked(pos, hi)
	}
	return nil
}

// zeroFromLocked clears every non-zero byte from pos to the end of the
// file, visiting only ranges the file system says may hold data (so a
// mostly preallocated segment costs no reads of its zeros), and returns the
// end of the last range it changed (0 if none).
func (m *MappedFile) zeroFromLocked(pos int) int {
	var zero [4096]byte
	hi := 0
	for off := int64(pos); off < int64(m.size); {
		start, end, err := m.file.NextData(off)
		if err != nil {
			if err != io.EOF {
				start, end = off, int64(m.size) // unknown: check everything
			} else {
				break
			}
		}
		start, end = max(start, off), min(end, int64(m.size))
		for p := int(start); p < int(end); {
			e := min(p+len(zero)-(p%len(zero)), int(end)) // page-aligned chunks
			if !bytes.Equal(m.data[p:e], zero[:e-p]) {
				clear(m.data[p:e])
				hi = e
			}
			p = e
		}
		off = end
	}
	return hi
}

// RewriteZeros writes zeros over [pos, end) of the file with pwrite and
// syncs it. Unlike TruncateTail it writes every byte, so it dirties pages
// even where the page cache already shows zeros: after a failed writeback
// the kernel marks the pages clean, and zeros that only reached the cache
// are then never written back by a sync. The range must lie at or past
// WrotePosition.
func (m *MappedFile) RewriteZeros(pos, end int) error {
	if !m.Retain() {
		return fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	defer m.Release()
	end = min(end, m.size)
	if pos >= end {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := int(m.reserved.Load()); pos < w {
		return fmt.Errorf("%w: rewrite zeros from %d of %s, written up to %d", ErrOutOfRange, pos, m.path, w)
	}
	var zero [64 << 10]byte
	for p := pos; p < end; {
		n := min(end-p, len(zero))
		if _, err := m.file.WriteAt(zero[:n], int64(p)); err != nil {
			return err
		}
		p += n
	}
	return m.file.Sync()
}

func (m *MappedFile) markDirtyLocked(lo, hi int) {
	if m.dirtyHi <= m.dirtyLo {
		m.dirtyLo, m.dirtyHi = lo, hi
		return
	}
	m.dirtyLo = min(m.dirtyLo, lo)
	m.dirtyHi = max(m.dirtyHi, hi)
}

// Append copies p at WrotePosition and advances it, returning the position
// written at. It fails with ErrFileFull (nothing written) if p does not fit.
// Appends must come from one writer at a time.
func (m *MappedFile) Append(p []byte) (pos int, err error) {
	return m.AppendBytes(p)
}

// hasPending reports whether appended bytes wait for Commit/Flush.
func (m *MappedFile) hasPending() bool { return m.reserved.Load() > m.wrote.Load() }

// SetBuffered switches appends to the pending buffer (see the buffered
// field). Switch only while nothing is pending.
func (m *MappedFile) SetBuffered(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buffered = on
}

// AppendFunc reserves n bytes at AppendPosition and lets fill write them:
// directly into the mapping, or into the pending buffer in buffered mode
// (readable after the next Flush or Commit). On a fill error nothing is
// appended. ErrFileFull if n bytes do not fit.
func (m *MappedFile) AppendFunc(n int, fill func(dst []byte) error) (pos int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unmapped || m.closed.Load() {
		return 0, fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	w := int(m.reserved.Load())
	if n < 0 || w+n > m.size {
		return w, ErrFileFull
	}
	if !m.buffered {
		if err := fill(m.data[w : w+n : w+n]); err != nil {
			return w, err
		}
		m.wrote.Store(int64(w + n))
		m.reserved.Store(int64(w + n))
		return w, nil
	}
	l := len(m.pending)
	m.pending = slices.Grow(m.pending, n)[:l+n]
	if err := fill(m.pending[l : l+n : l+n]); err != nil {
		m.pending = m.pending[:l]
		return w, err
	}
	m.reserved.Store(int64(w + n))
	return w, nil
}

// AppendBytes appends p as it is, with one copy (into the mapping, or into
// the pending buffer in buffered mode). ErrFileFull if it does not fit.
func (m *MappedFile) AppendBytes(p []byte) (pos int, err error) {
	return m.AppendFunc(len(p), func(dst []byte) error {
		copy(dst, p)
		return nil
	})
}

// Commit writes pending bytes to the file (buffered mode), making them
// readable; Flush does it too. A failed write loses the pending bytes: the
// caller must treat the file's tail as unknown. A closed file fails with
// ErrFileClosed.
func (m *MappedFile) Commit() error {
	if !m.Retain() {
		return fmt.Errorf("%w: commit %s", ErrFileClosed, m.path)
	}
	defer m.Release()
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	return m.commitLocked()
}

// commitLocked needs flushMu, which keeps commits in order. The pending
// buffer is swapped out under mu so appends continue during the pwrite.
func (m *MappedFile) commitLocked() error {
	m.mu.Lock()
	buf, start := m.pending, m.pendingStart
	if len(buf) == 0 || m.unmapped {
		m.mu.Unlock()
		return nil
	}
	m.pending = m.spare[:0]
	m.spare = nil
	m.pendingStart = start + len(buf)
	m.mu.Unlock()
	if _, err := m.file.WriteAt(buf, int64(start)); err != nil {
		if IsNoSpace(err) {
			return diskFullError("write", m.path, err)
		}
		return err
	}
	m.wrote.Store(int64(start + len(buf)))
	m.mu.Lock()
	switch {
	case int(m.reserved.Load()) >= m.size && len(m.pending) == 0:
		// Full and all written: no append comes any more (a truncation
		// regrows them), and a log keeps every segment open.
		m.pending, m.spare = nil, nil
	case m.spare == nil && cap(buf) <= 4<<20:
		m.spare = buf[:0]
	}
	m.mu.Unlock()
	return nil
}

// WriteAt copies p to pos without moving WrotePosition (index file slots and
// headers). The range is flushed by the next Flush.
func (m *MappedFile) WriteAt(p []byte, pos int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unmapped || m.closed.Load() {
		return fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	if pos < 0 || pos+len(p) > m.size {
		return fmt.Errorf("%w: write [%d,%d) outside %s (size %d)", ErrOutOfRange, pos, pos+len(p), m.path, m.size)
	}
	copy(m.data[pos:], p)
	m.markDirtyLocked(pos, pos+len(p))
	return nil
}

// WriteThrough writes p at pos with pwrite and syncs the file, without
// moving WrotePosition. Unlike WriteAt then Flush it writes every byte even
// where the page cache already shows them: after a failed writeback the
// kernel marks the pages clean, and a rewrite of the same bytes through
// the mapping dirties nothing, so a later msync would report success with
// the disk still holding the old bytes.
func (m *MappedFile) WriteThrough(p []byte, pos int) error {
	if !m.Retain() {
		return fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	defer m.Release()
	m.mu.Lock()
	defer m.mu.Unlock()
	if pos < 0 || pos+len(p) > m.size {
		return fmt.Errorf("%w: write [%d,%d) outside %s (size %d)", ErrOutOfRange, pos, pos+len(p), m.path, m.size)
	}
	if _, err := m.file.WriteAt(p, int64(pos)); err != nil {
		return err
	}
	return m.file.Sync()
}

// Bytes returns the whole mapping for random-access readers (the index file).
// The caller must hold a reference (Retain) for as long as it uses the slice
// and must not write through it (use WriteAt).
func (m *MappedFile) Bytes() []byte { return m.data }

// Flush makes everything appended so far durable (commit of pending bytes,
// then msync of the unflushed range, MS_SYNC) and returns the new flushed position. Concurrent appends
// continue; they are covered by the next Flush.
func (m *MappedFile) Flush() (flushed int, err error) {
	if !m.Retain() {
		return m.FlushedPosition(), fmt.Errorf("%w: flush %s", ErrFileClosed, m.path)
	}
	defer m.Release()
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	if err := m.commitLocked(); err != nil {
		return m.FlushedPosition(), err
	}
	w := int(m.wrote.Load())
	fl := int(m.flushed.Load())
	m.mu.Lock()
	if m.dirtyHi > m.dirtyLo {
		// Random writes pending: sync their union with the appended range while
		// holding mu, so no writer changes the bytes being written back.
		lo, hi := min(m.dirtyLo, fl), max(m.dirtyHi, w)
		err = m.file.Msync(m.data[lo:hi])
		if err == nil {
			m.dirtyLo, m.dirtyHi = 0, 0
		}
		m.mu.Unlock()
	} else {
		m.mu.Unlock()
		if w > fl {
			// [fl, w) is complete and never rewritten by Append, so it can be
			// written back without holding mu.
			err = m.file.Msync(m.data[fl:w])
		}
	}
	if err != nil {
		return fl, err
	}
	if int64(w) > m.flushed.Load() {
		m.flushed.Store(int64(w))
	}
	return w, nil
}

// Slice is a refcounted view of a mapped file's bytes. B is valid until
// Release; call Release exactly once.
type Slice struct {
	// B holds the bytes; it aliases the mapping, so never write through it.
	B []byte
	// Offset is the logical (physical, for the CommitLog) offset of B[0].
	Offset int64
	mf     *MappedFile
}

// Release drops the view's reference. The mapping may be unmapped after it,
// so B must not be used any more.
func (s *Slice) Release() {
	if s.mf != nil {
		mf := s.mf
		s.mf = nil
		s.B = nil
		mf.Release()
	}
}

// Read returns a view of n bytes at pos. Reads never reach past
// WrotePosition (ErrOutOfRange) and fail with ErrFileClosed once the file is
// closed.
func (m *MappedFile) Read(pos, n int) (*Slice, error) {
	w := int(m.wrote.Load())
	if pos < 0 || n < 0 || pos+n > w {
		return nil, fmt.Errorf("%w: read [%d,%d) of %s, written %d", ErrOutOfRange, pos, pos+n, m.path, w)
	}
	if !m.Retain() {
		return nil, fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	return &Slice{B: m.data[pos : pos+n : pos+n], Offset: m.from + int64(pos), mf: m}, nil
}

// ReadFrom returns a view from pos to WrotePosition.
func (m *MappedFile) ReadFrom(pos int) (*Slice, error) {
	return m.Read(pos, int(m.wrote.Load())-pos)
}

// Retain takes a reference that keeps the mapping alive; it returns false if
// the file is closed. Pair every successful Retain with Release.
func (m *MappedFile) Retain() bool {
	for {
		if m.closed.Load() {
			return false
		}
		r := m.refs.Load()
		if r <= 0 {
			return false
		}
		if m.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// Release drops a reference; the last one after Close unmaps and closes the file.
func (m *MappedFile) Release() {
	r := m.refs.Add(-1)
	if r == 0 {
		m.cleanup()
	} else if r < 0 {
		panic("storage: MappedFile released more often than retained: " + m.path)
	}
}

func (m *MappedFile) cleanup() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unmapped {
		return
	}
	m.unmapped = true
	err := m.file.Munmap(m.data)
	if cerr := m.file.Close(); err == nil {
		err = cerr
	}
	m.cleanupErr = err
}

// Close stops the file from handing out new views and drops the owner's
// reference; the mapping goes when the last view is released. It does not
// flush. The error is the unmap/close error if that happened now.
func (m *MappedFile) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.Release()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cleanupErr
}

// Destroy closes the file and removes it from disk (the name goes now, the
// mapping when the last view is released).
func (m *MappedFile) Destroy() error {
	m.destroyed.Store(true)
	cerr := m.Close()
	if err := m.fsys.Remove(m.path); err != nil && !os.IsNotExist(err) {
		return err
	}
	// Make the removal durable: a resurrected stale segment after a crash
	// could otherwise be scanned as if it held new entries.
	if err := m.fsys.SyncDir(filepath.Dir(m.path)); err != nil {
		return err
	}
	return cerr
}

// IsDestroyed reports whether Destroy was called.
func (m *MappedFile) IsDestroyed() bool { return m.destroyed.Load() }

// IsClosed reports whether Close or Destroy was called.
func (m *MappedFile) IsClosed() bool { return m.closed.Load() }

// IsUnmapped reports whether the mapping is gone (closed and no views left).
func (m *MappedFile) IsUnmapped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unmapped
}

// ModTime returns the file's modification time (for retention); zero if the
// file cannot be stat'ed.
func (m *MappedFile) ModTime() time.Time {
	fi, err := m.fsys.Stat(m.path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}
