package raftlog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

const (
	benchBatch     = 64
	benchEntrySize = 1024
	benchSegment   = 64 << 20
)

func benchEntries(next uint64) []*raft.Log {
	logs := make([]*raft.Log, benchBatch)
	now := time.Now()
	for i := range logs {
		data := make([]byte, benchEntrySize)
		for j := range data {
			data[j] = byte(j * 7)
		}
		logs[i] = &raft.Log{Index: next + uint64(i), Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: now}
	}
	return logs
}

// BenchmarkStoreLogsVsRaw interleaves, in one run, durable StoreLogs of 64
// entries × 1 KiB (sync on: one msync per batch) with two raw references
// writing the same frame bytes into preallocated files: pwrite + fdatasync,
// and copy into a shared mapping + msync(MS_SYNC) (what any mmap CommitLog
// pays: a write fault per fresh page). It reports the latencies and the
// ratios store/pwrite and store/mmap (1.0 = no overhead over that path).
func BenchmarkStoreLogsVsRaw(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(filepath.Join(dir, "log"), Options{SegmentSize: benchSegment, Sync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// The raw side gets the same treatment as segments: a fresh preallocated
	// file every benchSegment bytes, never overwriting (overwriting written
	// blocks would skip the unwritten-extent conversion a new segment pays).
	var raw *os.File
	rawFiles := 0
	newRaw := func() {
		if raw != nil {
			raw.Close()
		}
		var err error
		raw, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf("raw%d", rawFiles)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		rawFiles++
		if err := unix.Fallocate(int(raw.Fd()), 0, 0, benchSegment); err != nil {
			b.Fatal(err)
		}
		if err := raw.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	newRaw()
	defer func() { raw.Close() }()
	// The mmap reference: a fresh preallocated mapping per benchSegment.
	var mapped []byte
	var mfile *os.File
	mapFiles := 0
	newMapped := func() {
		if mapped != nil {
			unix.Munmap(mapped)
			mfile.Close()
		}
		var err error
		mfile, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf("mapped%d", mapFiles)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		mapFiles++
		if err := unix.Fallocate(int(mfile.Fd()), 0, 0, benchSegment); err != nil {
			b.Fatal(err)
		}
		if err := mfile.Sync(); err != nil {
			b.Fatal(err)
		}
		if mapped, err = unix.Mmap(int(mfile.Fd()), 0, benchSegment, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			b.Fatal(err)
		}
	}
	newMapped()
	defer func() { unix.Munmap(mapped); mfile.Close() }()

	var frames []byte
	for _, l := range benchEntries(1) {
		frames = AppendFrame(frames, l)
	}
	b.SetBytes(int64(len(frames)))
	var storeTime, rawTime, mmapTime time.Duration
	next := uint64(1)
	var rawOff, mapOff int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		logs := benchEntries(next)
		t0 := time.Now()
		if err := s.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if rawOff+len(frames) > benchSegment {
			newRaw()
			rawOff = 0
		}
		if _, err := raw.WriteAt(frames, int64(rawOff)); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(raw.Fd())); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if mapOff+len(frames) > benchSegment {
			newMapped()
			mapOff = 0
		}
		copy(mapped[mapOff:], frames)
		if err := unix.Msync(mapped[mapOff&^4095:mapOff+len(frames)], unix.MS_SYNC); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		rawOff += len(frames)
		mapOff += len(frames)
		next += benchBatch
		storeTime += t1.Sub(t0)
		rawTime += t2.Sub(t1)
		mmapTime += t3.Sub(t2)
	}
	b.StopTimer()
	b.ReportMetric(float64(storeTime.Microseconds())/float64(b.N), "store-µs/batch")
	b.ReportMetric(float64(rawTime.Microseconds())/float64(b.N), "pwrite-µs/batch")
	b.ReportMetric(float64(mmapTime.Microseconds())/float64(b.N), "mmap-µs/batch")
	b.ReportMetric(float64(storeTime)/float64(rawTime), "store/pwrite")
	b.ReportMetric(float64(storeTime)/float64(mmapTime), "store/mmap")
	b.ReportMetric(float64(benchBatch*b.N)/storeTime.Seconds(), "store-entries/s")
}

// BenchmarkGetLog reads 1 KiB entries back (CRC check + one copy).
func BenchmarkGetLog(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "log"), Options{SegmentSize: benchSegment, Sync: false})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 64 * 64
	for i := uint64(1); i <= n; i += benchBatch {
		if err := s.StoreLogs(benchEntries(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchEntrySize)
	b.ResetTimer()
	var l raft.Log
	for i := 0; i < b.N; i++ {
		if err := s.GetLog(uint64(i%n)+1, &l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadRange measures CATCHUP_READ's read of 1 MiB: "checked"
// walks the entries and verifies every frame's CRC before copying (what
// ReadRange does); "copy" is the copy alone (what it did before).
func BenchmarkReadRange(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "log"), Options{SegmentSize: benchSegment, Sync: false})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 64 * 64
	for i := uint64(1); i <= n; i += benchBatch {
		if err := s.StoreLogs(benchEntries(i)); err != nil {
			b.Fatal(err)
		}
	}
	end := s.NextPosition()
	b.Run("checked", func(b *testing.B) {
		b.SetBytes(1 << 20)
		pos := int64(0)
		for i := 0; i < b.N; i++ {
			out, err := s.ReadRange(pos, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			if pos += int64(len(out)); pos >= end {
				pos = 0
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(1 << 20)
		mf := s.segQ.Files()[0]
		w := mf.WrotePosition()
		for i := 0; i < b.N; i++ {
			sl, err := mf.Read(0, min(w, 1<<20))
			if err != nil {
				b.Fatal(err)
			}
			_ = append([]byte(nil), sl.B...)
			sl.Release()
		}
	})
}

// BenchmarkLocateHeaderAfterStore: the FSM's LocateHeader of the entry just
// stored (one 64 KiB command, the size of a full broker batch), answered
// from the recent-entries cache against the same store with the cache off,
// which reads the header through the mapping: the first touch of that page
// in this process. ns/op is StoreLogs + LocateHeader; locate-ns/op is
// LocateHeader alone.
func BenchmarkLocateHeaderAfterStore(b *testing.B) {
	data := make([]byte, 64<<10)
	for _, c := range []struct {
		name  string
		cache int
	}{{"cache", 0}, {"file", -1}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "log"), Options{SegmentSize: benchSegment, CacheBytes: c.cache})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			l := &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			var locate time.Duration
			for i := range b.N {
				l.Index = uint64(i + 1)
				if err := s.StoreLogs([]*raft.Log{l}); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				_, h, err := s.LocateHeader(l.Index)
				locate += time.Since(start)
				if err != nil || h.Index != l.Index {
					b.Fatalf("LocateHeader(%d): %+v %v", l.Index, h, err)
				}
			}
			b.ReportMetric(float64(locate.Nanoseconds())/float64(b.N), "locate-ns/op")
		})
	}
}

// BenchmarkStoreLogsLargeBatch: one StoreLogs of 64 entries × 64 KiB, the
// AppendEntries a follower that fell behind receives (full broker batches,
// raftMaxAppendEntries of them). B/op is what the batch allocates beyond
// its entries: the buffered segment's pending bytes.
func BenchmarkStoreLogsLargeBatch(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "log"), Options{SegmentSize: benchSegment, Sync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 64<<10)
	logs := make([]*raft.Log, benchBatch)
	b.SetBytes(int64(len(data) * len(logs)))
	next := uint64(1)
	for b.Loop() {
		for i := range logs {
			logs[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data}
			next++
		}
		if err := s.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
}
