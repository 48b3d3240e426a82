package broker

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/raftlog"
)

// Group-side metrics: the Raft log's durable append, timed by a
// decorator around the LogStore handed to raft.NewRaft. The Group owns the
// collectors (it exists before any Controller and outlives none); the
// Controller registers them in its node registry through groupCollectors.

// groupCollectors is implemented by Replicas that own collectors of their
// own; the Controller registers them (a fake Replica has none).
type groupCollectors interface {
	metricsCollectors() []prometheus.Collector
}

var _ groupCollectors = (*Group)(nil)

// groupMetrics are the Group's collectors.
type groupMetrics struct {
	flushSeconds prometheus.Histogram
	flushBytes   prometheus.Histogram
	// batchRequests: send requests per entry the leader's batcher proposed
	// (how well it gathered the senders; every entry costs one fsync per
	// replica).
	batchRequests prometheus.Histogram
}

func newGroupMetrics() *groupMetrics {
	return &groupMetrics{
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "raft_log_flush_seconds",
			Help: "Duration of the Raft log's append per batch (frames written and, with SYNC_FLUSH, msync'ed): a follower's StoreLogs, or the leader's WriteLogs plus SyncLogs.",
			// 50 µs .. ~1.6 s: a page-cache append to a stalled disk.
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
		flushBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "raft_log_flush_bytes",
			Help:    "Payload bytes (data + extensions) of the entries appended per batch (StoreLogs or WriteLogs).",
			Buckets: prometheus.ExponentialBuckets(256, 4, 10), // 256 B .. 64 MiB
		}),
		batchRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "raft_batch_requests",
			Help:    "Send requests per Raft entry proposed by the leader's batcher.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 .. 512 (raftBatchMaxCount)
		}),
	}
}

// metricsCollectors implements groupCollectors.
func (g *Group) metricsCollectors() []prometheus.Collector {
	if g.metrics == nil {
		return nil
	}
	return append(g.scrubCollectors(), g.metrics.flushSeconds, g.metrics.flushBytes, g.metrics.batchRequests,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "apply_dispatch_failures_total",
			Help: "Failed attempts to write a committed entry's ConsumeQueue and index units (each retry counts).",
		}, func() float64 { return float64(g.fsm.failures.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "apply_dispatch_retried_total",
			Help: "Committed entries whose ConsumeQueue and index units were written on a retry.",
		}, func() float64 { return float64(g.fsm.retried.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "apply_stopped",
			Help: "1 when this member's FSM stopped after an entry could not be applied (raftStatus applyStopped says which); it needs a restart.",
		}, func() float64 {
			if g.fsm.stopped.Load() != nil {
				return 1
			}
			return 0
		}),
		promotionCollector{g},
	)
}

// timedLogs is the LogStore Raft gets: g.logs behind the timing decorator.
// Bootstrap, the FSM and the admin paths keep using g.logs directly (their
// calls are not Raft's appends).
func (g *Group) timedLogs() *timedLogStore {
	g.metrics = newGroupMetrics()
	return &timedLogStore{LogStore: g.logs, m: g.metrics, damaged: func(err error) { g.noteDamage(err, "raft read") }}
}

// timedLogStore times StoreLogs/StoreLog of a *raftlog.LogStore. It must
// keep every optional interface raft checks on its LogStore, or Raft
// changes behaviour: raftlog's store is a MonotonicLogStore (Raft then
// resets the log after installing a snapshot instead of keeping a gap).
// Embedding the concrete type forwards every other method unchanged;
// TestTimedLogStoreInterfaces checks the optional interfaces match.
type timedLogStore struct {
	*raftlog.LogStore
	m *groupMetrics
	// written is the last WriteLogs, for the SyncLogs of the same batch to
	// add its duration to its own (the next WriteLogs may replace it first).
	written atomic.Pointer[writeTiming]
	// damaged is told of an entry Raft could not read (scrub.go).
	damaged func(error)
}

var (
	_ raft.LogStore          = (*timedLogStore)(nil)
	_ raft.MonotonicLogStore = (*timedLogStore)(nil)
	_ raft.ParallelLogStore  = (*timedLogStore)(nil)
)

// StoreLog implements raft.LogStore.
func (t *timedLogStore) StoreLog(l *raft.Log) error { return t.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore, timing the durable append.
func (t *timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := t.LogStore.StoreLogs(logs)
	if err != nil {
		return err
	}
	t.m.flushSeconds.Observe(time.Since(start).Seconds())
	t.observeBytes(logs)
	return nil
}

// WriteLogs implements raft.ParallelLogStore (the leader's append).
func (t *timedLogStore) WriteLogs(logs []*raft.Log) error {
	start := time.Now()
	if err := t.LogStore.WriteLogs(logs); err != nil || len(logs) == 0 {
		return err
	}
	t.written.Store(&writeTiming{last: logs[len(logs)-1].Index, took: time.Since(start)})
	t.observeBytes(logs)
	return nil
}

// SyncLogs implements raft.ParallelLogStore, timing the leader's append as
// its write plus its sync.
func (t *timedLogStore) SyncLogs(index uint64) error {
	start := time.Now()
	if err := t.LogStore.SyncLogs(index); err != nil {
		return err
	}
	took := time.Since(start)
	if w := t.written.Load(); w != nil && w.last == index {
		took += w.took
	}
	t.m.flushSeconds.Observe(took.Seconds())
	return nil
}

// writeTiming is one WriteLogs: the index of its last entry and how long
// it took.
type writeTiming struct {
	last uint64
	took time.Duration
}

func (t *timedLogStore) observeBytes(logs []*raft.Log) {
	n := 0
	for _, l := range logs {
		n += len(l.Data) + len(l.Extensions)
	}
	t.m.flushBytes.Observe(float64(n))
}
