package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/raftlog"
)

// fsm applies committed entries: Messages entries become ConsumeQueue and
// index units (queue offsets assigned here, dense and identical on every
// replica), other commands change the replicated tables. Raft calls Apply,
// Snapshot and Restore from one goroutine.
type fsm struct {
	logs  *raftlog.LogStore
	ms    *store.MessageStore
	st    *state
	log   *zap.Logger
	onErr func(error) // a failed Apply is fatal for this replica

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

// Apply implements raft.FSM. LogNoop/Configuration/Barrier entries never
// reach it (Raft filters them); an undecodable command is logged and
// skipped so every replica skips it alike.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	defer f.applied.Store(l.Index)
	c, err := DecodeCommand(l.Extensions, l.Data)
	if err != nil {
		f.log.Error("skipping undecodable raft entry", zap.Uint64("index", l.Index), zap.Error(err))
		return &applyResult{err: err}
	}
	nowMs := l.AppendedAt.UnixMilli()
	if c.Type == CmdMessages {
		res, err := f.applyMessages(l, c, nowMs)
		if err != nil {
			// The CommitLog holds the entry but its units could not be
			// written: this replica can no longer serve consistent reads.
			f.log.Error("apply of a messages entry failed", zap.Uint64("index", l.Index), zap.Error(err))
			if f.onErr != nil {
				f.onErr(err)
			}
		}
		return &applyResult{results: res, err: err}
	}
	f.st.mu.Lock()
	f.st.applyLocked(c, nowMs)
	f.st.mu.Unlock()
	return &applyResult{}
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
		err := f.ms.Reput().DispatchRequests(pending)
		pending = pending[:0]
		return err
	}
	idem := c.Idem
	st := f.st
	st.mu.Lock()
	defer st.mu.Unlock()
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
	st.dedup.sweep(nowMs)
	return results, nil
}

// Snapshot implements raft.FSM: a small marker (tables + each queue's next
// offset); the messages stay in the CommitLog.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.st.mu.RLock()
	img := f.st.imageLocked()
	f.st.mu.RUnlock()
	for _, cq := range f.ms.ConsumeQueues().All() {
		img.Queues = append(img.Queues, queueNext{Topic: cq.Topic(), QueueID: cq.QueueID(), Next: cq.MaxOffset()})
	}
	return &fsmSnapshot{img: img, logs: f.logs, ms: f.ms}, nil
}

// Restore implements raft.FSM. It runs at startup (the local snapshot) and
// after InstallSnapshot; the log position is only recorded (raftlog applies
// it at the next restore-shaped log operation).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	p, err := raftlog.ReadSnapshotPosition(rc)
	if err != nil {
		return err
	}
	if err := f.logs.RestoreFrom(p); err != nil {
		return err
	}
	var img stateImage
	if err := json.NewDecoder(rc).Decode(&img); err != nil {
		return fmt.Errorf("broker: decode snapshot tables: %w", err)
	}
	// Queues behind the snapshot continue where the leader's were; at
	// startup the local queues are at or past it and stay as they are.
	cqs := f.ms.ConsumeQueues()
	for _, q := range img.Queues {
		if err := cqs.StartQueueAt(q.Topic, q.QueueID, q.Next); err != nil {
			return err
		}
	}
	f.st.mu.Lock()
	f.st.loadLocked(img)
	f.st.mu.Unlock()
	f.applied.Store(p.Index)
	f.log.Info("restored snapshot", zap.Uint64("index", p.Index), zap.Int64("logPosition", p.EndPos),
		zap.Int("topics", len(img.Topics)), zap.Int("queues", len(img.Queues)))
	return nil
}

type fsmSnapshot struct {
	img  stateImage
	logs *raftlog.LogStore
	ms   *store.MessageStore
}

// Persist writes the log position record, then the tables. The
// ConsumeQueues and index are made durable first: after a restart Raft only
// re-applies entries after the snapshot, so every unit below it must be on
// disk.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.ms.FlushLogics()
	if err == nil {
		err = s.logs.WritePositionFor(sink)
	}
	if err == nil {
		err = json.NewEncoder(sink).Encode(&s.img)
	}
	if err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}
