//go:build crashfs

package storage

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCrashFSIsDefault checks the build-tag hook: OSFS is a CrashFS.
func TestCrashFSIsDefault(t *testing.T) {
	if _, ok := OSFS().(*CrashFS); !ok {
		t.Fatalf("OSFS() is %T under the crashfs tag", OSFS())
	}
}

// TestCrashFSLosesExactlyUnsynced writes through a mapping and WriteAt,
// syncs part of it, crashes, and reads the real file: synced bytes are
// there, unsynced ones are not.
func TestCrashFSLosesExactlyUnsynced(t *testing.T) {
	dir := t.TempDir()
	c := NewCrashFS()
	path := filepath.Join(dir, "seg")
	f, err := c.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 10
	if err := f.Fallocate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	m, err := f.Mmap(size)
	if err != nil {
		t.Fatal(err)
	}
	synced := bytes.Repeat([]byte("S"), 100)
	lost := bytes.Repeat([]byte("L"), 100)
	copy(m[0:], synced)
	copy(m[3*pageSize:], lost)
	if _, err := f.WriteAt([]byte("pwrite-lost"), 5*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	if err := f.Msync(m[10:90]); err != nil { // covers page 0 only
		t.Fatal(err)
	}
	// Before the crash every reader sees the in-memory state.
	got := make([]byte, 11)
	if _, err := f.ReadAt(got, 5*int64(pageSize)); err != nil || string(got) != "pwrite-lost" {
		t.Fatalf("ReadAt before crash: %q %v", got, err)
	}
	if start, end, err := f.NextData(int64(pageSize)); err != nil || start > 3*int64(pageSize) || end < 5*int64(pageSize)+11 {
		t.Fatalf("NextData before crash: [%d,%d) %v: unsynced data must count", start, end, err)
	}
	// A checkpoint-style file: written, synced, renamed; and one written
	// but never synced.
	ck, err := c.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ck.WriteAt([]byte("checkpoint"), 0); err != nil {
		t.Fatal(err)
	}
	if err := ck.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := ck.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(path+".tmp", path+".ck"); err != nil {
		t.Fatal(err)
	}
	un, err := c.OpenFile(path+".unsynced", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := un.WriteAt([]byte("never synced"), 0); err != nil {
		t.Fatal(err)
	}
	if err := un.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing does not write back: a reopen in the same "process" still
	// sees the data (page cache), the disk does not.
	if fi, err := c.Stat(path + ".unsynced"); err != nil || fi.Size() != 12 {
		t.Fatalf("Stat of a dirty closed file: %v %v", fi, err)
	}

	c.Crash()
	if err := f.Msync(m[3*pageSize : 3*pageSize+100]); err == nil {
		t.Fatal("Msync after the crash reached the disk")
	}
	_ = f.Munmap(m)
	_ = f.Close()

	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) != size || !bytes.Equal(disk[:100], synced) {
		t.Fatalf("synced range lost: len %d, head %q", len(disk), disk[:100])
	}
	if !bytes.Equal(disk[3*pageSize:3*pageSize+100], make([]byte, 100)) || !bytes.Equal(disk[5*pageSize:5*pageSize+11], make([]byte, 11)) {
		t.Fatal("unsynced bytes reached the disk")
	}
	if b, err := os.ReadFile(path + ".ck"); err != nil || string(b) != "checkpoint" {
		t.Fatalf("synced, renamed file: %q %v", b, err)
	}
	if b, err := os.ReadFile(path + ".unsynced"); err != nil || len(b) != 0 {
		t.Fatalf("unsynced file: %q %v (want empty)", b, err)
	}

	// A new "process" loads the real contents.
	c2 := NewCrashFS()
	f2, err := c2.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 100)
	if _, err := f2.ReadAt(head, 0); err != nil || !bytes.Equal(head, synced) {
		t.Fatalf("reload: %q %v", head, err)
	}
	if _, err := f2.ReadAt(make([]byte, 1), size); err != io.EOF {
		t.Fatalf("read past the end: %v", err)
	}
	if err := f2.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashFSMappedFileFlush runs MappedFile on a CrashFS: what Flush
// covered survives a crash, later appends do not.
func TestCrashFSMappedFileFlush(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			dir := t.TempDir()
			c := NewCrashFS()
			path := filepath.Join(dir, FileName(0))
			mf, err := OpenMappedFile(c, path, 0, 1<<16)
			if err != nil {
				t.Fatal(err)
			}
			if buffered {
				mf.SetBuffered(true)
			}
			if _, err := mf.AppendBytes([]byte("durable-part")); err != nil {
				t.Fatal(err)
			}
			if _, err := mf.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := mf.AppendBytes([]byte("volatile-part")); err != nil {
				t.Fatal(err)
			}
			if err := mf.Commit(); err != nil {
				t.Fatal(err)
			}
			c.Crash()
			_ = mf.Close()
			disk, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(disk), "durable-part") || bytes.Contains(disk, []byte("volatile")) {
				t.Fatalf("after crash: %q", disk[:32])
			}
		})
	}
}
