package store

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
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
	switch req.SysFlag & wire.SysFlagTransMask {
	case wire.SysFlagTransPrepared, wire.SysFlagTransRollback:
		return false, nil
	}
	if req.CommitLogOffset < s.DeletedAt(req.Topic) {
		// A message of a deleted topic, dispatched again after the
		// delete (a re-applied log): it has no queue offset any more.
		req.ConsumeQueueOffset = -1
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

// SegmentSource is how crash verification reads the CommitLog
// (ConsumeQueueStore.VerifyAfterCrash): the CommitLog's *MappedFileQueue
// satisfies it.
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
	// StartOffset is the CommitLog offset up to which messages are known
	// to be dispatched at start (see ReputStartOffset).
	StartOffset int64
}

// ReputStartOffset is the dispatched offset after a start: the newest
// message any ConsumeQueue knows, or earlier if the index lost files in a
// crash, clamped to the CommitLog's [min, max]. The FSM's re-apply after a
// restart may dispatch below it: both dispatchers skip what they hold, and
// re-added units get the same queue offsets.
func ReputStartOffset(cqs *ConsumeQueueStore, idx *IndexService, commitLogMin, commitLogMax int64) int64 {
	start := cqs.MaxPhysicOffset()
	if idx != nil {
		if r := idx.RebuildFrom(); r >= 0 {
			start = min(start, r)
		}
	}
	return max(commitLogMin, min(start, commitLogMax))
}

// ReputService turns stored messages into ConsumeQueue and index entries
// (RocketMQ's ReputMessageService). The Raft FSM drives it synchronously
// with DispatchRequests for every committed entry, so consumers see only
// committed messages.
type ReputService struct {
	cfg ReputConfig

	// reputFrom is the CommitLog offset up to which everything is dispatched.
	// Written only under mu, read lock-free.
	reputFrom atomic.Int64

	// mu serializes dispatching and guards touched.
	mu      sync.Mutex
	touched map[queueKey]struct{} // queues that got units in the current round

	lmu       sync.RWMutex // guards listeners
	listeners []NewMessageListener
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
	r := &ReputService{cfg: cfg, touched: map[queueKey]struct{}{}}
	r.reputFrom.Store(cfg.StartOffset)
	return r, nil
}

// OnNewMessage registers a listener for queues that get new messages.
func (r *ReputService) OnNewMessage(fn NewMessageListener) {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	r.listeners = append(r.listeners, fn)
}

// DispatchedOffset is the CommitLog offset up to which every message is in
// its ConsumeQueue and the index.
func (r *ReputService) DispatchedOffset() int64 { return r.reputFrom.Load() }

// DispatchedThrough records that every message below end is dispatched
// (it only moves the offset forward): a catch-up that backfilled and
// indexed the range before a snapshot position, on a member that has
// applied nothing after it yet.
func (r *ReputService) DispatchedThrough(end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if end > r.reputFrom.Load() {
		r.reputFrom.Store(end)
	}
}

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
