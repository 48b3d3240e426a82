package store

// Benchmarks of the store core. Each reports its throughput next to a
// baseline measured in the same run on the same disk (b.TempDir, i.e. /tmp;
// set TMPDIR to move both), as a ratio "x_raw":
//
//	go test -run='^$' -bench='SyncFlush|AsyncFlush|PullBatch' -benchtime=3s ./broker/store/
//	RAFTMQ_LONG=1 go test -run='^$' -bench=ReopenAfterCrash -benchtime=1x -timeout=30m ./broker/store/

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/storage"
)

const benchMsgSize = 1024

// benchMessage returns a message whose stored size is exactly 1 KiB.
func benchMessage(topic string, qid int32) *Message {
	m := &Message{Topic: topic, QueueID: qid, BornTimestamp: time.Now().UnixMilli(),
		BornHost:   netip.MustParseAddrPort("127.0.0.1:50000"),
		StoreHost:  netip.MustParseAddrPort("127.0.0.1:10911"),
		Properties: map[string]string{"TAGS": "TagA", "UNIQ_KEY": "7F0000010000000000000000000000AA"}}
	n, _ := EncodedSize(m)
	m.Body = make([]byte, benchMsgSize-n)
	return m
}

func benchConfig(dir string, mode FlushDiskType) Config {
	c := DefaultConfig()
	c.StorePathRootDir = dir
	c.FlushDiskType = mode
	c.MappedFileSizeCommitLog = 256 << 20
	c.MappedFileSizeConsumeQueue = 300_000 * CQUnitSize
	c.MaxHashSlotNum = 500_000
	c.MaxIndexNum = 2_000_000
	// BENCH_NOINDEX=1 measures without the key index (to separate its cost).
	c.MessageIndexEnable = os.Getenv("BENCH_NOINDEX") != "1"
	return c
}

// benchSlices is how many slices a run is cut into, alternating baseline and
// store, so that both see the same machine load (2 shared cores: a baseline
// measured once, before the store, made the ratio swing by 2×).
const benchSlices = 6

// rawFile is a preallocated file written like a perfect CommitLog: `group`
// 1 KiB records per pwrite, each pwrite followed by fdatasync when sync is
// set (the ceiling of a group commit with that many appenders).
type rawFile struct {
	f    *os.File
	buf  []byte
	off  int64
	sync bool
}

// newRawFile preallocates room for total records with fallocate (what the
// issue's baseline does: an "unwritten" extent on ext4/XFS, so every sync
// also commits the journal to convert it) or, with zeroed, writes and syncs
// zeros over it first (the store's zero-warmed segments).
func newRawFile(b *testing.B, dir, name string, group, total int, sync, zeroed bool) *rawFile {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	size := int64(total+group) * benchMsgSize
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		b.Fatal(err)
	}
	if zeroed {
		z := make([]byte, 1<<20)
		for off := int64(0); off < size; off += int64(len(z)) {
			if _, err := f.WriteAt(z[:min(int64(len(z)), size-off)], off); err != nil {
				b.Fatal(err)
			}
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	return &rawFile{f: f, buf: make([]byte, group*benchMsgSize), sync: sync}
}

// write writes msgs records (rounded up to whole groups) and returns the time taken.
func (r *rawFile) write(b *testing.B, msgs int) (int, time.Duration) {
	start := time.Now()
	done := 0
	for ; done < msgs; done += len(r.buf) / benchMsgSize {
		if _, err := r.f.WriteAt(r.buf, r.off); err != nil {
			b.Fatal(err)
		}
		if r.sync {
			if err := unix.Fdatasync(int(r.f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
		r.off += int64(len(r.buf))
	}
	return done, time.Since(start)
}

// runAppenders runs about n puts spread over c goroutines and returns how
// many were done and the time taken.
func runAppenders(b *testing.B, s *MessageStore, c, n int) (int, time.Duration) {
	var wg sync.WaitGroup
	start := time.Now()
	per := (n + c - 1) / c
	for g := 0; g < c; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			m := benchMessage("Bench", int32(g%8))
			for i := 0; i < per; i++ {
				mm := *m
				if _, err := s.PutMessage(&mm); err != nil {
					b.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	return per * c, time.Since(start)
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// interleaved runs n store appends in benchSlices slices, each preceded by
// the same share of every baseline, and reports store and baseline rates.
// It also reports cpu_us/msg: process CPU time during the store slices per
// message (all goroutines: put, flush, dispatch, prefault), which is far
// less sensitive to other load on the machine than the rates.
func interleaved(b *testing.B, s *MessageStore, c, n int, raws []*rawFile) (float64, []float64) {
	var done int
	var took, cpu time.Duration
	rawDone := make([]int, len(raws))
	rawTook := make([]time.Duration, len(raws))
	slice := max(c, n/benchSlices)
	for left := n; left > 0; left -= slice {
		k := min(slice, left)
		b.StopTimer()
		for i, r := range raws {
			d, t := r.write(b, k)
			rawDone[i] += d
			rawTook[i] += t
		}
		b.StartTimer()
		c0 := cpuTime()
		d, t := runAppenders(b, s, c, k)
		cpu += cpuTime() - c0
		done += d
		took += t
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(done), "cpu_us/msg")
	rates := make([]float64, len(raws))
	for i := range raws {
		rates[i] = float64(rawDone[i]) / rawTook[i].Seconds()
	}
	return float64(done) / took.Seconds(), rates
}

// BenchmarkSyncFlushAppend: x_raw is the ratio (baseline file
// fallocated); x_rawzero compares with a baseline file whose extents were
// already written (zeros), which is what the store's warmed segments are.
func BenchmarkSyncFlushAppend(b *testing.B) {
	for _, c := range []int{1, 16, 64} {
		b.Run("appenders="+strconv.Itoa(c), func(b *testing.B) {
			dir := b.TempDir()
			n := max(b.N, c)
			raws := []*rawFile{
				newRawFile(b, dir, "raw-sync", c, n+benchSlices*c, true, false),
				newRawFile(b, dir, "raw-sync-zeroed", c, n+benchSlices*c, true, true),
			}
			s, err := Open(benchConfig(filepath.Join(dir, "store"), SyncFlush))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rounds := s.FlushRounds()
			b.ResetTimer()
			rate, raw := interleaved(b, s, c, n, raws)
			b.StopTimer()
			b.ReportMetric(float64(n)/float64(max(1, s.FlushRounds()-rounds)), "msgs/sync")
			b.ReportMetric(rate, "msgs/s")
			b.ReportMetric(raw[0], "raw_msgs/s")
			b.ReportMetric(rate/raw[0], "x_raw")
			b.ReportMetric(rate/raw[1], "x_rawzero")
		})
	}
}

// BenchmarkAsyncFlushAppend: the baseline is plain 1 KiB pwrites (page
// cache, no sync) into a fallocated file.
func BenchmarkAsyncFlushAppend(b *testing.B) {
	for _, c := range []int{1, 4} {
		b.Run("appenders="+strconv.Itoa(c), func(b *testing.B) {
			dir := b.TempDir()
			n := max(b.N, c)
			raws := []*rawFile{newRawFile(b, dir, "raw-write", 1, n+benchSlices*c, false, false)}
			s, err := Open(benchConfig(filepath.Join(dir, "store"), AsyncFlush))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(benchMsgSize)
			b.ResetTimer()
			rate, raw := interleaved(b, s, c, n, raws)
			b.StopTimer()
			b.ReportMetric(rate, "msgs/s")
			b.ReportMetric(raw[0], "raw_msgs/s")
			b.ReportMetric(rate/raw[0], "x_raw")
		})
	}
}

// BenchmarkPullBatch reads 32-message batches through ConsumeQueue and
// CommitLog (verified, copied, QUEUEOFFSET patched) from page cache; the
// baseline is pread of 32 KiB chunks of the same segment.
func BenchmarkPullBatch(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(benchConfig(filepath.Join(dir, "store"), AsyncFlush))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const msgs = 100_000 // ~100 MiB, stays in page cache
	m := benchMessage("Pull", 0)
	for i := 0; i < msgs; i++ {
		mm := *m
		if _, err := s.PutMessage(&mm); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for s.GetMaxOffsetInQueue("Pull", 0) < msgs {
		if time.Now().After(deadline) {
			b.Fatal("dispatch did not catch up")
		}
		time.Sleep(10 * time.Millisecond) // benchmark setup, not a test condition
	}
	// Baseline: pread 32 KiB chunks of the first segment.
	seg, err := os.Open(filepath.Join(dir, "store", "commitlog", storage.FileName(0)))
	if err != nil {
		b.Fatal(err)
	}
	defer seg.Close()
	chunk := make([]byte, 32*benchMsgSize)
	span := int64(msgs * benchMsgSize)
	var off int64
	rawStart := time.Now()
	rawBytes := 0
	for i := 0; i < max(b.N, 1000); i++ {
		if off+int64(len(chunk)) > span {
			off = 0
		}
		n, err := seg.ReadAt(chunk, off)
		if err != nil {
			b.Fatal(err)
		}
		rawBytes += n
		off += int64(n)
	}
	raw := float64(rawBytes) / time.Since(rawStart).Seconds()

	b.SetBytes(32 * benchMsgSize)
	b.ResetTimer()
	start := time.Now()
	next := int64(0)
	total := 0
	for i := 0; i < b.N; i++ {
		r, err := s.GetMessage("g", "Pull", 0, next, 32, nil)
		if err != nil || r.Status != Found {
			b.Fatalf("pull at %d: %v %v", next, r.Status, err)
		}
		total += len(r.Body)
		next = r.NextBeginOffset
		if next >= msgs {
			next = 0
		}
	}
	b.StopTimer()
	rate := float64(total) / time.Since(start).Seconds()
	b.ReportMetric(rate/1e9, "GB/s")
	b.ReportMetric(raw/1e9, "raw_GB/s")
	b.ReportMetric(rate/raw, "x_raw")
}

// crashClose stops a store like a killed process: goroutines end, files are
// closed, but the abort file stays and no final checkpoint is written.
func crashClose(s *MessageStore) {
	s.closed.Store(true)
	close(s.quit)
	s.wg.Wait()
	s.clean.Close()
	s.flush.stop()
	s.cl.stopPrefault()
	s.reput.Close()
	s.closeParts()
}

// BenchmarkReopenAfterCrash builds 2 GiB of CommitLog, "crashes", and times
// Open (abnormal recovery). Baseline: reading the same segment files once.
// Creates 2 GiB, so it only runs with RAFTMQ_LONG=1.
func BenchmarkReopenAfterCrash(b *testing.B) {
	if os.Getenv("RAFTMQ_LONG") != "1" {
		b.Skip("set RAFTMQ_LONG=1 (writes 2 GiB)")
	}
	dir := b.TempDir()
	cfg := benchConfig(filepath.Join(dir, "store"), AsyncFlush)
	cfg.MappedFileSizeCommitLog = 1 << 30
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const target = 2 << 30
	m := benchMessage("Big", 0)
	for s.CommitLog().MaxOffset() < target {
		mm := *m
		mm.QueueID = int32(s.CommitLog().MaxOffset()/benchMsgSize) % 8
		if _, err := s.PutMessage(&mm); err != nil {
			b.Fatal(err)
		}
	}
	for s.DispatchedOffset() < s.CommitLog().MaxOffset() {
		time.Sleep(10 * time.Millisecond) // benchmark setup
	}
	if err := s.CommitLog().Queue().Flush(); err != nil {
		b.Fatal(err)
	}
	crashClose(s)

	rawStart := time.Now()
	buf := make([]byte, 1<<20)
	ents, _ := os.ReadDir(filepath.Join(dir, "store", "commitlog"))
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, "store", "commitlog", e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); ; off += int64(len(buf)) {
			if _, err := f.ReadAt(buf, off); err != nil {
				break
			}
		}
		f.Close()
	}
	raw := time.Since(rawStart).Seconds()

	b.ResetTimer()
	start := time.Now()
	s2, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	secs := time.Since(start).Seconds()
	b.StopTimer()
	rep := s2.Recovery()
	s2.Close()
	b.ReportMetric(secs, "reopen_s")
	b.ReportMetric(raw, "raw_read_s")
	b.ReportMetric(secs/raw, "x_raw")
	b.Logf("recovery: %s", fmt.Sprintf("%+v", rep))
}
