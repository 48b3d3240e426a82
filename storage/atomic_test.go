package storage

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func readAll(t *testing.T, fsys FS, path string) string {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b)
}

// TestWriteFileAtomicReplacesAndLeavesNoTemp: each write replaces the
// content, a missing directory is created, and no temporary file is left.
func TestWriteFileAtomicReplacesAndLeavesNoTemp(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		sub := filepath.Join(dir, "sub")
		p := filepath.Join(sub, "f.json")
		for _, content := range []string{"first, the longer content", "second"} {
			if err := WriteFileAtomic(fsys, p, []byte(content)); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fsys, p); got != content {
				t.Fatalf("read back %q, want %q", got, content)
			}
		}
		ents, err := fsys.ReadDir(sub)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			t.Fatalf("temporary files left behind: %v", ents)
		}
	})
}

// TestWriteFileAtomicSurvivesCrash: after a crash the file holds the last
// complete write, never a torn mix.
func TestWriteFileAtomicSurvivesCrash(t *testing.T) {
	f := NewFaultFS(1)
	p := "/d/meta"
	if err := WriteFileAtomic(f, p, []byte("old content")); err != nil {
		t.Fatal(err)
	}
	f.InjectError(OpRename, unix.EIO)
	if err := WriteFileAtomic(f, p, []byte("new")); !errors.Is(err, unix.EIO) {
		t.Fatalf("rename failure: got %v, want EIO", err)
	}
	g := f.Crash(CrashOptions{Tear: true})
	if got := readAll(t, g, p); got != "old content" {
		t.Fatalf("after a crash during the write: %q, want the old content", got)
	}
	g.InjectError(OpRename, nil)
	if err := WriteFileAtomic(g, p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	h := g.Crash(CrashOptions{Tear: true})
	if got := readAll(t, h, p); got != "new" {
		t.Fatalf("after a crash past the write: %q, want the new content", got)
	}
}

// TestWriteFileAtomicFailsClearly: a directory where the file should be
// makes the rename fail; the error says so and the temporary file is
// removed.
func TestWriteFileAtomicFailsClearly(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	if err := os.MkdirAll(filepath.Join(p, "child"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFileAtomic(OSFS(), p, []byte("data"))
	if err == nil {
		t.Fatal("want an error when the target is a non-empty directory")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary file left behind: %v", ents)
	}
}

// TestWriteFileAtomicConcurrentWriters: writers of one path that do not
// coordinate (two processes sharing an offsets file) each succeed, the
// file always holds one writer's complete content, and no temporary file
// is left behind.
func TestWriteFileAtomicConcurrentWriters(t *testing.T) {
	forAllFS(t, func(t *testing.T, fsys FS, dir string) {
		p := filepath.Join(dir, "shared.json")
		contents := []string{"writer zero's content, the longer one", "writer one"}
		const rounds = 100
		errs := make(chan error, len(contents))
		for _, content := range contents {
			go func() {
				for range rounds {
					if err := WriteFileAtomic(fsys, p, []byte(content)); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range contents {
			if err := <-errs; err != nil {
				t.Fatalf("concurrent write: %v", err)
			}
		}
		if got := readAll(t, fsys, p); got != contents[0] && got != contents[1] {
			t.Fatalf("file holds %q, not one writer's complete content", got)
		}
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			t.Fatalf("temporary files left behind: %v", ents)
		}
	})
}

// TestWriteFileAtomicPermKeepsSecretsPrivate: the replacing file gets the
// mode asked for, not WriteFileAtomic's 0644.
func TestWriteFileAtomicPermKeepsSecretsPrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := WriteFileAtomicPerm(OSFS(), p, []byte("secretKey: x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
}
