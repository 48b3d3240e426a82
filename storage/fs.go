package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FS is the file-system seam. Everything the message store and the Raft log
// do to disk goes through it, so tests can swap in FaultFS to inject
// crashes, EIO, ENOSPC and flipped bits (the pebble vfs/errorfs idea).
type FS interface {
	// OpenFile opens name like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file.
	Remove(name string) error
	// Rename renames a file, replacing newname atomically if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(path string, perm os.FileMode) error
	// ReadDir lists a directory sorted by name.
	ReadDir(name string) ([]os.DirEntry, error)
	// Stat describes a file.
	Stat(name string) (os.FileInfo, error)
	// DiskUsage reports the bytes in use on the file system holding path and
	// its capacity for this process, for the disk guards: used/total is
	// RocketMQ's disk ratio (statfs, see StatfsUsage).
	DiskUsage(path string) (used, total uint64, err error)
	// SyncDir fsyncs a directory so that file creations, removals and renames
	// in it survive a crash.
	SyncDir(path string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name returns the name the file was opened with.
	Name() string
	// Fallocate allocates real blocks for [0,size) (mode 0), extending the
	// file. A mapping must only ever cover allocated blocks: a write fault on a
	// sparse page of a full disk is a SIGBUS, not an error.
	Fallocate(size int64) error
	// Truncate changes the file size.
	Truncate(size int64) error
	// Sync makes the file's data durable (fdatasync).
	Sync() error
	// Mmap maps [0,size) of the file shared and read/write.
	Mmap(size int) ([]byte, error)
	// Munmap removes a mapping returned by Mmap.
	Munmap(b []byte) error
	// Msync makes a dirty range of a mapping durable (MS_SYNC). b must be a
	// sub-slice of a mapping returned by Mmap on this file.
	Msync(b []byte) error
	// Size returns the current file size.
	Size() (int64, error)
	// NextData returns the next range [start, end) at or after off that may
	// hold data (lseek SEEK_DATA/SEEK_HOLE: allocated-but-never-written
	// blocks are skipped), or io.EOF if there is none. Recovery uses it to
	// avoid reading gigabytes of preallocated zeros.
	NextData(off int64) (start, end int64, err error)
}

// OSFS returns the real file system, implemented with golang.org/x/sys/unix
// (under the crashfs build tag: a CrashFS over it, see crashfs.go).
func OSFS() FS { return defaultFS }

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }

func (osFS) DiskUsage(path string) (used, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	used, total = StatfsUsage(&st)
	return used, total, nil
}

// StatfsUsage is RocketMQ's disk ratio (UtilAll.getDiskPartitionSpaceUsedPercent),
// which is also df's Use%: blocks in use over blocks in use plus blocks an
// unprivileged writer may still take. Blocks reserved for root count as
// neither, so the ratio reaches 1 exactly when such a writer gets ENOSPC,
// and a file system with a large reservation does not look fuller to the
// brokers' retention than to the operator's df.
func StatfsUsage(st *unix.Statfs_t) (used, total uint64) {
	bs := uint64(st.Bsize)
	used = (st.Blocks - min(st.Bfree, st.Blocks)) * bs
	return used, used + st.Bavail*bs
}

func (osFS) SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

type osFile struct {
	f *os.File
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Name() string                             { return o.f.Name() }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }

func (o *osFile) Fallocate(size int64) error {
	for {
		err := unix.Fallocate(int(o.f.Fd()), 0, 0, size)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fallocate", Path: o.f.Name(), Err: err}
		}
		return nil
	}
}

func (o *osFile) Sync() error {
	for {
		err := unix.Fdatasync(int(o.f.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: o.f.Name(), Err: err}
		}
		return nil
	}
}

func (o *osFile) Mmap(size int) ([]byte, error) {
	b, err := unix.Mmap(int(o.f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: o.f.Name(), Err: err}
	}
	return b, nil
}

func (o *osFile) Munmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return &os.PathError{Op: "munmap", Path: o.f.Name(), Err: err}
	}
	return nil
}

// pageSize is the OS page size; msync needs page-aligned addresses.
var pageSize = os.Getpagesize()

func (o *osFile) Msync(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	// msync wants a page-aligned start. b is a sub-slice of a mapping that
	// starts on a page boundary, so the bytes between the aligned-down address
	// and b[0] belong to the same mapping and may be named.
	p := uintptr(unsafe.Pointer(&b[0]))
	lead := int(p % uintptr(pageSize))
	aligned := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), -lead)), len(b)+lead)
	for {
		err := unix.Msync(aligned, unix.MS_SYNC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "msync", Path: o.f.Name(), Err: err}
		}
		return nil
	}
}

func (o *osFile) NextData(off int64) (int64, int64, error) {
	fd := int(o.f.Fd())
	start, err := unix.Seek(fd, off, unix.SEEK_DATA)
	if err == unix.ENXIO {
		return 0, 0, io.EOF
	}
	if err != nil {
		return 0, 0, &os.PathError{Op: "seek_data", Path: o.f.Name(), Err: err}
	}
	end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
	if err != nil {
		return 0, 0, &os.PathError{Op: "seek_hole", Path: o.f.Name(), Err: err}
	}
	return start, end, nil
}

func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// IsNoSpace reports whether err is ENOSPC (or EDQUOT, which behaves the same
// for us: no more blocks).
func IsNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// diskFullError wraps an ENOSPC from the FS as ErrDiskFull with context.
func diskFullError(op, path string, err error) error {
	return fmt.Errorf("%w: %s %s: %v (free disk space or lower retention)", ErrDiskFull, op, path, err)
}

// MkdirAllDurable creates dir and its missing parents like MkdirAll and
// syncs the parent of each directory it created: a new directory's name
// lives in its parent, and survives a power cut only once that parent is
// synced. Files later created in dir and synced with SyncDir(dir) are
// reachable after a crash only if dir itself is.
func MkdirAllDurable(fsys FS, dir string) error {
	var created []string // deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("sync %s after creating %s: %w", filepath.Dir(d), d, err)
		}
	}
	return nil
}

// SyncNames makes the names the store under root relies on durable, once,
// when it opens. MkdirAllDurable syncs a parent only for directories it
// creates, and OpenMappedFile syncs a directory only for files it creates,
// so a process killed between a mkdir (or a file's creation) and that sync
// leaves a name that exists, is never synced again, and that a later power
// cut can still take with every synced byte beneath it.
//
// SyncNames syncs the parent of root and of each of root's ancestors,
// root, and the directories directly under it (a broker makes those, the
// Raft directory among them, before its store marks itself running). With
// walk (after an unclean shutdown: the deeper directories, a topic's
// ConsumeQueues, are made while the store's abort file exists, so only a
// killed process can have left a name unsynced there) it syncs every
// directory under root. A clean open does not walk: that costs a directory
// fsync per topic and queue, and a disk cache flush each on many disks. A
// directory this process may not
// read is skipped with what lies beneath it: nothing in it was made by
// MkdirAllDurable, which fails unless it can sync the parents it creates
// in (an operator's 0711 /srv, a mount point's lost+found). A root that
// does not exist has nothing to sync (MkdirAllDurable will create it
// durably).
func SyncNames(fsys FS, root string, walk bool) error {
	root = filepath.Clean(root)
	if _, err := fsys.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for d := root; filepath.Dir(d) != d; d = filepath.Dir(d) {
		err := fsys.SyncDir(filepath.Dir(d))
		if err != nil && !errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("sync %s, the parent of %s: %w", filepath.Dir(d), d, err)
		}
	}
	depth := 1
	if walk {
		depth = -1
	}
	return syncTree(fsys, root, depth)
}

// syncTree syncs dir and the directories under it down to depth levels
// (-1: all), each that is not empty.
func syncTree(fsys FS, dir string, depth int) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		if !e.IsDir() || depth == 0 {
			continue
		}
		err := syncTree(fsys, filepath.Join(dir, e.Name()), depth-1)
		if err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	if len(ents) == 0 {
		return nil
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
