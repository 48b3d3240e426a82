package storage

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPageFirstWrite measures what writing a page of a segment costs
// the first time, per 4 KiB page, by the three ways a writer can put bytes
// into a file whose page cache already holds the page (as a warmed segment's
// does): a store through a fresh shared mapping (the CommitLog's way), the
// same after MADV_POPULATE_WRITE set up the mapping's page tables in one
// call, and a one-byte pwrite (the kernel's copy, no user mapping); and a
// fresh anonymous page's first store, a bare page fault. It tells whether
// the mapping itself is what a write pays for on a given machine, and what
// a page fault costs there; BENCHMARKS.md keeps the figures.
func BenchmarkPageFirstWrite(b *testing.B) {
	const page = 4096
	const pages = 8192 // 32 MiB per round
	size := pages * page
	open := func(b *testing.B) *os.File {
		f, err := os.Create(filepath.Join(b.TempDir(), "seg"))
		if err != nil {
			b.Fatal(err)
		}
		zeros := make([]byte, 1<<20)
		for off := 0; off < size; off += len(zeros) {
			if _, err := f.WriteAt(zeros, int64(off)); err != nil {
				b.Fatal(err)
			}
		}
		return f
	}
	mapped := func(b *testing.B, f *os.File) []byte {
		m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	// run writes b.N pages, a fresh mapping (no page of it touched yet) for
	// every segment's worth, its pages clean in the page cache (synced) as
	// a warmed segment's are.
	run := func(b *testing.B, write func(f *os.File, m []byte, n int)) {
		f := open(b)
		defer f.Close()
		b.SetBytes(page)
		for done := 0; done < b.N; done += pages {
			b.StopTimer()
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			m := mapped(b, f)
			b.StartTimer()
			write(f, m, min(pages, b.N-done))
			b.StopTimer()
			if err := unix.Munmap(m); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.Run("mmap-store", func(b *testing.B) {
		run(b, func(_ *os.File, m []byte, n int) {
			for i := range n {
				m[i*page] = 1
			}
		})
	})
	b.Run("mmap-populated", func(b *testing.B) {
		probe := open(b)
		m := mapped(b, probe)
		err := unix.Madvise(m[:page], unix.MADV_POPULATE_WRITE)
		_ = unix.Munmap(m)
		probe.Close()
		if err != nil {
			b.Skipf("MADV_POPULATE_WRITE: %v", err)
		}
		run(b, func(_ *os.File, m []byte, n int) {
			if err := unix.Madvise(m[:n*page], unix.MADV_POPULATE_WRITE); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				m[i*page] = 1
			}
		})
	})
	// The page fault itself, for comparison: a fresh anonymous mapping's
	// first store (what a Go heap page costs its first time, or a race
	// detector's shadow page).
	b.Run("anon", func(b *testing.B) {
		b.SetBytes(page)
		for done := 0; done < b.N; done += pages {
			b.StopTimer()
			m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for i := range min(pages, b.N-done) {
				m[i*page] = 1
			}
			b.StopTimer()
			if err := unix.Munmap(m); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("pwrite", func(b *testing.B) {
		one := []byte{1}
		run(b, func(f *os.File, _ []byte, n int) {
			for i := range n {
				if _, err := f.WriteAt(one, int64(i*page)); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
