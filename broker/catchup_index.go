package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/wire"
)

// The IndexFile of the backfilled range (catch-up's last phase, after the
// queues). The FSM indexed the messages after the snapshot as it applied
// them; those before it came as bytes, so they are dispatched now, entry by
// entry as the FSM would have (positions from the log, the store time from
// the entry's append time), to the store's index backfill, which writes
// through the same key code as the live index into files of its own placed
// before the live ones. Which messages the FSM indexed is read off the
// queues: a message with a unit in its queue (prepared transactional halves,
// which get none, are indexed like the FSM does); a producer's duplicate or
// a repeated END_TRANSACTION's message has none and is skipped. Paced like
// the log fetch; a restart re-runs the phase, which skips the files it
// already completed (store/index_backfill.go).

// catchupIndexEntryHook, when set (tests), runs before each entry the
// index phase reads; an error ends the attempt.
var catchupIndexEntryHook atomic.Pointer[func(ctx context.Context, g *Group, index uint64) error]

// catchupIndex indexes the messages of [st.StartIndex, st.NextIndex).
func (g *Group) catchupIndex(ctx context.Context, src catchupSource, st raftlog.BackfillState) error {
	idx := g.ms.Index()
	if idx == nil || st.StartIndex == 0 {
		return nil
	}
	g.catchup.update(func(s *CatchupStatus) { s.Phase = "index" })
	began := time.Now()
	g.backfillMu.Lock()
	defer g.backfillMu.Unlock()
	bf, err := idx.BeginBackfill()
	if err != nil {
		return err
	}
	defer bf.Close()
	pace := g.newFetchPace(ctx, src)
	// This member's own retention may have removed the oldest entries
	// since they were fetched: their messages need no index.
	from, err := g.logs.FirstIndex()
	if err != nil {
		return err
	}
	var l raft.Log
	for i := max(st.StartIndex, from); i < st.NextIndex; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if hook := catchupIndexEntryHook.Load(); hook != nil {
			if err := (*hook)(ctx, g, i); err != nil {
				return err
			}
		}
		if err := g.logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("index backfill: entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		c, err := DecodeCommand(l.Extensions, l.Data)
		if err != nil {
			return fmt.Errorf("index backfill: entry %d: %w", i, err)
		}
		if c.Type != CmdMessages && c.Type != CmdTxnEnd {
			continue
		}
		if err := g.indexEntry(bf.Dispatch, i, l.Data, l.AppendedAt.UnixMilli()); err != nil {
			return err
		}
		if err := pace.wait(ctx, len(l.Data)); err != nil {
			return err
		}
	}
	if err := bf.Commit(); err != nil {
		return err
	}
	g.catchup.update(func(s *CatchupStatus) { s.Indexed += bf.Indexed })
	g.log.Info("catch-up: indexed the backfilled messages", zap.Int64("messages", bf.Indexed), zap.Duration("took", time.Since(began)))
	return nil
}

// indexEntry dispatches the messages of one Messages entry that the FSM
// dispatched.
func (g *Group) indexEntry(dispatch func(*store.DispatchRequest) error, index uint64, data []byte, nowMs int64) error {
	pos, h, err := g.logs.LocateHeader(index)
	if err != nil {
		return fmt.Errorf("index backfill: locate entry %d: %w", index, err)
	}
	base := pos + int64(h.DataOffset())
	for off := 0; off < len(data); {
		req, size, err := store.CheckAndDecode(data[off:])
		if err != nil {
			return fmt.Errorf("index backfill: entry %d message at data offset %d: %w", index, off, err)
		}
		req.CommitLogOffset = base + int64(off)
		req.StoreTimestamp = nowMs
		off += size
		if req.Blank {
			continue
		}
		if req.SysFlag&wire.SysFlagTransMask != wire.SysFlagTransPrepared {
			cq := g.ms.ConsumeQueues().Get(req.Topic, req.QueueID)
			if cq == nil {
				continue
			}
			ok, err := cq.HasUnitAt(req.CommitLogOffset)
			if err != nil {
				return fmt.Errorf("index backfill: %s/%d at %d: %w", req.Topic, req.QueueID, req.CommitLogOffset, err)
			}
			if !ok {
				continue
			}
		}
		if err := dispatch(&req); err != nil {
			return err
		}
	}
	return nil
}
