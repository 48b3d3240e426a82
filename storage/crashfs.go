//go:build crashfs

package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Under the crashfs build tag the default file system (OSFS) is a
// CrashFS: file data lives in process memory until it is synced, so a
// SIGKILL of the process loses exactly what a power cut would lose. The
// chaos suite (jepsen/, nemesis crash-unsynced) runs brokers built this way.
var defaultFS FS = NewCrashFS()

// processID is PageCacheID under the crashfs tag: the emulated page cache
// dies with the process, as the real one does with the machine.
var processID = fmt.Sprintf("crashfs-%d-%d", os.Getpid(), time.Now().UnixNano())

// PageCacheID identifies the lifetime of the page cache that holds OSFS's
// unsynced writes; under this tag, the process.
func PageCacheID() string { return processID }

// CrashFS emulates a page cache that dies with the process, on top of the
// real file system.
//
// Each file's contents are held in anonymous memory, loaded from the real
// file when it is first opened and shared by every handle and mapping of
// that path (one "inode" per path, like the page cache). WriteAt and
// writes through a mapping change only that memory; ReadAt, Size, Stat and
// NextData see it. Msync writes the pages covering its range to the real
// file (pwrite + fdatasync); Sync writes every byte that differs from the
// real file, then fdatasyncs. Nothing else ever writes file data, so data
// that was never synced is gone after the process dies.
//
// Metadata is not emulated: creation, O_TRUNC, fallocate, truncate, rename
// and remove reach the real file system at once — the kernel, which keeps
// running, would persist them anyway; what dies is the process's memory.
// A file extended by an unsynced WriteAt stays short on disk.
type CrashFS struct {
	mu sync.Mutex
	// inodes maps a path to its cached contents. Removed or replaced
	// files leave the map; open handles keep their detached inode.
	inodes map[string]*crashInode
}

// NewCrashFS returns an empty CrashFS over the real file system.
func NewCrashFS() *CrashFS { return &CrashFS{inodes: make(map[string]*crashInode)} }

// crashInode is one file's in-memory contents.
type crashInode struct {
	fs *CrashFS
	f  *os.File // real file, read-write, owned by the inode

	mu sync.RWMutex
	// mem is anonymous memory of capacity len(mem); [0,size) is the file.
	mem  []byte
	size int64
	// refs counts open handles, maps live mappings; the inode is dropped
	// when both are zero and nothing is dirty.
	refs, maps int
	// mapped is set once a mapping was handed out: writes through it are
	// invisible, so Sync compares the whole file and NextData reports
	// everything as data from then on.
	mapped bool
	// dirtyLo/dirtyHi bound the bytes changed by WriteAt and not synced.
	dirtyLo, dirtyHi int64
	// diskSize is the real file's size as last written or synced.
	diskSize int64
	// dead is set by Crash: the real file is closed, mem lives on until
	// the last handle and mapping are released.
	dead bool
}

// Crash forgets every unsynced byte, as if the process had died: every
// inode is dropped and its real file closed without writing. Handles and
// mappings obtained before keep working on the dead memory (so a store
// still running on them can be closed), but nothing they do reaches the
// disk any more: syncs fail with os.ErrClosed. For tests; a real crash
// needs no call.
func (c *CrashFS) Crash() {
	c.mu.Lock()
	inodes := c.inodes
	c.inodes = make(map[string]*crashInode)
	c.mu.Unlock()
	for _, ino := range inodes {
		ino.mu.Lock()
		ino.dead = true
		_ = ino.f.Close()
		ino.mu.Unlock()
	}
}

// OpenFile implements FS.
func (c *CrashFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	// The real open gives the real errors (ENOENT, EEXIST, permissions);
	// the inode keeps a read-write descriptor so Sync works for any handle.
	rf, err := os.OpenFile(name, (flag&^(os.O_WRONLY|os.O_APPEND))|os.O_RDWR, perm)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ino := c.inodes[name]
	if ino != nil {
		_ = rf.Close()
		if flag&os.O_TRUNC != 0 {
			ino.mu.Lock()
			clear(ino.mem)
			ino.size, ino.diskSize, ino.dirtyLo, ino.dirtyHi = 0, 0, 0, 0
			ino.mu.Unlock()
		}
	} else {
		if ino, err = loadInode(c, rf); err != nil {
			_ = rf.Close()
			return nil, err
		}
		c.inodes[name] = ino
	}
	ino.mu.Lock()
	ino.refs++
	ino.mu.Unlock()
	return &crashFile{ino: ino, name: name}, nil
}

// loadInode reads rf's data ranges into fresh anonymous memory.
func loadInode(c *CrashFS, rf *os.File) (*crashInode, error) {
	fi, err := rf.Stat()
	if err != nil {
		return nil, err
	}
	ino := &crashInode{fs: c, f: rf, size: fi.Size(), diskSize: fi.Size()}
	if err := ino.grow(fi.Size()); err != nil {
		return nil, err
	}
	real := &osFile{f: rf}
	for off := int64(0); off < ino.size; {
		start, end, err := real.NextData(off)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		end = min(end, ino.size)
		if _, err := rf.ReadAt(ino.mem[start:end], start); err != nil && err != io.EOF {
			return nil, err
		}
		off = end
	}
	return ino, nil
}

// grow makes mem hold at least n bytes. Needs mu (or exclusive access).
// Memory handed out by Mmap cannot move, so a mapped inode cannot grow
// past its capacity.
func (ino *crashInode) grow(n int64) error {
	if n <= int64(len(ino.mem)) && ino.mem != nil {
		return nil
	}
	if ino.maps > 0 {
		return fmt.Errorf("crashfs: %s: growing a mapped file to %d bytes: %w", ino.f.Name(), n, errors.ErrUnsupported)
	}
	capacity := max(n, int64(pageSize))
	capacity = (capacity + int64(pageSize) - 1) / int64(pageSize) * int64(pageSize)
	mem, err := unix.Mmap(-1, 0, int(capacity), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return &os.PathError{Op: "mmap anon", Path: ino.f.Name(), Err: err}
	}
	if ino.mem != nil {
		copy(mem, ino.mem[:ino.size])
		_ = unix.Munmap(ino.mem)
	}
	ino.mem = mem
	return nil
}

// resize sets the in-memory size, zeroing what a shrink cuts off. Needs mu.
func (ino *crashInode) resize(n int64) error {
	if err := ino.grow(n); err != nil {
		return err
	}
	if n < ino.size {
		clear(ino.mem[n:ino.size])
		ino.dirtyHi = min(ino.dirtyHi, n)
		ino.dirtyLo = min(ino.dirtyLo, ino.dirtyHi)
	}
	ino.size = n
	return nil
}

// writeBack pwrites mem[lo:hi) to the real file. Needs mu (read side is
// enough: it only reads mem).
func (ino *crashInode) writeBack(lo, hi int64) error {
	for lo < hi {
		n, err := ino.f.WriteAt(ino.mem[lo:hi], lo)
		if err != nil {
			return err
		}
		lo += int64(n)
	}
	return nil
}

// writeChanged writes every page of [0,size) that differs from the real
// file (what an fdatasync of a file with a shared mapping would write).
func (ino *crashInode) writeChanged() error {
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	for off := int64(0); off < ino.size; off += chunk {
		end := min(off+chunk, ino.size)
		want := ino.mem[off:end]
		have := buf[:end-off]
		n, err := ino.f.ReadAt(have, off)
		if err != nil && err != io.EOF {
			return err
		}
		clear(have[n:])
		if off+int64(n) >= end && bytes.Equal(want, have) {
			continue
		}
		// Write only the differing pages of this chunk.
		ps := int64(pageSize)
		for p := int64(0); p < end-off; p += ps {
			q := min(p+ps, end-off)
			if off+q <= int64(n) && bytes.Equal(want[p:q], have[p:q]) {
				continue
			}
			if err := ino.writeBack(off+p, off+q); err != nil {
				return err
			}
		}
	}
	return nil
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
		return nil
	}
}

// release drops one handle or mapping reference; a clean, unreferenced
// inode is forgotten (its bytes are on disk; a later open reloads them).
func (ino *crashInode) release(mapping bool) error {
	c := ino.fs
	c.mu.Lock()
	defer c.mu.Unlock()
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if mapping {
		ino.maps--
	} else {
		ino.refs--
	}
	if ino.refs > 0 || ino.maps > 0 || ino.mem == nil {
		return nil
	}
	if ino.dead {
		_ = unix.Munmap(ino.mem)
		ino.mem = nil
		return nil
	}
	dirty := ino.dirtyHi > ino.dirtyLo || ino.size > ino.diskSize
	if ino.mapped && !dirty {
		// Writes through a past mapping are invisible: compare with disk.
		var err error
		if dirty, err = ino.differs(); err != nil {
			return err
		}
	}
	if dirty {
		// Like the page cache, unsynced data outlives the last close.
		return nil
	}
	for p, other := range c.inodes {
		if other == ino {
			delete(c.inodes, p)
		}
	}
	err := ino.f.Close()
	_ = unix.Munmap(ino.mem)
	ino.mem = nil
	return err
}

// differs reports whether [0,size) differs from the real file.
func (ino *crashInode) differs() (bool, error) {
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	for off := int64(0); off < ino.size; off += chunk {
		end := min(off+chunk, ino.size)
		n, err := ino.f.ReadAt(buf[:end-off], off)
		if err != nil && err != io.EOF {
			return false, err
		}
		if int64(n) < end-off || !bytes.Equal(ino.mem[off:end], buf[:n]) {
			return true, nil
		}
	}
	return false, nil
}

// Remove implements FS.
func (c *CrashFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Remove(name); err != nil {
		return err
	}
	delete(c.inodes, name)
	return nil
}

// Rename implements FS; the cached contents follow the file.
func (c *CrashFS) Rename(oldname, newname string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	delete(c.inodes, newname)
	if ino, ok := c.inodes[oldname]; ok {
		delete(c.inodes, oldname)
		c.inodes[newname] = ino
	}
	return nil
}

// MkdirAll implements FS.
func (c *CrashFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }

// ReadDir implements FS.
func (c *CrashFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// Stat implements FS with the cached size of an open or dirty file.
func (c *CrashFS) Stat(name string) (os.FileInfo, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	ino := c.inodes[name]
	c.mu.Unlock()
	if ino == nil {
		return fi, nil
	}
	ino.mu.RLock()
	defer ino.mu.RUnlock()
	return crashFileInfo{FileInfo: fi, size: ino.size}, nil
}

// crashFileInfo is a FileInfo with the in-memory size.
type crashFileInfo struct {
	fs.FileInfo
	size int64
}

// Size implements fs.FileInfo.
func (i crashFileInfo) Size() int64 { return i.size }

// DiskUsage implements FS (real statfs: blocks are allocated at once).
func (c *CrashFS) DiskUsage(path string) (used, total uint64, err error) {
	return osFS{}.DiskUsage(path)
}

// SyncDir implements FS.
func (c *CrashFS) SyncDir(path string) error { return osFS{}.SyncDir(path) }

// crashFile is one open handle of a crashInode.
type crashFile struct {
	ino    *crashInode
	name   string
	closed bool
}

func (f *crashFile) Name() string { return f.name }

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	ino := f.ino
	ino.mu.RLock()
	defer ino.mu.RUnlock()
	if ino.mem == nil {
		return 0, os.ErrClosed
	}
	if off >= ino.size {
		return 0, io.EOF
	}
	n := copy(p, ino.mem[off:ino.size])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	ino := f.ino
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if ino.mem == nil {
		return 0, os.ErrClosed
	}
	end := off + int64(len(p))
	if end > ino.size {
		if err := ino.resize(end); err != nil {
			return 0, err
		}
	}
	copy(ino.mem[off:end], p)
	if ino.dirtyHi <= ino.dirtyLo {
		ino.dirtyLo, ino.dirtyHi = off, end
	} else {
		ino.dirtyLo, ino.dirtyHi = min(ino.dirtyLo, off), max(ino.dirtyHi, end)
	}
	return len(p), nil
}

func (f *crashFile) Close() error {
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return f.ino.release(false)
}

// Fallocate allocates on the real file (so ENOSPC is real) and extends the
// cached size with zeros.
func (f *crashFile) Fallocate(size int64) error {
	ino := f.ino
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if err := (&osFile{f: ino.f}).Fallocate(size); err != nil {
		return err
	}
	ino.diskSize = max(ino.diskSize, size)
	if size > ino.size {
		return ino.resize(size)
	}
	return nil
}

func (f *crashFile) Truncate(size int64) error {
	ino := f.ino
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if err := ino.f.Truncate(size); err != nil {
		return err
	}
	ino.diskSize = size
	return ino.resize(size)
}

// Sync writes every unsynced byte of the file and fdatasyncs it.
func (f *crashFile) Sync() error {
	ino := f.ino
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if ino.mem == nil {
		return os.ErrClosed
	}
	var err error
	if ino.mapped {
		err = ino.writeChanged()
	} else if ino.dirtyHi > ino.dirtyLo {
		err = ino.writeBack(ino.dirtyLo, ino.dirtyHi)
	}
	if err == nil && ino.size > ino.diskSize {
		// A size reached by writes of zeros only: extend explicitly.
		err = ino.f.Truncate(ino.size)
	}
	if err != nil {
		return err
	}
	if err := fdatasync(ino.f); err != nil {
		return err
	}
	ino.dirtyLo, ino.dirtyHi, ino.diskSize = 0, 0, ino.size
	return nil
}

// Mmap returns the cached contents themselves: writes through the mapping
// are in memory only until Msync or Sync.
func (f *crashFile) Mmap(size int) ([]byte, error) {
	ino := f.ino
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if ino.mem == nil {
		return nil, os.ErrClosed
	}
	if int64(size) > ino.size {
		// Like a real mapping past EOF: unusable. MappedFile always
		// fallocates first.
		return nil, &os.PathError{Op: "mmap", Path: f.name, Err: unix.EINVAL}
	}
	ino.maps++
	ino.mapped = true
	return ino.mem[:size:size], nil
}

func (f *crashFile) Munmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return f.ino.release(true)
}

// Msync writes the pages covering b to the real file and fdatasyncs it,
// like msync(MS_SYNC) of a shared mapping.
func (f *crashFile) Msync(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	ino := f.ino
	ino.mu.RLock()
	defer ino.mu.RUnlock()
	if ino.mem == nil {
		return os.ErrClosed
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(ino.mem)))
	p := uintptr(unsafe.Pointer(&b[0]))
	if p < base || p+uintptr(len(b)) > base+uintptr(ino.size) {
		return &os.PathError{Op: "msync", Path: f.name, Err: unix.EINVAL}
	}
	lo := int64(p-base) / int64(pageSize) * int64(pageSize)
	hi := min(ino.size, (int64(p-base)+int64(len(b))+int64(pageSize)-1)/int64(pageSize)*int64(pageSize))
	if err := ino.writeBack(lo, hi); err != nil {
		return err
	}
	return fdatasync(ino.f)
}

func (f *crashFile) Size() (int64, error) {
	f.ino.mu.RLock()
	defer f.ino.mu.RUnlock()
	return f.ino.size, nil
}

// NextData reports the rest of the file as data while it may hold
// unsynced bytes (writes through a mapping cannot be seen); otherwise the
// real file's data ranges, which then equal the cached contents.
func (f *crashFile) NextData(off int64) (int64, int64, error) {
	ino := f.ino
	ino.mu.RLock()
	defer ino.mu.RUnlock()
	if off >= ino.size {
		return 0, 0, io.EOF
	}
	if ino.mapped || ino.dirtyHi > ino.dirtyLo || ino.size > ino.diskSize {
		return off, ino.size, nil
	}
	return (&osFile{f: ino.f}).NextData(off)
}
