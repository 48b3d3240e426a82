package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// FlushDiskType selects when appends become durable (RocketMQ flushDiskType).
type FlushDiskType string

// Flush disk types.
const (
	// SyncFlush acknowledges an append only after an fdatasync covering it;
	// concurrent appends share one fdatasync (group commit).
	SyncFlush FlushDiskType = "SYNC_FLUSH"
	// AsyncFlush acknowledges at once and flushes in the background every
	// flushIntervalCommitLog when at least flushCommitLogLeastPages are dirty.
	AsyncFlush FlushDiskType = "ASYNC_FLUSH"
)

// flushConfig is the part of Config the flush service uses.
type flushConfig struct {
	Type             FlushDiskType
	Interval         time.Duration // flushIntervalCommitLog
	LeastPages       int           // flushCommitLogLeastPages
	ThoroughInterval time.Duration // flushCommitLogThoroughInterval
	SyncTimeout      time.Duration // syncFlushTimeout
	// GroupWait bounds how long the flusher waits for the appenders of the
	// last group to come back before syncing (see gather).
	GroupWait time.Duration
}

// flushWaiter is one append waiting for durability up to end.
type flushWaiter struct {
	end   int64
	done  chan error // capacity 1
	timer *time.Timer
}

// flushService owns the CommitLog's flushing: one goroutine takes every
// pending waiter, makes the log durable once (msync of the dirty ranges)
// and wakes them all (RocketMQ GroupCommitService / FlushRealTimeService).
type flushService struct {
	cfg flushConfig
	cl  *CommitLog
	log *zap.Logger

	// flushed is the durable CommitLog offset; physicTimestamp the store
	// timestamp of the newest message known durable (checkpoint).
	flushed         atomic.Int64
	physicTimestamp atomic.Int64
	// syncs counts CommitLog flush rounds that wrote something (metrics).
	syncs atomic.Int64

	mu      sync.Mutex
	waiters []*flushWaiter // guarded by mu
	spare   []*flushWaiter // guarded by mu; recycled slice

	// lastGroup is how many waiters the previous sync served; only the
	// flusher goroutine touches it.
	lastGroup int

	// onFlushed is called after a successful flush with the new durable
	// offset (wakes the dispatcher in SYNC_FLUSH mode); may be nil.
	onFlushed func(off int64)

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newFlushService(cfg flushConfig, cl *CommitLog, log *zap.Logger) *flushService {
	f := &flushService{cfg: cfg, cl: cl, log: log,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	f.flushed.Store(cl.mfq.FlushedOffset())
	return f
}

// FlushedOffset returns the durable CommitLog offset.
func (f *flushService) FlushedOffset() int64 { return f.flushed.Load() }

func (f *flushService) start() { go f.run() }

// stop ends the flusher after a final flush and fails the waiters it could
// not serve.
func (f *flushService) stop() {
	select {
	case <-f.quit:
		return
	default:
	}
	close(f.quit)
	<-f.done
}

func (f *flushService) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// waiterPool recycles waiters (channel and timer) across SYNC_FLUSH appends.
// Only waiters that got their answer go back: a timed-out one may still be
// answered later by the flusher.
var waiterPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &flushWaiter{done: make(chan error, 1), timer: t}
}}

// waitFlushed blocks until the CommitLog is durable up to end, the flush
// fails (the error wraps ErrStoreWriteFailed), syncFlushTimeout passes
// (ErrFlushDiskTimeout) or the store closes.
func (f *flushService) waitFlushed(end int64) error {
	if f.flushed.Load() >= end {
		return nil
	}
	w := waiterPool.Get().(*flushWaiter)
	w.end = end
	f.mu.Lock()
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	f.signal()
	w.timer.Reset(f.cfg.SyncTimeout)
	select {
	case err := <-w.done:
		w.timer.Stop()
		waiterPool.Put(w)
		return err
	case <-w.timer.C:
		return fmt.Errorf("%w: not durable after syncFlushTimeout %v (offset %d, flushed %d)",
			ErrFlushDiskTimeout, f.cfg.SyncTimeout, end, f.flushed.Load())
	}
}

func (f *flushService) run() {
	defer close(f.done)
	var tick <-chan time.Time
	if f.cfg.Type == AsyncFlush {
		t := time.NewTicker(f.cfg.Interval)
		defer t.Stop()
		tick = t.C
	}
	lastThorough := time.Now()
	for {
		select {
		case <-f.quit:
			err := f.flushOnce()
			f.serveWaiters(err, true)
			return
		case <-f.wake:
			f.gather()
			f.serveWaiters(f.flushOnce(), false)
		case <-tick:
			dirty := f.cl.MaxOffset() - f.flushed.Load()
			thorough := time.Since(lastThorough) >= f.cfg.ThoroughInterval
			if dirty <= 0 || (dirty < int64(f.cfg.LeastPages*pageSize) && !thorough) {
				continue
			}
			if thorough {
				lastThorough = time.Now()
			}
			f.serveWaiters(f.flushOnce(), false)
		}
	}
}

// gather delays a SYNC_FLUSH round until as many waiters as the previous
// round served are back (or GroupWait passes). Without it, the first
// appender woken by a sync triggers the next sync alone while the other
// appenders of its group are still encoding, and groups shrink to one or
// two messages: the sync rate, not the disk's bandwidth, becomes the limit.
func (f *flushService) gather() {
	if f.lastGroup <= 1 || f.cfg.GroupWait <= 0 {
		return
	}
	t := time.NewTimer(f.cfg.GroupWait)
	defer t.Stop()
	for {
		f.mu.Lock()
		n := len(f.waiters)
		f.mu.Unlock()
		if n >= f.lastGroup {
			return
		}
		select {
		case <-f.wake:
		case <-t.C:
			return
		case <-f.quit:
			return
		}
	}
}

// serveWaiters answers every waiter registered before the flush that just
// ran: all were appended before, so the flush covered them unless it failed.
func (f *flushService) serveWaiters(err error, final bool) {
	f.mu.Lock()
	ws := f.waiters
	f.waiters = f.spare[:0]
	f.mu.Unlock()
	flushed := f.flushed.Load()
	if len(ws) > 0 {
		f.lastGroup = len(ws)
	}
	var again []*flushWaiter
	for _, w := range ws {
		switch {
		case err != nil:
			w.done <- err
		case flushed >= w.end:
			w.done <- nil
		case final:
			w.done <- fmt.Errorf("%w: store closed before offset %d was durable", ErrStoreClosed, w.end)
		default:
			again = append(again, w) // registered after the flush started
		}
	}
	clear(ws)
	f.mu.Lock()
	f.spare = ws[:0]
	f.waiters = append(f.waiters, again...)
	f.mu.Unlock()
	if len(again) > 0 {
		f.signal()
	}
}

// flushOnce makes everything appended so far durable. A failure is sticky:
// after a failed fdatasync the kernel may have dropped the dirty pages, so
// the log's tail is unknown and no later append may be acknowledged.
func (f *flushService) flushOnce() error {
	if err := f.cl.Failure(); err != nil {
		return f.cl.writableErr()
	}
	ts := f.cl.lastStoreTimestamp.Load()
	if err := f.cl.mfq.Flush(); err != nil {
		f.cl.fail(err)
		return f.cl.writableErr()
	}
	off := f.cl.mfq.FlushedOffset()
	if off > f.flushed.Load() {
		f.syncs.Add(1)
		f.flushed.Store(off)
		f.physicTimestamp.Store(ts)
		if f.onFlushed != nil {
			f.onFlushed(off)
		}
	}
	return nil
}
