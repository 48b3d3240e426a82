package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FaultOp names an FS operation for fault injection.
type FaultOp int

// Operations a fault can be injected into.
const (
	OpOpen FaultOp = iota
	OpWrite
	OpRead
	OpSync
	OpMsync
	OpFallocate
	OpTruncate
	OpMmap
	OpRemove
	OpRename
	OpSyncDir
)

// String names the operation.
func (o FaultOp) String() string {
	names := [...]string{"open", "write", "read", "sync", "msync", "fallocate", "truncate", "mmap", "remove", "rename", "syncdir"}
	if int(o) < len(names) {
		return names[o]
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// CrashOptions controls what survives FaultFS.Crash.
type CrashOptions struct {
	// Tear copies a random prefix of every file's unsynced bytes into the
	// surviving image, cut at a random byte: the write-back of the last
	// unsynced write was interrupted.
	Tear bool
	// TearPages copies a random subset of the unsynced 4 KiB pages instead of
	// a prefix: the kernel wrote pages back out of order.
	TearPages bool
}

// FaultFS is an in-memory FS for tests of crash safety and error handling
// (exported from a non-test file so other packages' tests can use it).
//
// Each file has a volatile image (what reads and mappings see) and a durable
// image updated only by Sync and Msync. Directory entries, of files and of
// directories alike, are durable only after SyncDir on their directory. Crash returns a new FaultFS holding only
// durable state, optionally torn; the old one fails every later call with
// ErrCrashed, so a store still holding it cannot disturb the survivor.
// Errors (EIO, ENOSPC, anything) can be injected per operation, disk capacity
// limited, disk usage overridden and bits flipped.
type FaultFS struct {
	mu sync.Mutex
	// Guarded by mu.
	files   map[string]*memInode // current namespace
	durable map[string]*memInode // namespace as of the last SyncDir of each dir
	dirs    map[string]bool
	// durableDirs are the directories named durably in their parent (as of
	// its last SyncDir); a crash keeps those whose ancestors all are.
	durableDirs map[string]bool
	faults      map[FaultOp]error
	faultFn     func(op FaultOp, name string) error
	// capacity limits the sum of file sizes (0 = unlimited); beyond it
	// Fallocate and extending writes fail with ENOSPC.
	capacity        int64
	usageOverridden bool
	usedOverride    uint64
	totalOverride   uint64
	dead            bool
	cleanOnFail     bool
	rng             *rand.Rand
	now             func() time.Time
}

type memInode struct {
	data     []byte // volatile image; mappings alias it
	durable  []byte // what survives a crash
	modTime  time.Time
	mappings int // live mappings; the data slice must not be reallocated while > 0
	// clean holds, with SetCleanAfterFailedSync, the pages whose writeback
	// failed (page number → the bytes they held then): a sync skips such a
	// page until a write changes it (see syncRangeLocked).
	clean map[int][]byte
}

const faultPage = 4096

// NewFaultFS returns an empty FaultFS whose random choices (tearing) derive
// from seed, so a failing run can be replayed.
func NewFaultFS(seed uint64) *FaultFS {
	return &FaultFS{
		files:       map[string]*memInode{},
		durable:     map[string]*memInode{},
		dirs:        map[string]bool{"/": true, ".": true},
		durableDirs: map[string]bool{"/": true, ".": true},
		faults:      map[FaultOp]error{},
		rng:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		now:         time.Now,
	}
}

// SetNow replaces the clock used for modification times.
func (f *FaultFS) SetNow(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// InjectError makes every later op of kind op fail with err (nil clears it).
// Use unix.EIO, unix.ENOSPC, ... so callers can classify the error.
func (f *FaultFS) InjectError(op FaultOp, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.faults, op)
	} else {
		f.faults[op] = err
	}
}

// SetFaultFunc installs a hook consulted before every operation; a non-nil
// return fails the operation. It is called with the FaultFS lock held and
// must not call back into the FaultFS.
func (f *FaultFS) SetFaultFunc(fn func(op FaultOp, name string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faultFn = fn
}

// SetCleanAfterFailedSync makes a failed Sync or Msync (an injected error)
// behave as Linux's writeback does: the pages it should have written are
// marked clean, so they keep their bytes in the page cache (reads and
// mappings see them) but no later sync writes them to the durable image
// unless something writes them again (WriteAt, or a store through a
// mapping that changes their bytes). Off by default.
func (f *FaultFS) SetCleanAfterFailedSync(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanOnFail = on
}

// failedSyncLocked marks the pages of [off, end) that differ from the
// durable image clean, if SetCleanAfterFailedSync is on.
func (f *FaultFS) failedSyncLocked(ino *memInode, off, end int) {
	if !f.cleanOnFail {
		return
	}
	for p := off / faultPage; p*faultPage < end; p++ {
		lo, hi := p*faultPage, min((p+1)*faultPage, len(ino.data))
		if lo >= hi {
			break
		}
		d := ino.durable
		if hi <= len(d) && mappedEqual(d[lo:hi], ino.data[lo:hi]) {
			continue
		}
		if ino.clean == nil {
			ino.clean = map[int][]byte{}
		}
		ino.clean[p] = make([]byte, hi-lo)
		mappedCopy(ino.clean[p], ino.data[lo:hi])
	}
}

// syncRangeLocked copies [off, end) of the volatile image to the durable
// one, except pages a failed sync left clean and nothing changed since.
func (ino *memInode) syncRangeLocked(off, end int) {
	if len(ino.durable) < end {
		ino.durable = append(ino.durable, make([]byte, end-len(ino.durable))...)
	}
	if len(ino.clean) == 0 {
		mappedCopy(ino.durable[off:end], ino.data[off:end])
		return
	}
	for p := off / faultPage; p*faultPage < end; p++ {
		lo, hi := max(p*faultPage, off), min((p+1)*faultPage, end)
		if c, ok := ino.clean[p]; ok {
			if mappedEqual(c, ino.data[p*faultPage:min((p+1)*faultPage, len(ino.data))]) {
				continue
			}
			delete(ino.clean, p)
		}
		mappedCopy(ino.durable[lo:hi], ino.data[lo:hi])
	}
}

// mappedCopy and mappedEqual read the volatile image, which mappings
// (Mmap) write without the file system's lock, as a kernel's msync reads
// pages a process may be writing: whatever a sync sees of a concurrent
// store is what a real sync could have made durable, so the race detector
// is told to ignore these reads.
//
// mappedCopy stores only the words that differ: a file's untouched pages
// (most of a fresh segment) are then only read, never written, which keeps
// a sync from faulting in a durable copy of every zero page.
//
//go:norace
func mappedCopy(dst, src []byte) {
	src = src[:len(dst)]
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		if s := binary.LittleEndian.Uint64(src[i:]); binary.LittleEndian.Uint64(dst[i:]) != s {
			binary.LittleEndian.PutUint64(dst[i:], s)
		}
	}
	for ; i < len(dst); i++ {
		if dst[i] != src[i] {
			dst[i] = src[i]
		}
	}
}

//go:norace
func mappedEqual(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for ; i+8 <= len(a); i += 8 {
		if binary.LittleEndian.Uint64(a[i:]) != binary.LittleEndian.Uint64(b[i:]) {
			return false
		}
	}
	for ; i < len(a); i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// writeChanged copies src over dst (a write into the volatile image) a
// page at a time, leaving alone the pages that already hold those bytes,
// such as the zeros a segment warmer writes over a fresh segment: those
// are not faulted in, nor shadowed by the race detector, which sees the
// copies of every other page as it sees a pwrite's read of its buffer.
func writeChanged(dst, src []byte) {
	for lo := 0; lo < len(dst); lo += faultPage {
		hi := min(lo+faultPage, len(dst))
		if !mappedEqual(dst[lo:hi], src[lo:hi]) {
			copy(dst[lo:hi], src[lo:hi])
		}
	}
}

// writtenLocked forgets the clean marks of the pages [off, end) a write
// dirtied.
func (ino *memInode) writtenLocked(off, end int) {
	for p := off / faultPage; len(ino.clean) > 0 && p*faultPage < end; p++ {
		delete(ino.clean, p)
	}
}

// SetCapacity limits the total size of all files; 0 removes the limit.
func (f *FaultFS) SetCapacity(bytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capacity = bytes
}

// SetDiskUsage overrides what DiskUsage reports, for disk-guard tests.
func (f *FaultFS) SetDiskUsage(used, total uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usageOverridden, f.usedOverride, f.totalOverride = true, used, total
}

// ClearDiskUsage removes a SetDiskUsage override.
func (f *FaultFS) ClearDiskUsage() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usageOverridden = false
}

// SetModTime sets a file's modification time (retention tests).
func (f *FaultFS) SetModTime(name string, t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ino, ok := f.files[clean(name)]
	if !ok {
		return &os.PathError{Op: "chtimes", Path: name, Err: os.ErrNotExist}
	}
	ino.modTime = t
	return nil
}

// FlipBit flips one bit of a file in both its volatile and durable images:
// media corruption that no write caused. Call it while nothing writes the file.
func (f *FaultFS) FlipBit(name string, off int64, bit uint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ino, ok := f.files[clean(name)]
	if !ok {
		return &os.PathError{Op: "flipbit", Path: name, Err: os.ErrNotExist}
	}
	if off < 0 || off >= int64(len(ino.data)) {
		return fmt.Errorf("faultfs: flip bit at %d outside %s (size %d)", off, name, len(ino.data))
	}
	ino.data[off] ^= 1 << (bit % 8)
	if off < int64(len(ino.durable)) {
		ino.durable[off] ^= 1 << (bit % 8)
	}
	return nil
}

// Freeze kills the simulated process now: every later call on this FaultFS
// or its files fails with ErrCrashed (Close and Munmap succeed), so nothing
// more becomes durable. Writes into existing mappings still land in memory,
// like stores into page cache that is never written back.
func (f *FaultFS) Freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = true
}

// Crash freezes this FaultFS (see Freeze) and returns a new FaultFS holding
// what a machine crash leaves: the durably named files with their durable
// images, plus torn unsynced bytes if asked. Tearing reads the volatile
// images, so call Crash only once no goroutine writes into this FaultFS's
// mappings any more (Freeze first, stop the writers, then Crash).
func (f *FaultFS) Crash(opts CrashOptions) *FaultFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = true
	n := NewFaultFS(f.rng.Uint64())
	n.now = f.now
	n.capacity = f.capacity
	for d := range f.durableDirs {
		if f.reachableLocked(d) {
			n.dirs[d] = true
			n.durableDirs[d] = true
		}
	}
	survivors := map[*memInode]*memInode{}
	names := make([]string, 0, len(f.durable))
	for name := range f.durable {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic tearing for a given seed
	for _, name := range names {
		if !n.dirs[filepath.Dir(name)] {
			continue // its directory's own name was never made durable
		}
		old := f.durable[name]
		ino, ok := survivors[old]
		if !ok {
			img := append([]byte(nil), old.durable...)
			if opts.Tear || opts.TearPages {
				img = f.tearLocked(old, img, opts.TearPages)
			}
			ino = &memInode{data: img, durable: append([]byte(nil), img...), modTime: old.modTime}
			survivors[old] = ino
		}
		n.files[name] = ino
		n.durable[name] = ino
	}
	return n
}

// tearLocked copies part of the bytes that differ between old's volatile and
// durable images into img.
func (f *FaultFS) tearLocked(old *memInode, img []byte, pages bool) []byte {
	vol := old.data
	if len(vol) > len(img) {
		img = append(img, make([]byte, len(vol)-len(img))...)
	}
	lo, hi := -1, -1
	for i := range vol {
		if vol[i] != img[i] {
			if lo < 0 {
				lo = i
			}
			hi = i + 1
		}
	}
	if lo < 0 {
		return img[:len(vol)]
	}
	if !pages {
		cut := lo + f.rng.IntN(hi-lo+1)
		copy(img[lo:cut], vol[lo:cut])
		return img[:len(vol)]
	}
	const page = 4096
	for p := lo / page * page; p < hi; p += page {
		end := min(p+page, len(vol))
		switch f.rng.IntN(3) {
		case 0: // page never written back
		case 1:
			copy(img[p:end], vol[p:end])
		default: // page torn at a random byte
			cut := p + f.rng.IntN(end-p+1)
			copy(img[p:cut], vol[p:cut])
		}
	}
	return img[:len(vol)]
}

// checkLocked returns the error an operation must fail with, if any.
func (f *FaultFS) checkLocked(op FaultOp, name string) error {
	if f.dead {
		// Reads fail too, so a stale handle never looks healthy.
		return &os.PathError{Op: op.String(), Path: name, Err: ErrCrashed}
	}
	if err, ok := f.faults[op]; ok {
		return &os.PathError{Op: op.String(), Path: name, Err: err}
	}
	if f.faultFn != nil {
		if err := f.faultFn(op, name); err != nil {
			return &os.PathError{Op: op.String(), Path: name, Err: err}
		}
	}
	return nil
}

func clean(name string) string { return filepath.Clean(name) }

func (f *FaultFS) usedLocked() int64 {
	var n int64
	for _, ino := range f.files {
		n += int64(len(ino.data))
	}
	return n
}

// growLocked extends ino to size bytes, enforcing capacity and never moving a
// mapped image.
func (f *FaultFS) growLocked(ino *memInode, name string, size int64, op FaultOp) error {
	cur := int64(len(ino.data))
	if size <= cur {
		return nil
	}
	if f.capacity > 0 && f.usedLocked()+size-cur > f.capacity {
		return &os.PathError{Op: op.String(), Path: name, Err: unix.ENOSPC}
	}
	if size <= int64(cap(ino.data)) {
		old := len(ino.data)
		ino.data = ino.data[:size]
		clear(ino.data[old:])
		return nil
	}
	if ino.mappings > 0 {
		return fmt.Errorf("faultfs: %s: cannot grow a mapped file to %d bytes (the mapping would move)", name, size)
	}
	nd := make([]byte, size)
	copy(nd, ino.data)
	ino.data = nd
	return nil
}

// OpenFile implements FS.
func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = clean(name)
	if err := f.checkLocked(OpOpen, name); err != nil {
		return nil, err
	}
	if f.dirs[name] {
		return nil, &os.PathError{Op: "open", Path: name, Err: unix.EISDIR}
	}
	ino, ok := f.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case !ok:
		if !f.dirs[filepath.Dir(name)] {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		ino = &memInode{modTime: f.now()}
		f.files[name] = ino
	}
	if flag&os.O_TRUNC != 0 && len(ino.data) > 0 {
		if ino.mappings > 0 {
			return nil, fmt.Errorf("faultfs: %s: truncating a mapped file", name)
		}
		ino.data = ino.data[:0]
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	return &memFile{fs: f, ino: ino, name: name, writable: writable}, nil
}

// Remove implements FS.
func (f *FaultFS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = clean(name)
	if err := f.checkLocked(OpRemove, name); err != nil {
		return err
	}
	if _, ok := f.files[name]; ok {
		delete(f.files, name)
		return nil
	}
	if f.dirs[name] {
		prefix := name + string(filepath.Separator)
		for n := range f.files {
			if strings.HasPrefix(n, prefix) {
				return &os.PathError{Op: "remove", Path: name, Err: unix.ENOTEMPTY}
			}
		}
		for d := range f.dirs {
			if strings.HasPrefix(d, prefix) {
				return &os.PathError{Op: "remove", Path: name, Err: unix.ENOTEMPTY}
			}
		}
		delete(f.dirs, name)
		return nil
	}
	return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
}

// Rename implements FS.
func (f *FaultFS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	oldname, newname = clean(oldname), clean(newname)
	if err := f.checkLocked(OpRename, oldname); err != nil {
		return err
	}
	ino, ok := f.files[oldname]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	if !f.dirs[filepath.Dir(newname)] {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	delete(f.files, oldname)
	f.files[newname] = ino
	return nil
}

// MkdirAll implements FS. A created directory survives a crash once its
// parent is synced (SyncDir).
func (f *FaultFS) MkdirAll(path string, perm os.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	path = clean(path)
	if err := f.checkLocked(OpOpen, path); err != nil {
		return err
	}
	for p := path; ; p = filepath.Dir(p) {
		if _, ok := f.files[p]; ok {
			return &os.PathError{Op: "mkdir", Path: p, Err: unix.ENOTDIR}
		}
		f.dirs[p] = true
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// ReadDir implements FS.
func (f *FaultFS) ReadDir(name string) ([]os.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = clean(name)
	if err := f.checkLocked(OpRead, name); err != nil {
		return nil, err
	}
	if !f.dirs[name] {
		return nil, &os.PathError{Op: "readdir", Path: name, Err: os.ErrNotExist}
	}
	var out []os.DirEntry
	for n, ino := range f.files {
		if filepath.Dir(n) == name {
			out = append(out, fs.FileInfoToDirEntry(memInfo{name: filepath.Base(n), size: int64(len(ino.data)), mod: ino.modTime}))
		}
	}
	for d := range f.dirs {
		if d != name && filepath.Dir(d) == name {
			out = append(out, fs.FileInfoToDirEntry(memInfo{name: filepath.Base(d), dir: true}))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Stat implements FS.
func (f *FaultFS) Stat(name string) (os.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = clean(name)
	if err := f.checkLocked(OpRead, name); err != nil {
		return nil, err
	}
	if ino, ok := f.files[name]; ok {
		return memInfo{name: filepath.Base(name), size: int64(len(ino.data)), mod: ino.modTime}, nil
	}
	if f.dirs[name] {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
}

// DiskUsage implements FS: the SetDiskUsage override, else the sum of file
// sizes against the capacity (1 TiB when unlimited).
func (f *FaultFS) DiskUsage(path string) (used, total uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked(OpRead, path); err != nil {
		return 0, 0, err
	}
	if f.usageOverridden {
		return f.usedOverride, f.totalOverride, nil
	}
	total = 1 << 40
	if f.capacity > 0 {
		total = uint64(f.capacity)
	}
	return uint64(f.usedLocked()), total, nil
}

// SyncDir implements FS: the directory's current entries become durable.
func (f *FaultFS) SyncDir(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	path = clean(path)
	if err := f.checkLocked(OpSyncDir, path); err != nil {
		return err
	}
	for n := range f.durable {
		if filepath.Dir(n) == path {
			delete(f.durable, n)
		}
	}
	for n, ino := range f.files {
		if filepath.Dir(n) == path {
			f.durable[n] = ino
		}
	}
	for d := range f.durableDirs {
		if d != path && filepath.Dir(d) == path {
			delete(f.durableDirs, d)
		}
	}
	for d := range f.dirs {
		if d != path && filepath.Dir(d) == path {
			f.durableDirs[d] = true
		}
	}
	return nil
}

// reachableLocked reports whether dir and each of its ancestors are named
// durably.
func (f *FaultFS) reachableLocked(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		if !f.durableDirs[d] {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

type memInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}

type memFile struct {
	fs       *FaultFS
	ino      *memInode
	name     string
	writable bool
	// Guarded by fs.mu.
	closed bool
	maps   [][]byte
}

func (m *memFile) Name() string { return m.name }

func (m *memFile) checkLocked(op FaultOp) error {
	if m.closed {
		return &os.PathError{Op: op.String(), Path: m.name, Err: os.ErrClosed}
	}
	return m.fs.checkLocked(op, m.name)
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpRead); err != nil {
		return 0, err
	}
	if off >= int64(len(m.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpWrite); err != nil {
		return 0, err
	}
	if !m.writable {
		return 0, &os.PathError{Op: "write", Path: m.name, Err: unix.EBADF}
	}
	if err := m.fs.growLocked(m.ino, m.name, off+int64(len(p)), OpWrite); err != nil {
		return 0, err
	}
	writeChanged(m.ino.data[off:off+int64(len(p))], p)
	m.ino.writtenLocked(int(off), int(off)+len(p))
	m.ino.modTime = m.fs.now()
	return len(p), nil
}

func (m *memFile) Close() error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.closed {
		return &os.PathError{Op: "close", Path: m.name, Err: os.ErrClosed}
	}
	m.closed = true
	return nil
}

func (m *memFile) Fallocate(size int64) error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpFallocate); err != nil {
		return err
	}
	return m.fs.growLocked(m.ino, m.name, size, OpFallocate)
}

func (m *memFile) Truncate(size int64) error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpTruncate); err != nil {
		return err
	}
	if size >= int64(len(m.ino.data)) {
		return m.fs.growLocked(m.ino, m.name, size, OpTruncate)
	}
	if m.ino.mappings > 0 {
		return fmt.Errorf("faultfs: %s: shrinking a mapped file", m.name)
	}
	m.ino.data = m.ino.data[:size]
	m.ino.writtenLocked(int(size), int(size)+faultPage+len(m.ino.durable))
	return nil
}

func (m *memFile) Sync() error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpSync); err != nil {
		if !m.fs.dead {
			m.fs.failedSyncLocked(m.ino, 0, len(m.ino.data))
		}
		return err
	}
	if len(m.ino.clean) == 0 {
		n := len(m.ino.data)
		if cap(m.ino.durable) < n {
			m.ino.durable = make([]byte, n) // every byte is set by the copy
		}
		m.ino.durable = m.ino.durable[:n]
		mappedCopy(m.ino.durable, m.ino.data)
		return nil
	}
	m.ino.durable = m.ino.durable[:min(len(m.ino.durable), len(m.ino.data))]
	m.ino.syncRangeLocked(0, len(m.ino.data))
	return nil
}

func (m *memFile) Mmap(size int) ([]byte, error) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpMmap); err != nil {
		return nil, err
	}
	if size <= 0 || size > len(m.ino.data) {
		// A real mapping past EOF would SIGBUS on access; refuse it outright.
		return nil, fmt.Errorf("faultfs: mmap %s: %d bytes but file has %d", m.name, size, len(m.ino.data))
	}
	b := m.ino.data[:size:size]
	m.ino.mappings++
	m.maps = append(m.maps, b)
	return b, nil
}

func (m *memFile) Munmap(b []byte) error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	for i, mb := range m.maps {
		if len(b) > 0 && len(mb) > 0 && &mb[0] == &b[0] {
			m.maps = append(m.maps[:i], m.maps[i+1:]...)
			m.ino.mappings--
			return nil
		}
	}
	return fmt.Errorf("faultfs: munmap %s: not a mapping of this file", m.name)
}

func (m *memFile) Msync(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	off := -1
	p := uintptr(unsafe.Pointer(&b[0]))
	for _, mb := range m.maps {
		base := uintptr(unsafe.Pointer(&mb[0]))
		if p >= base && p+uintptr(len(b)) <= base+uintptr(len(mb)) {
			off = int(p - base)
			break
		}
	}
	if err := m.fs.checkLocked(OpMsync, m.name); err != nil {
		if off >= 0 && !m.fs.dead {
			m.fs.failedSyncLocked(m.ino, off, off+len(b))
		}
		return err // msync works on a closed fd's mapping, so only fs faults apply
	}
	if off < 0 {
		return fmt.Errorf("faultfs: msync %s: range is not inside a mapping of this file", m.name)
	}
	m.ino.syncRangeLocked(off, off+len(b))
	m.ino.modTime = m.fs.now()
	return nil
}

// NextData reports the whole rest of the file as data (the in-memory file
// keeps no extent map).
func (m *memFile) NextData(off int64) (int64, int64, error) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpRead); err != nil {
		return 0, 0, err
	}
	if off >= int64(len(m.ino.data)) {
		return 0, 0, io.EOF
	}
	return off, int64(len(m.ino.data)), nil
}

func (m *memFile) Size() (int64, error) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if err := m.checkLocked(OpRead); err != nil {
		return 0, err
	}
	return int64(len(m.ino.data)), nil
}
