package broker

import (
	"fmt"
	"strconv"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/timerindex"
	"github.com/raftmq/raftmq/wire"
)

// The FSM side of timer messages (see timer.go for the whole design).
// Every replica writes its timer index from the log, deterministically:
// the bucket of a record depends only on the message and the replicated
// cursor at that point of the log. Effects of entries at or below the
// index's applied mark are already in the files and are not written again
// when Raft re-applies the log after a restart; an entry's writes sit
// between Begin and SetApplied, so a restart undoes those of an entry cut
// short and the files stay byte-identical to the peers' (the cursor counts
// records by position).

// indexTimersLocked adds an index record for every timer message of one
// applied Messages entry. st.mu is held (the cursor is read under it).
func (f *fsm) indexTimersLocked(index uint64, data []byte, base int64, results []PutResult, nowMs int64) error {
	if f.timers == nil {
		return nil
	}
	var byBucket map[int64][]timerindex.Record
	var order []int64
	for i := range results {
		req := &f.pool[i]
		if results[i].Duplicate || req.Topic != wire.TopicTimer {
			continue
		}
		if byBucket == nil {
			if index <= f.timers.Applied() {
				return nil
			}
			byBucket = map[int64][]timerindex.Record{}
		}
		deliverMs := nowMs
		if m, _, err := wire.DecodeMessage(data[req.CommitLogOffset-base:], false); err == nil {
			if v, err := strconv.ParseInt(m.Properties[wire.PropertyTimerOutMs], 10, 64); err == nil {
				deliverMs = v
			}
		}
		// A record for a bucket the cursor has passed goes to the cursor's
		// bucket, which the leader is still reading.
		b := max(timerindex.BucketOf(deliverMs), f.st.timer.Bucket)
		if _, ok := byBucket[b]; !ok {
			order = append(order, b)
		}
		byBucket[b] = append(byBucket[b], timerindex.Record{DeliverMs: deliverMs, QueueOffset: req.ConsumeQueueOffset})
	}
	if byBucket == nil {
		return nil
	}
	if err := f.timers.Begin(index, order...); err != nil {
		return err
	}
	for _, b := range order {
		if err := f.timers.Append(b, byBucket[b]); err != nil {
			return err
		}
	}
	return f.timers.SetApplied(index)
}

// applyTimerProgress applies a CmdTimerProgress entry: the cursor moves
// only from the position the proposer saw (an entry of an earlier leader
// committed late changes nothing), and an advance to a later bucket moves
// the records that arrived after the leader looked into the new bucket.
// An index write that fails stops the FSM like a failed dispatch.
func (f *fsm) applyTimerProgress(l *raft.Log, p TimerProgress) any {
	st := f.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timer != p.From || !p.valid() {
		f.applied.Store(l.Index)
		return &applyResult{}
	}
	st.timer = p.To
	if f.timers != nil && p.To.Bucket != p.From.Bucket && l.Index > f.timers.Applied() {
		err := f.timers.Begin(l.Index)
		if err == nil {
			err = f.timers.Advance(p.From.Bucket, p.Done, p.To.Bucket)
		}
		if err == nil {
			err = f.timers.SetApplied(l.Index)
		}
		if err != nil {
			stop := &ApplyStoppedError{Index: l.Index, Err: fmt.Errorf("timer index: %w", err)}
			f.stopped.Store(stop)
			f.log.Error("timer index write failed: this member stops applying; restart it once the cause is fixed",
				zap.Uint64("index", l.Index), zap.Error(err))
			return &applyResult{err: stop}
		}
	}
	f.applied.Store(l.Index)
	return &applyResult{}
}

// restoreTimers drops the buckets the restored cursor has passed: after an
// InstallSnapshot they hold only records this replica indexed before it
// fell behind, all delivered since.
func (f *fsm) restoreTimers(img stateImage) error {
	if f.timers == nil || img.Timer == nil {
		return nil
	}
	return f.timers.DropBelow(img.Timer.Bucket)
}
