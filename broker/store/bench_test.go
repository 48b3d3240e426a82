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

// rawSyncBaseline measures pwrite+fdatasync of groups of `group` 1 KiB
// records (one sync per group, the ceiling of a perfect group commit with
// that many concurrent appenders) into a preallocated file in dir.
func rawSyncBaseline(b *testing.B, dir string, group, total int) float64 {
	f, err := os.OpenFile(filepath.Join(dir, "raw-sync"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	size := int64(total+group) * benchMsgSize
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, group*benchMsgSize)
	start := time.Now()
	var off int64
	for done := 0; done < total; done += group {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		off += int64(len(buf))
	}
	return float64(total) / time.Since(start).Seconds()
}

// runAppenders runs n puts spread over c goroutines and returns msgs/s.
func runAppenders(b *testing.B, s *MessageStore, c, n int) float64 {
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
	return float64(per*c) / time.Since(start).Seconds()
}

func BenchmarkSyncFlushAppend(b *testing.B) {
	for _, c := range []int{1, 16, 64} {
		b.Run("appenders="+strconv.Itoa(c), func(b *testing.B) {
			dir := b.TempDir()
			n := max(b.N, c)
			raw := rawSyncBaseline(b, dir, c, n)
			s, err := Open(benchConfig(filepath.Join(dir, "store"), SyncFlush))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rounds := s.FlushRounds()
			b.ResetTimer()
			rate := runAppenders(b, s, c, n)
			b.StopTimer()
			b.ReportMetric(float64(n)/float64(max(1, s.FlushRounds()-rounds)), "msgs/sync")
			b.ReportMetric(rate, "msgs/s")
			b.ReportMetric(raw, "raw_msgs/s")
			b.ReportMetric(rate/raw, "x_raw")
		})
	}
}

// rawWriteBaseline measures plain 1 KiB pwrites (page cache, no sync).
func rawWriteBaseline(b *testing.B, dir string, total int) float64 {
	f, err := os.OpenFile(filepath.Join(dir, "raw-write"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(total)*benchMsgSize); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, benchMsgSize)
	start := time.Now()
	for i := 0; i < total; i++ {
		if _, err := f.WriteAt(buf, int64(i)*benchMsgSize); err != nil {
			b.Fatal(err)
		}
	}
	return float64(total) / time.Since(start).Seconds()
}

func BenchmarkAsyncFlushAppend(b *testing.B) {
	for _, c := range []int{1, 4} {
		b.Run("appenders="+strconv.Itoa(c), func(b *testing.B) {
			dir := b.TempDir()
			raw := rawWriteBaseline(b, dir, max(b.N, 1))
			s, err := Open(benchConfig(filepath.Join(dir, "store"), AsyncFlush))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(benchMsgSize)
			b.ResetTimer()
			rate := runAppenders(b, s, c, max(b.N, c))
			b.StopTimer()
			b.ReportMetric(rate, "msgs/s")
			b.ReportMetric(raw, "raw_msgs/s")
			b.ReportMetric(rate/raw, "x_raw")
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
	seg, err := os.Open(filepath.Join(dir, "store", "commitlog", FileName(0)))
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
