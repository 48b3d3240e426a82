package broker

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// benchSenders is the number of concurrent senders (64: a loaded producer fleet).
const benchSenders = 64

// runSenders calls put b.N times from senders goroutines and reports
// msg/s and p50/p99 latency.
func runSenders(b *testing.B, senders int, put func(m *store.Message) error) {
	var next atomic.Int64
	hists := make([]*hdrhistogram.Histogram, senders)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for s := 0; s < senders; s++ {
		hists[s] = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				m := testMessage("T", int32(i%8), fmt.Sprintf("b%d", i), "", 0, 1024)
				delete(m.Properties, wire.PropertyProducerID)
				delete(m.Properties, wire.PropertySequence)
				t0 := time.Now()
				if err := put(m); err != nil {
					b.Error(err)
					return
				}
				_ = hists[s].RecordValue(time.Since(t0).Microseconds())
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	for _, x := range hists {
		h.Merge(x)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "msg/s")
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-µs")
}

// BenchmarkGroupPut: durable (SYNC_FLUSH, quorum-fsynced) 3-replica sends
// of 1 KiB messages from 64 concurrent senders through Replica.PutMessages.
func BenchmarkGroupPut(b *testing.B) {
	raftMetrics(b)
	c := newTestCluster(b, clusterOpts{prodTimings: true, disk: true, sync: true, segmentSize: 64 << 20, tune: benchTune(b)})
	c.createTopic("T", 8)
	l := c.leader()
	ctx := context.Background()
	first := l.g().raft.LastIndex()
	runSenders(b, benchSenders, func(m *store.Message) error {
		_, err := l.g().PutMessages(ctx, []*store.Message{m})
		return err
	})
	// Messages per Raft entry: how well the batcher gathered the senders
	// (each entry costs one fsync round on every replica).
	b.ReportMetric(float64(b.N)/float64(max(l.g().raft.LastIndex()-first, 1)), "msg/entry")
}

// BenchmarkGroupPutOneSender: one closed-loop sender, the latency of a
// lone request (the batcher must never hold it for company).
func BenchmarkGroupPutOneSender(b *testing.B) {
	c := newTestCluster(b, clusterOpts{prodTimings: true, disk: true, sync: true, segmentSize: 64 << 20, tune: benchTune(b)})
	c.createTopic("T", 8)
	l := c.leader()
	ctx := context.Background()
	runSenders(b, 1, func(m *store.Message) error {
		_, err := l.g().PutMessages(ctx, []*store.Message{m})
		return err
	})
}

// benchTune applies RAFTMQ_BENCH_<KEY>=value overrides (maxappend, linger
// and adaptive wait in µs, batchcount, index 0/1, warm ahead in bytes) so
// settings can be compared without edits.
func benchTune(b *testing.B) func(*GroupConfig) {
	env := func(k string) int {
		v := os.Getenv("RAFTMQ_BENCH_" + k)
		if v == "" {
			return -1
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("RAFTMQ_BENCH_%s=%q: %v", k, v, err)
		}
		return n
	}
	var ca *testutil.TestCA
	if env("RAFTTLS") > 0 { // members on mutual TLS (raftTls* keys)
		ca = testutil.NewTestCA(b, "bench-ca")
	}
	return func(c *GroupConfig) {
		if ca != nil {
			f := ca.Issue(c.Raft.DLegerSelfID)
			c.RaftTLS = RaftTLSConfig{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: ca.CertPath}
		}
		if v := env("MAXAPPEND"); v > 0 {
			c.Raft.MaxAppendEntries = v
		}
		if v := env("LINGER"); v >= 0 {
			c.RaftBatchLinger = time.Duration(v) * time.Microsecond
		}
		if v := env("ADAPTIVE"); v >= 0 {
			c.RaftBatchAdaptiveWait = time.Duration(v) * time.Microsecond
		}
		if v := env("INDEX"); v >= 0 {
			c.Store.MessageIndexEnable = v != 0
		}
		if v := env("BATCHCOUNT"); v > 0 {
			c.RaftBatchMaxCount = v
		}
		if v := env("WARM"); v >= 0 {
			c.WarmAheadBytes = v
		}
	}
}
