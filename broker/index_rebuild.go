package broker

import (
	"fmt"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
)

// After a crash the store's Load drops the index files newer than its
// checkpoint (they may hold torn writes) and says where indexing must
// start again (IndexService.RebuildFrom). Raft re-applies only the entries
// after the local snapshot, so the messages from there up to the snapshot
// are indexed here, from the log, before Raft starts, in CommitLog order
// through the live index (BuildIndex skips what it still holds); the
// replay indexes the rest.

// reindexBelowSnapshot indexes the messages of the entries from the one
// holding the rebuild offset through the local snapshot's index.
func (g *Group) reindexBelowSnapshot() error {
	idx := g.ms.Index()
	if idx == nil {
		return nil
	}
	from := idx.RebuildFrom()
	if from < 0 {
		return nil
	}
	snaps, err := g.snaps.List()
	if err != nil || len(snaps) == 0 {
		return err
	}
	last := snaps[0].Index
	first, err := g.logs.FirstIndex()
	if err != nil || first == 0 {
		return err
	}
	at, err := g.logs.FirstIndexFrom(from)
	if err != nil {
		return err
	}
	if at > first {
		first = at - 1 // the entry holding from starts before it
	}
	lastStored, err := g.logs.LastIndex()
	if err != nil {
		return err
	}
	last = min(last, lastStored)
	dispatch := func(r *store.DispatchRequest) error {
		return idx.BuildIndex(r.Topic, r.Keys, r.UniqKey, r.SysFlag, r.CommitLogOffset, r.StoreTimestamp)
	}
	var l raft.Log
	n := 0
	for i := first; i <= last; i++ {
		if err := g.logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("broker: re-index entry %d after a crash: %w", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		c, err := DecodeCommand(l.Extensions, l.Data)
		if err != nil {
			return fmt.Errorf("broker: re-index entry %d after a crash: %w", i, err)
		}
		if c.Type != CmdMessages && c.Type != CmdTxnEnd {
			continue
		}
		if err := g.indexEntry(dispatch, i, l.Data, l.AppendedAt.UnixMilli()); err != nil {
			return fmt.Errorf("broker: re-index after a crash: %w", err)
		}
		n++
	}
	g.log.Info("re-indexed the entries below the snapshot after the crash recovery dropped index files",
		zap.Int64("fromOffset", from), zap.Uint64("fromIndex", first), zap.Uint64("toIndex", last), zap.Int("entries", n))
	return nil
}
