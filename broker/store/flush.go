package store

import (
	"fmt"
	"os"
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

// flushRound is one group commit. Appenders join the current round after
// their bytes are appended; the flusher swaps in a new round before it
// flushes, so the flush covers every member, and wakes them all with one
// close (instead of a channel send per waiter).
type flushRound struct {
	done chan struct{}
	// err is the flush's result, written before done is closed.
	err error
	// n counts the members; guarded by flushService.mu.
	n int
	// closed marks the round left in place when the flusher stops.
	closed bool
}

func newFlushRound() *flushRound { return &flushRound{done: make(chan struct{})} }

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

	mu  sync.Mutex
	cur *flushRound // guarded by mu: the round new waiters join

	// lastGroup is how many waiters the previous sync served (written by
	// the flusher): the next round is gathered up to that size, and only the
	// appender completing it wakes the flusher.
	lastGroup atomic.Int64

	// onFlushed is called after a successful flush with the new durable
	// offset (wakes the dispatcher in SYNC_FLUSH mode); may be nil.
	onFlushed func(off int64)

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newFlushService(cfg flushConfig, cl *CommitLog, log *zap.Logger) *flushService {
	f := &flushService{cfg: cfg, cl: cl, log: log, cur: newFlushRound(),
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

// timerPool recycles the syncFlushTimeout timers of SYNC_FLUSH appends.
var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// waitFlushed blocks until the CommitLog is durable up to end, the flush
// fails (the error wraps ErrStoreWriteFailed), syncFlushTimeout passes
// (ErrFlushDiskTimeout) or the store closes.
func (f *flushService) waitFlushed(end int64) error {
	if f.flushed.Load() >= end {
		return nil
	}
	t := timerPool.Get().(*time.Timer)
	t.Reset(f.cfg.SyncTimeout)
	for {
		f.mu.Lock()
		r := f.cur
		r.n++
		n := r.n
		f.mu.Unlock()
		// The first member starts the flusher's gathering; after that only
		// the one completing the expected group needs to wake it.
		if n == 1 || int64(n) >= f.lastGroup.Load() {
			f.signal()
		}
		select {
		case <-r.done:
		case <-t.C:
			return fmt.Errorf("%w: not durable after syncFlushTimeout %v (offset %d, flushed %d)",
				ErrFlushDiskTimeout, f.cfg.SyncTimeout, end, f.flushed.Load())
		}
		var err error
		switch {
		case r.err != nil:
			err = r.err
		case f.flushed.Load() >= end:
		case r.closed:
			err = fmt.Errorf("%w: store closed before offset %d was durable", ErrStoreClosed, end)
		default:
			// Not covered (cannot happen: the round's flush started after
			// this append); join the next round.
			continue
		}
		t.Stop()
		timerPool.Put(t)
		return err
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
			f.finalRound()
			return
		case <-f.wake:
			f.gather()
			f.flushRound()
		case <-tick:
			dirty := f.cl.MaxOffset() - f.flushed.Load()
			thorough := time.Since(lastThorough) >= f.cfg.ThoroughInterval
			if dirty <= 0 || (dirty < int64(f.cfg.LeastPages*os.Getpagesize()) && !thorough) {
				continue
			}
			if thorough {
				lastThorough = time.Now()
			}
			f.flushRound()
		}
	}
}

// gather delays a SYNC_FLUSH round until as many waiters as the previous
// round served are back (or GroupWait passes). Without it, the first
// appender woken by a sync triggers the next sync alone while the other
// appenders of its group are still encoding, and groups shrink to one or
// two messages: the sync rate, not the disk's bandwidth, becomes the limit.
func (f *flushService) gather() {
	want := int(f.lastGroup.Load())
	if want <= 1 || f.cfg.GroupWait <= 0 {
		return
	}
	t := time.NewTimer(f.cfg.GroupWait)
	defer t.Stop()
	for {
		f.mu.Lock()
		n := f.cur.n
		f.mu.Unlock()
		if n >= want {
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

// flushRound closes the current round: new waiters join a fresh one, the
// log is flushed (covering every member: each joined after its append) and
// the members are woken with the result.
func (f *flushService) flushRound() {
	f.mu.Lock()
	r, n := f.cur, f.cur.n
	if n > 0 {
		f.cur = newFlushRound()
	}
	f.mu.Unlock()
	err := f.flushOnce()
	if n == 0 {
		return // no member (ASYNC tick, or woken for nobody): keep the round
	}
	// The next group to gather: this one plus those that joined during the
	// flush, so the target can grow back after a short round.
	f.mu.Lock()
	f.lastGroup.Store(int64(n + f.cur.n))
	f.mu.Unlock()
	r.err = err
	close(r.done)
}

// finalRound flushes once more at stop and answers the last members; a
// waiter arriving later joins a round that is already closed and gets
// ErrStoreClosed unless its bytes were covered.
func (f *flushService) finalRound() {
	closed := newFlushRound()
	closed.closed = true
	close(closed.done)
	f.mu.Lock()
	r := f.cur
	f.cur = closed
	f.mu.Unlock()
	r.err = f.flushOnce()
	close(r.done)
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
