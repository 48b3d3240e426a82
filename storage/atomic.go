package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteFileAtomic replaces path with data through fsys so that a crash
// leaves either the old or the new content, never a torn file: write a
// temporary file beside path, fdatasync it, rename it over path, fsync the directory (the
// rename is durable only once the directory entry is). A missing
// directory is created; on failure the temporary file is removed. Errors name
// the step that failed. For small files that must never be torn (store
// checkpoint, Raft log meta, name-server KV config, client offsets).
//
// Each call writes its own temporary file (path+".tmp."+random, created
// exclusively), so writers of one path in different processes — two
// consumers sharing an offsets file, two name servers sharing a KV file —
// never write into each other's temporary file; the last rename wins.
func WriteFileAtomic(fsys FS, path string, data []byte) error {
	return WriteFileAtomicPerm(fsys, path, data, 0o644)
}

// WriteFileAtomicPerm is WriteFileAtomic with the new file's permission
// bits (before umask): for files holding secrets, such as ACL accounts.
func WriteFileAtomicPerm(fsys FS, path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp := path + tempInfix + strconv.FormatUint(rand.Uint64(), 36)
	const flags = os.O_RDWR | os.O_CREATE | os.O_EXCL
	f, err := fsys.OpenFile(tmp, flags, perm)
	if errors.Is(err, fs.ErrNotExist) {
		if err := MkdirAllDurable(fsys, dir); err != nil {
			return fmt.Errorf("create dir %s: %w", dir, err)
		}
		f, err = fsys.OpenFile(tmp, flags, perm)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	fail := func(step string, err error) error {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("%s %s: %w", step, tmp, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail("fsync", err)
	}
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// tempInfix joins a WriteFileAtomic temporary file's target name and its
// random suffix.
const tempInfix = ".tmp."

// tempTarget returns the name that name, if it is exactly what
// WriteFileAtomic names a temporary file (target + ".tmp." + a uint64 in
// lower-case base 36, no leading zeros), would have been renamed to. Only
// such names are ever treated as leftovers, so no other file is removed.
func tempTarget(name string) (string, bool) {
	i := strings.LastIndex(name, tempInfix)
	if i <= 0 {
		return "", false
	}
	suffix := name[i+len(tempInfix):]
	v, err := strconv.ParseUint(suffix, 36, 64)
	if err != nil || strconv.FormatUint(v, 36) != suffix {
		return "", false
	}
	return name[:i], true
}

// RemoveTempFiles removes the temporary files of path that WriteFileAtomic
// left behind when the process died between creating one and renaming it
// (its error paths remove their own). Call it where no WriteFileAtomic of
// path can be running, as when the owner of path opens it. A missing
// directory has none.
func RemoveTempFiles(fsys FS, path string) error {
	dir, base := filepath.Split(path)
	return removeTempFiles(fsys, filepath.Clean(dir), func(target string) bool { return target == base })
}

// removeTempFiles removes the files of dir that are WriteFileAtomic
// temporary files of a target for which match holds.
func removeTempFiles(fsys FS, dir string, match func(target string) bool) error {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s for temporary files: %w", dir, err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if target, ok := tempTarget(e.Name()); ok && match(target) {
			p := filepath.Join(dir, e.Name())
			if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the temporary file %s: %w", p, err)
			}
		}
	}
	return nil
}
