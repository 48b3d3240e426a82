package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Dispatcher consumes one stored message after it became visible (RocketMQ's
// CommitLogDispatcher). The ConsumeQueueStore and the IndexService are
// dispatchers; the ReputService runs them in order for every message.
type Dispatcher interface {
	Dispatch(req *DispatchRequest) error
}

// Dispatch implements Dispatcher: it appends the message's unit to its
// ConsumeQueue and sets req.ConsumeQueueOffset to the queue offset it got —
// the dispatcher assigns queue offsets, so they are dense per queue and the
// same on every replica that dispatches the same CommitLog. A message that is
// already in its queue (a replay) keeps its offset and adds nothing.
// Prepared and rolled-back transactional messages get no unit (RocketMQ
// puts only normal and committed messages in ConsumeQueues).
func (s *ConsumeQueueStore) Dispatch(req *DispatchRequest) error {
	_, err := s.dispatch(req)
	return err
}

// dispatch is Dispatch that also reports whether a new unit was added.
func (s *ConsumeQueueStore) dispatch(req *DispatchRequest) (added bool, err error) {
	switch req.SysFlag & SysFlagTransMask {
	case SysFlagTransPrepared, SysFlagTransRollback:
		return false, nil
	}
	cq, err := s.FindOrCreate(req.Topic, req.QueueID)
	if err != nil {
		return false, err
	}
	off, dup, err := cq.Append(CQUnit{PhyOffset: req.CommitLogOffset, Size: req.MsgSize, TagsCode: req.TagsCode})
	if err != nil {
		return false, err
	}
	req.ConsumeQueueOffset = off
	s.noteTimestamp(req.StoreTimestamp)
	return !dup, nil
}

// Dispatch implements Dispatcher: it indexes the message's keys.
func (s *IndexService) Dispatch(req *DispatchRequest) error {
	return s.BuildIndex(req.Topic, req.Keys, req.UniqKey, req.SysFlag, req.CommitLogOffset, req.StoreTimestamp)
}

// SegmentSource is how the ReputService reads the CommitLog: the CommitLog's
// *MappedFileQueue satisfies it.
type SegmentSource interface {
	// FindByOffset returns the segment holding offset, nil if none does.
	FindByOffset(offset int64) *storage.MappedFile
	// MinOffset is the start of the oldest segment.
	MinOffset() int64
}

// NewMessageListener is told that a queue got messages; maxOffset is the
// queue's new MaxOffset. Long polling hangs on it. It runs on the dispatching
// goroutine after the units are visible, so it must not block.
type NewMessageListener func(topic string, queueID int32, maxOffset int64)

// ReputConfig configures a ReputService.
type ReputConfig struct {
	// ConsumeQueues receives every message (required).
	ConsumeQueues *ConsumeQueueStore
	// Index receives every message; nil disables the index
	// (messageIndexEnable=false).
	Index *IndexService
	// Extra dispatchers run after the ConsumeQueue and the index.
	Extra []Dispatcher
	// Source is the CommitLog's segment queue, for DispatchUpTo and the
	// background follower. Nil when messages come only through
	// DispatchRequests (Raft Apply).
	Source SegmentSource
	// StartOffset is the CommitLog offset to resume from (see
	// ReputStartOffset).
	StartOffset int64
	// RetryInterval is how soon the background follower retries after a
	// failed dispatch (e.g. no disk space for a new ConsumeQueue file);
	// default 1 s.
	RetryInterval time.Duration
	// Log receives structured logs; nil means zap.NewNop().
	Log *zap.Logger
}

// ReputStartOffset is where dispatching resumes after a start: the newest
// message any ConsumeQueue knows, or earlier if the index lost files in a
// crash or recheckFrom is earlier, clamped to the CommitLog's [min, max].
// recheckFrom is -1 after a clean shutdown; after a crash it is the offset
// abnormal recovery scanned from (the range ConsumeQueueStore.VerifyAfterCrash
// checked), so queues that lost unflushed units get them back. Replaying
// below the true dispatch point is harmless: both dispatchers skip what they
// hold, and re-added units get the same queue offsets.
func ReputStartOffset(cqs *ConsumeQueueStore, idx *IndexService, commitLogMin, commitLogMax, recheckFrom int64) int64 {
	start := cqs.MaxPhysicOffset()
	if idx != nil {
		if r := idx.RebuildFrom(); r >= 0 {
			start = min(start, r)
		}
	}
	if recheckFrom >= 0 {
		start = min(start, recheckFrom)
	}
	return max(commitLogMin, min(start, commitLogMax))
}

// ReputService turns CommitLog contents into ConsumeQueue and index entries
// (RocketMQ's ReputMessageService). In single-node mode it follows appends
// in a background goroutine woken by Notify, up to an offset the store says
// is visible (for SYNC_FLUSH the flushed offset, so consumers never see data
// that a crash could take back). In Raft mode the FSM drives it
// synchronously with DispatchUpTo or DispatchRequests up to the commit index.
type ReputService struct {
	cfg ReputConfig
	log *zap.Logger

	// reputFrom is the CommitLog offset up to which everything is dispatched.
	// Written only under mu, read lock-free.
	reputFrom atomic.Int64

	// mu serializes dispatching (background follower vs synchronous callers)
	// and guards touched.
	mu      sync.Mutex
	touched map[queueKey]struct{} // queues that got units in the current round

	lmu       sync.RWMutex // guards listeners
	listeners []NewMessageListener

	wake      chan struct{} // capacity 1: a pending wake-up
	quit      chan struct{}
	done      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
	corrupt   atomic.Bool // a corrupt entry stopped dispatching; logged once
	// trustFrom is the CommitLog offset from which the follower skips the
	// CRC checks (see TrustFrom); math.MaxInt64 until set.
	trustFrom atomic.Int64
}

type queueKey struct {
	topic   string
	queueID int32
}

// NewReputService returns a dispatcher resuming at cfg.StartOffset.
func NewReputService(cfg ReputConfig) (*ReputService, error) {
	if cfg.ConsumeQueues == nil {
		return nil, fmt.Errorf("%w: reput service needs a ConsumeQueueStore", ErrInvalidConfig)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	r := &ReputService{
		cfg: cfg, log: cfg.Log, touched: map[queueKey]struct{}{},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	r.reputFrom.Store(cfg.StartOffset)
	r.trustFrom.Store(math.MaxInt64)
	return r, nil
}

// TrustFrom makes DispatchUpTo skip the entry CRC check for entries at or
// past off; magic, field lengths and PHYSICALOFFSET are still checked. The
// store calls it at Open with the recovered CommitLog end: everything past
// it was encoded and sealed by this process a moment ago, so checking the
// CRC again when dispatching it costs a checksum pass over every byte and
// guards nothing (RocketMQ's reput does not check CRCs either). Reads
// still verify every entry they serve, and recovery-time dispatching of
// what was on disk keeps checking.
func (r *ReputService) TrustFrom(off int64) { r.trustFrom.Store(off) }

// OnNewMessage registers a listener for queues that get new messages.
func (r *ReputService) OnNewMessage(fn NewMessageListener) {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	r.listeners = append(r.listeners, fn)
}

// DispatchedOffset is the CommitLog offset up to which every message is in
// its ConsumeQueue and the index.
func (r *ReputService) DispatchedOffset() int64 { return r.reputFrom.Load() }

// dispatchOneLocked runs every dispatcher for one message.
func (r *ReputService) dispatchOneLocked(req *DispatchRequest) error {
	added, err := r.cfg.ConsumeQueues.dispatch(req)
	if err != nil {
		return fmt.Errorf("dispatch %s/%d at %d to consume queue: %w", req.Topic, req.QueueID, req.CommitLogOffset, err)
	}
	if added {
		r.touched[queueKey{req.Topic, req.QueueID}] = struct{}{}
	}
	if r.cfg.Index != nil {
		if err := r.cfg.Index.Dispatch(req); err != nil {
			return fmt.Errorf("dispatch %s at %d to index: %w", req.Topic, req.CommitLogOffset, err)
		}
	}
	for _, d := range r.cfg.Extra {
		if err := d.Dispatch(req); err != nil {
			return fmt.Errorf("dispatch %s at %d: %w", req.Topic, req.CommitLogOffset, err)
		}
	}
	return nil
}

// notifyLocked tells listeners about the queues touched since the last call.
// Called with mu held so notifications of one queue arrive in offset order.
func (r *ReputService) notifyLocked() {
	if len(r.touched) == 0 {
		return
	}
	r.lmu.RLock()
	ls := r.listeners
	r.lmu.RUnlock()
	for k := range r.touched {
		delete(r.touched, k)
		if len(ls) == 0 {
			continue
		}
		cq := r.cfg.ConsumeQueues.Get(k.topic, k.queueID)
		if cq == nil {
			continue
		}
		maxOff := cq.MaxOffset()
		for _, fn := range ls {
			fn(k.topic, k.queueID, maxOff)
		}
	}
}

// DispatchRequests dispatches messages decoded elsewhere (Raft Apply holds
// them already), in CommitLog order, setting each one's ConsumeQueueOffset.
// Messages below DispatchedOffset are replays: they are dispatched
// idempotently (same queue offsets) and do not move the offset back.
func (r *ReputService) DispatchRequests(reqs []*DispatchRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.notifyLocked()
	for _, req := range reqs {
		if err := r.dispatchOneLocked(req); err != nil {
			return err
		}
		if end := req.CommitLogOffset + int64(req.MsgSize); end > r.reputFrom.Load() {
			r.reputFrom.Store(end)
		}
	}
	return nil
}

// DispatchUpTo reads the CommitLog from DispatchedOffset and dispatches every
// complete message that ends at or before limit. It returns the new
// DispatchedOffset. A corrupt entry stops it there with an error wrapping
// ErrCorruptMessage: nothing at or past it is ever dispatched.
func (r *ReputService) DispatchUpTo(limit int64) (int64, error) {
	if r.cfg.Source == nil {
		return r.reputFrom.Load(), fmt.Errorf("%w: reput service has no CommitLog source", ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.notifyLocked()
	for {
		pos := r.reputFrom.Load()
		if pos >= limit {
			return pos, nil
		}
		if m := r.cfg.Source.MinOffset(); pos < m {
			// Retention removed segments nobody dispatched (possible only
			// if dispatching was stalled for fileReservedTime).
			r.log.Warn("dispatch position was deleted by retention; skipping to the CommitLog minimum",
				zap.Int64("from", pos), zap.Int64("to", m))
			r.reputFrom.Store(m)
			continue
		}
		next, err := r.dispatchSegmentLocked(pos, limit)
		if err != nil {
			return r.reputFrom.Load(), err
		}
		if next == pos {
			return pos, nil // nothing more is complete below limit
		}
	}
}

// dispatchSegmentLocked dispatches from pos to the end of pos's segment, the
// written end, or limit, whichever comes first, and returns the new position.
func (r *ReputService) dispatchSegmentLocked(pos, limit int64) (int64, error) {
	mf := r.cfg.Source.FindByOffset(pos)
	if mf == nil {
		return pos, nil // not written yet
	}
	from := mf.FileFromOffset()
	s, err := mf.ReadFrom(int(pos - from))
	if errors.Is(err, ErrOutOfRange) || errors.Is(err, ErrFileClosed) {
		return pos, nil
	}
	if err != nil {
		return pos, err
	}
	defer s.Release()
	buf := s.B[:min(int64(len(s.B)), limit-pos)]
	off := 0
	for off+BlankHeaderSize <= len(buf) {
		total := int(int32(binary.BigEndian.Uint32(buf[off:])))
		if total > 0 && off+total > len(buf) {
			break // not complete below limit yet
		}
		req, size, err := checkAndDecode(buf[off:], pos+int64(off) < r.trustFrom.Load())
		if errors.Is(err, ErrEndOfData) {
			break
		}
		if err != nil {
			return r.corruptLocked(pos+int64(off), err)
		}
		if req.Blank {
			// Filler: the next message starts at the next segment.
			next := from + int64(mf.Size())
			r.reputFrom.Store(next)
			return next, nil
		}
		at := pos + int64(off)
		if req.CommitLogOffset != at {
			return r.corruptLocked(at, fmt.Errorf("%w: PHYSICALOFFSET field says %d", ErrCorruptMessage, req.CommitLogOffset))
		}
		if err := r.dispatchOneLocked(&req); err != nil {
			return at, err
		}
		off += size
		r.reputFrom.Store(at + int64(size))
	}
	return pos + int64(off), nil
}

func (r *ReputService) corruptLocked(at int64, err error) (int64, error) {
	if !r.corrupt.Swap(true) {
		r.log.Error("corrupt CommitLog entry: dispatching stops here, nothing past it is served",
			zap.Int64("offset", at), zap.Error(err))
	}
	return at, fmt.Errorf("dispatch: CommitLog entry at %d: %w", at, err)
}

// Notify wakes the background follower (after an append or a flush). It
// never blocks.
func (r *ReputService) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start runs the background follower: on every Notify it dispatches up to
// limit() (the store's visible CommitLog offset). Close stops it.
func (r *ReputService) Start(limit func() int64) {
	r.startOnce.Do(func() {
		go r.follow(limit)
	})
}

func (r *ReputService) follow(limit func() int64) {
	defer close(r.done)
	var retry <-chan time.Time
	for {
		select {
		case <-r.quit:
			return
		case <-r.wake:
		case <-retry:
		}
		retry = nil
		if _, err := r.DispatchUpTo(limit()); err != nil {
			if !errors.Is(err, ErrCorruptMessage) {
				r.log.Warn("dispatch failed; retrying", zap.Error(err), zap.Duration("in", r.cfg.RetryInterval))
			}
			retry = time.After(r.cfg.RetryInterval)
		}
	}
}

// Close stops the background follower, if started, and waits for it.
func (r *ReputService) Close() {
	r.stopOnce.Do(func() {
		close(r.quit)
		started := true
		r.startOnce.Do(func() { started = false })
		if started {
			<-r.done
		}
	})
}
