package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/broker/timerindex"
	"github.com/raftmq/raftmq/raftlog"
)

// fsm applies committed entries: Messages entries become ConsumeQueue and
// index units (queue offsets assigned here, dense and identical on every
// replica), other commands change the replicated tables. Raft calls Apply,
// Snapshot and Restore from one goroutine.
type fsm struct {
	logs *raftlog.LogStore
	ms   *store.MessageStore
	st   *state
	log  *zap.Logger
	// timers is the replica's timer index (nil: none; timer_fsm.go).
	timers *timerindex.Index

	// retry bounds the retries of a failed dispatch; quit ends them early
	// (the member is closing).
	retry applyRetry
	quit  <-chan struct{}
	// stopped is set when an entry could not be applied after its retries:
	// from then on this FSM applies nothing (see Apply).
	stopped atomic.Pointer[ApplyStoppedError]
	// failures counts dispatch attempts that failed (retried or not);
	// retried counts entries that failed and then succeeded on a retry.
	failures atomic.Uint64
	retried  atomic.Uint64

	// applied is the index of the last command entry this FSM finished
	// applying (or the snapshot it restored). raft.Raft.AppliedIndex moves
	// when a batch is handed to the FSM goroutine, before Apply ran, so it
	// cannot say "this replica's queues hold entry i"; this can.
	applied atomic.Uint64

	// Reused per Apply (FSM goroutine only).
	reqs []*store.DispatchRequest
	pool []store.DispatchRequest
}

// applyResult is what Apply returns for a Messages entry: one result per
// message in entry order.
type applyResult struct {
	results []PutResult
	err     error
}

var _ raft.FSM = (*fsm)(nil)

// applyRetry bounds how long Apply retries the dispatch of a Messages
// entry whose ConsumeQueue or index write failed before it stops the FSM.
type applyRetry struct {
	timeout time.Duration // total retry time per entry (raftApplyRetryTimeout)
	first   time.Duration // first backoff, doubled up to maxWait
	maxWait time.Duration
}

func defaultApplyRetry(timeout time.Duration) applyRetry {
	return applyRetry{timeout: timeout, first: 10 * time.Millisecond, maxWait: time.Second}
}

// ApplyStoppedError is why a member's FSM stopped: the entry at Index could
// not be applied (its ConsumeQueue or index units could not be written)
// within raftApplyRetryTimeout. The member applies nothing after it, so its
// queues stay a prefix of every other replica's; a restart re-applies from
// the last snapshot, which retries the entry.
type ApplyStoppedError struct {
	Index uint64
	Err   error
}

// Error implements error.
func (e *ApplyStoppedError) Error() string {
	return fmt.Sprintf("apply stopped at raft index %d (restart the member once the cause is fixed): %v", e.Index, e.Err)
}

// Unwrap returns the cause.
func (e *ApplyStoppedError) Unwrap() error { return e.Err }

// errClosingWhileRetrying ends a dispatch retry when the member closes.
var errClosingWhileRetrying = errors.New("member closing while retrying the dispatch")

// Apply implements raft.FSM. LogNoop/Configuration/Barrier entries never
// reach it (Raft filters them); an undecodable command stops the FSM.
//
// A Messages entry whose dispatch fails is retried (dispatch is idempotent
// per message: a unit already in its queue keeps its offset); if it still
// fails after raftApplyRetryTimeout the FSM stops: this and every later
// entry is answered with the ApplyStoppedError and changes nothing, so the
// member never assigns queue offsets that differ from the other replicas'.
// Raft keeps replicating the log to it (its log copy is intact); it is not
// ready, it hands leadership away, and it takes no snapshot, so a restart
// re-applies the failed entry.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if s := f.stopped.Load(); s != nil {
		return &applyResult{err: s}
	}
	c, err := DecodeCommand(l.Extensions, l.Data)
	if err != nil {
		// An unknown type or version (a newer leader during a rolling
		// upgrade) cannot be skipped safely: a skipped Messages entry
		// would shift every later queue offset on this replica only.
		stop := &ApplyStoppedError{Index: l.Index, Err: fmt.Errorf("undecodable entry: %w", err)}
		f.stopped.Store(stop)
		f.log.Error("undecodable raft entry: this member stops applying; run a version that knows it",
			zap.Uint64("index", l.Index), zap.Error(err))
		return &applyResult{err: stop}
	}
	nowMs := l.AppendedAt.UnixMilli()
	if c.Type == CmdTimerProgress {
		return f.applyTimerProgress(l, c.Timer)
	}
	if c.Type == CmdMessages || c.Type == CmdTxnEnd {
		res, err := f.applyMessages(l, c, nowMs)
		if err != nil {
			// The CommitLog holds the entry but its units could not all be
			// written: applying later entries would give their messages
			// queue offsets no other replica gives them.
			stop := &ApplyStoppedError{Index: l.Index, Err: err}
			f.stopped.Store(stop)
			if errors.Is(err, errClosingWhileRetrying) {
				f.log.Warn("member closed while retrying the dispatch of an entry; the next start re-applies it",
					zap.Uint64("index", l.Index), zap.Error(err))
				return &applyResult{err: stop}
			}
			f.log.Error("apply of a messages entry failed after retries: this member stops applying; "+
				"it keeps its Raft log, hands leadership away and reports not ready; restart it once the cause is fixed",
				zap.Uint64("index", l.Index), zap.Duration("retried", f.retry.timeout), zap.Error(err))
			return &applyResult{err: stop}
		}
		f.applied.Store(l.Index)
		return &applyResult{results: res}
	}
	if c.Type == CmdDeleteTopic && c.DropQueues {
		if err := f.deleteTopicQueues(l, c.Name); err != nil {
			// The queues of the deleted topic may still be there: later
			// messages of the topic created again would get other queue
			// offsets here than on the other replicas.
			stop := &ApplyStoppedError{Index: l.Index, Err: err}
			f.stopped.Store(stop)
			f.log.Error("delete of a topic's consume queues failed after retries: this member stops applying; "+
				"restart it once the cause is fixed", zap.Uint64("index", l.Index), zap.String("topic", c.Name), zap.Error(err))
			return &applyResult{err: stop}
		}
	}
	f.st.mu.Lock()
	f.st.applyLocked(c, nowMs)
	f.st.mu.Unlock()
	// The entry holds no message, so every message below its end is
	// dispatched: without this, offset commits and config changes after
	// the last message would count as dispatchBehindBytes for good.
	if end, err := f.logs.EndOf(l.Index); err == nil {
		f.ms.Reput().DispatchedThrough(end)
	}
	f.applied.Store(l.Index)
	return &applyResult{}
}

// dispatch hands reqs to the store, retrying a failure with backoff for up
// to f.retry.timeout. A retry re-dispatches every request: those already in
// their queues are replays (same offset, nothing added) and the index skips
// what it holds, so a retried entry ends with the units a first-time
// success writes. st.mu (held by the caller, who is the FSM goroutine, the
// only writer of the tables) is released while waiting so readers of the
// tables are not held up by a full disk.
func (f *fsm) dispatch(index uint64, reqs []*store.DispatchRequest) error {
	err := f.ms.Reput().DispatchRequests(reqs)
	if err == nil {
		return nil
	}
	f.failures.Add(1)
	f.log.Warn("dispatch of a messages entry failed; retrying", zap.Uint64("index", index),
		zap.Duration("for", f.retry.timeout), zap.Error(err))
	deadline := time.Now().Add(f.retry.timeout)
	wait := f.retry.first
	for attempt := 2; ; attempt++ {
		if left := time.Until(deadline); left <= 0 {
			return err
		} else if wait > left {
			wait = left
		}
		f.st.mu.Unlock()
		t := time.NewTimer(wait)
		var quit bool
		select {
		case <-t.C:
		case <-f.quit:
			t.Stop()
			quit = true
		}
		f.st.mu.Lock()
		if quit {
			return fmt.Errorf("%w: %w", errClosingWhileRetrying, err)
		}
		if err = f.ms.Reput().DispatchRequests(reqs); err == nil {
			f.retried.Add(1)
			f.log.Info("dispatch of a messages entry succeeded on a retry", zap.Uint64("index", index), zap.Int("attempt", attempt))
			return nil
		}
		f.failures.Add(1)
		wait = min(2*wait, f.retry.maxWait)
	}
}

// deleteTopicQueues destroys the ConsumeQueues of a topic deleted by
// entry l (store.ConsumeQueueStore.DeleteTopicAt, at the end of the entry
// in the CommitLog), retrying a failure with backoff for up to
// f.retry.timeout. Redoing it is harmless: a delete already carried out
// (also one re-applied after a restart) changes nothing.
func (f *fsm) deleteTopicQueues(l *raft.Log, topic string) error {
	cqs := f.ms.ConsumeQueues()
	do := func() error {
		end, err := f.logs.EndOf(l.Index)
		if err != nil {
			return fmt.Errorf("locate entry %d: %w", l.Index, err)
		}
		return cqs.DeleteTopicAt(topic, end)
	}
	err := do()
	deadline := time.Now().Add(f.retry.timeout)
	for wait := f.retry.first; err != nil; wait = min(2*wait, f.retry.maxWait) {
		f.failures.Add(1)
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		f.log.Warn("delete of a topic's consume queues failed; retrying", zap.Uint64("index", l.Index),
			zap.String("topic", topic), zap.Error(err))
		t := time.NewTimer(min(wait, left))
		select {
		case <-t.C:
		case <-f.quit:
			t.Stop()
			return fmt.Errorf("%w: %w", errClosingWhileRetrying, err)
		}
		err = do()
	}
	return nil
}

// applyMessages dispatches the messages of one entry. Positions come from
// the log store (LocateHeader), never from the bytes in l.Data: the
// leader's in-memory copy is not patched.
func (f *fsm) applyMessages(l *raft.Log, c *Command, nowMs int64) ([]PutResult, error) {
	pos, h, err := f.logs.LocateHeader(l.Index)
	if err != nil {
		return nil, fmt.Errorf("locate entry %d: %w", l.Index, err)
	}
	base := pos + int64(h.DataOffset())
	data := l.Data
	n := 0
	for off := 0; off < len(data); {
		req, size, err := store.CheckAndDecode(data[off:])
		if err != nil {
			return nil, fmt.Errorf("entry %d message at data offset %d: %w", l.Index, off, err)
		}
		if req.Blank {
			return nil, fmt.Errorf("entry %d: %w: blank filler inside a batch", l.Index, store.ErrCorruptMessage)
		}
		req.CommitLogOffset = base + int64(off)
		req.StoreTimestamp = nowMs
		if n == len(f.pool) {
			f.pool = append(f.pool, store.DispatchRequest{})
		}
		f.pool[n] = req
		n++
		off += size
	}
	results := make([]PutResult, n)
	pending := f.reqs[:0]
	defer func() { f.reqs = pending[:0] }()
	// Messages are dispatched in CommitLog order (ConsumeQueues require it);
	// pending non-idempotent ones go out before each idempotent one.
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := f.dispatch(l.Index, pending)
		pending = pending[:0]
		return err
	}
	idem := c.Idem
	st := f.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if c.Type == CmdTxnEnd {
		// A decided half (a repeated END_TRANSACTION that passed the
		// leader's check, or one from an old leader) changes nothing: its
		// messages stay unreferenced bytes in the CommitLog.
		if st.txn.isDecided(c.TxnHalf) {
			for i := range results {
				results[i] = PutResult{QueueID: f.pool[i].QueueID, PhysicalOffset: f.pool[i].CommitLogOffset,
					StoreTimestamp: nowMs, QueueOffset: -1, Duplicate: true}
			}
			return results, nil
		}
	}
	for i := 0; i < n; i++ {
		req := &f.pool[i]
		results[i] = PutResult{QueueID: req.QueueID, PhysicalOffset: req.CommitLogOffset, StoreTimestamp: nowMs}
		if len(idem) == 0 || idem[0].Index != uint32(i) {
			pending = append(pending, req)
			continue
		}
		k := dedupKey{Producer: idem[0].Producer, Topic: req.Topic, QueueID: req.QueueID}
		seq := idem[0].Seq
		idem = idem[1:]
		if e, dup, known := st.dedup.lookup(k, seq); dup {
			results[i].Duplicate = true
			results[i].QueueOffset = -1
			if known {
				results[i].PhysicalOffset, results[i].QueueOffset, results[i].StoreTimestamp = e.PhysicalOffset, e.QueueOffset, e.StoreTimestamp
			}
			continue
		}
		if err := flush(); err != nil {
			return results, err
		}
		pending = append(pending, req)
		if err := flush(); err != nil {
			return results, err
		}
		st.dedup.record(k, seq, dedupEntry{PhysicalOffset: req.CommitLogOffset, QueueOffset: req.ConsumeQueueOffset,
			StoreTimestamp: nowMs, Size: req.MsgSize}, nowMs)
	}
	if err := flush(); err != nil {
		return results, err
	}
	for i := range results {
		if !results[i].Duplicate {
			results[i].QueueOffset = f.pool[i].ConsumeQueueOffset
		}
	}
	if err := f.indexTimersLocked(l.Index, data, base, results, nowMs); err != nil {
		return results, err
	}
	st.dedup.sweep(nowMs)
	if c.Type == CmdTxnEnd {
		if !c.TxnCommit {
			st.txn.rollBack(c.TxnHalf, nowMs)
		}
		st.txn.decide(c.TxnHalf, nowMs)
	}
	return results, nil
}

// Snapshot implements raft.FSM: a small marker (tables + each queue's next
// offset); the messages stay in the CommitLog.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	// Raft would record its own applied index, past the entry this FSM
	// did not apply: after a restart the entry would never be retried.
	if s := f.stopped.Load(); s != nil {
		return nil, s
	}
	f.st.mu.RLock()
	img := f.st.imageLocked()
	f.st.mu.RUnlock()
	for _, cq := range f.ms.ConsumeQueues().All() {
		img.Queues = append(img.Queues, queueNext{Topic: cq.Topic(), QueueID: cq.QueueID(), Next: cq.MaxOffset()})
	}
	img.DeletedTopics = f.ms.ConsumeQueues().DeletedTopics()
	snap := &fsmSnapshot{img: img, logs: f.logs, ms: f.ms, timers: f.timers}
	if f.timers != nil {
		cut, err := f.timers.Cut()
		if err != nil {
			return nil, err
		}
		snap.timerCut = cut
	}
	return snap, nil
}

// Restore implements raft.FSM. It runs at startup (the local snapshot) and
// after InstallSnapshot; the log position is recorded first and applied
// once the tables are restored when the log is empty (a member that joined
// with no state learns at once what it lacks before the snapshot, for its
// catch-up), else at the next restore-shaped log operation.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if s := f.stopped.Load(); s != nil {
		return s
	}
	p, err := raftlog.ReadSnapshotPosition(rc)
	if err != nil {
		return err
	}
	if err := f.logs.RestoreFrom(p); err != nil {
		return err
	}
	var img stateImage
	dec := json.NewDecoder(rc)
	if err := dec.Decode(&img); err != nil {
		return fmt.Errorf("broker: decode snapshot tables: %w", err)
	}
	// Queues behind the snapshot continue where the leader's were; at
	// startup the local queues are at or past it and stay as they are.
	cqs := f.ms.ConsumeQueues()
	// Deletes the image knows of and this store does not are carried
	// out first: the queues kept of such a topic are the deleted one's.
	// An image queue of a topic this store knows a later delete of (a
	// restart from a snapshot taken before it) belongs to the deleted
	// topic; the local queues, the new topic's, stay as they are.
	if err := cqs.RestoreDeletedTopics(img.DeletedTopics); err != nil {
		return err
	}
	for _, q := range img.Queues {
		if img.DeletedTopics[q.Topic] < cqs.DeletedAt(q.Topic) {
			continue
		}
		if err := cqs.StartQueueAt(q.Topic, q.QueueID, q.Next); err != nil {
			return err
		}
	}
	f.st.mu.Lock()
	f.st.loadLocked(img)
	f.st.mu.Unlock()
	if err := f.restoreTimerImage(io.MultiReader(dec.Buffered(), rc)); err != nil {
		return err
	}
	if err := f.restoreTimers(img); err != nil {
		return err
	}
	if err := f.logs.SettleRestore(); err != nil {
		return err
	}
	f.applied.Store(p.Index)
	f.log.Info("restored snapshot", zap.Uint64("index", p.Index), zap.Int64("logPosition", p.EndPos),
		zap.Int("topics", len(img.Topics)), zap.Int("queues", len(img.Queues)))
	return nil
}

type fsmSnapshot struct {
	img    stateImage
	logs   *raftlog.LogStore
	ms     *store.MessageStore
	timers *timerindex.Index
	// timerCut is the timer index at the snapshot (timer_image.go).
	timerCut timerindex.Cut
}

// Persist writes the log position record, the tables, then the timer
// index's image. The ConsumeQueues, index and timer files are made durable
// before the sink closes: after a restart Raft only re-applies entries
// after the snapshot, so every unit below it must be on disk. The timer
// image is read before the timer Sync, which removes the files advances
// set aside since the cut.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.ms.FlushLogics()
	if err == nil {
		err = s.logs.WritePositionFor(sink)
	}
	if err == nil {
		err = json.NewEncoder(sink).Encode(&s.img)
	}
	if err == nil {
		err = s.writeTimerImage(sink)
	}
	if err == nil && s.timers != nil {
		err = s.timers.Sync()
	}
	if err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}
