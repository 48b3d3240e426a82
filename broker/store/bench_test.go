package store

// Benchmarks of the store's read path. Each reports its throughput next to
// a baseline measured in the same run on the same disk (b.TempDir, i.e.
// /tmp; set TMPDIR to move both), as a ratio "x_raw":
//
//	go test -run='^$' -bench=PullBatch -benchtime=3s ./broker/store/

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

const benchMsgSize = 1024

// benchMessage returns a message whose stored size is exactly 1 KiB.
func benchMessage(topic string, qid int32) *Message {
	m := &Message{Topic: topic, QueueID: qid, BornTimestamp: time.Now().UnixMilli(),
		BornHost:   netip.MustParseAddrPort("127.0.0.1:50000"),
		StoreHost:  netip.MustParseAddrPort("127.0.0.1:10911"),
		Properties: map[string]string{"TAGS": "TagA", "UNIQ_KEY": "7F0000010000000000000000000000AA"}}
	n, _ := wire.EncodedSize(m)
	m.Body = make([]byte, benchMsgSize-n)
	return m
}

func benchConfig(dir string) Config {
	c := DefaultConfig()
	c.StorePathRootDir = dir
	c.MappedFileSizeCommitLog = 256 << 20
	c.MappedFileSizeConsumeQueue = 300_000 * CQUnitSize
	c.MaxHashSlotNum = 500_000
	c.MaxIndexNum = 2_000_000
	// BENCH_NOINDEX=1 measures without the key index (to separate its cost).
	c.MessageIndexEnable = os.Getenv("BENCH_NOINDEX") != "1"
	return c
}

// BenchmarkPullBatch reads 32-message batches through ConsumeQueue and
// CommitLog (verified, copied, QUEUEOFFSET patched) from page cache; the
// baseline is pread of 32 KiB chunks of the same segment.
func BenchmarkPullBatch(b *testing.B) {
	dir := b.TempDir()
	s := openTestStore(b, benchConfig(filepath.Join(dir, "store")), &segLog{})
	defer s.Close()
	const msgs = 100_000 // ~100 MiB, stays in page cache
	m := benchMessage("Pull", 0)
	batch := make([]*Message, 0, 1000)
	for i := 0; i < msgs; i++ {
		mm := *m
		batch = append(batch, &mm)
		if len(batch) == cap(batch) {
			s.put(batch...)
			batch = batch[:0]
		}
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
