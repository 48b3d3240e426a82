package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/wire"
)

// transactionReplica is the Replica extension transactions need (the
// Group has it; a Replica without it refuses half messages).
type transactionReplica interface {
	// EndTransaction replicates the decision of the half at CommitLog
	// offset half as one CmdTxnEnd entry holding msgs (the real message
	// and the op record, or the op record alone). applied is false when
	// the half was already decided once the entry applied: then nothing
	// became visible.
	EndTransaction(ctx context.Context, half int64, commit bool, msgs []*store.Message) (applied bool, err error)
	// UpdateTxnCheck replicates one round of the check walk.
	UpdateTxnCheck(ctx context.Context, c *txnCheck) error
	// TxnDecided, TxnDiscarded, TxnRolledBack, TxnChecks and TxnFloor read the applied
	// table.
	TxnDecided(half int64) bool
	TxnDiscarded(half int64) bool
	TxnRolledBack(half int64) bool
	TxnChecks(half int64) int32
	TxnFloor() txnView
	// TxnSizes is the table's entry counts (decided halves, halves being
	// checked), for the metrics.
	TxnSizes() (decided, checking int)
}

var _ transactionReplica = (*Group)(nil)

// EndTransaction implements transactionReplica. The entry bypasses the
// batcher: it is proposed on its own so its messages and the decision
// apply together or not at all.
func (g *Group) EndTransaction(ctx context.Context, half int64, commit bool, msgs []*store.Message) (bool, error) {
	if !g.IsLeader() {
		return false, g.notLeaderErr(nil)
	}
	if err := g.ms.CheckDiskWritable(); err != nil {
		return false, err
	}
	var data []byte
	for _, m := range msgs {
		m.StoreHost = g.cfg.Store.StoreHost
		var err error
		if data, err = wire.AppendMessage(data, m); err != nil {
			return false, err
		}
	}
	ext, data, err := EncodeCommand(&Command{Type: CmdTxnEnd, TxnHalf: half, TxnCommit: commit}, data)
	if err != nil {
		return false, err
	}
	timeout := g.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	resp, err := g.applyLog(raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext}, timeout)
	if err != nil {
		return false, err
	}
	r, ok := resp.(*applyResult)
	if !ok {
		return false, fmt.Errorf("%w: unexpected apply response %T", ErrBadCommand, resp)
	}
	if r.err != nil {
		return false, fmt.Errorf("%w: apply: %w", store.ErrServiceNotAvailable, r.err)
	}
	return len(r.results) > 0 && !r.results[0].Duplicate, nil
}

// UpdateTxnCheck implements transactionReplica.
func (g *Group) UpdateTxnCheck(ctx context.Context, c *txnCheck) error {
	return g.proposeCommand(ctx, &Command{Type: CmdTxnCheck, TxnCheck: c})
}

// TxnDecided implements transactionReplica.
func (g *Group) TxnDecided(half int64) bool { return g.st.txnDecided(half) }

// TxnDiscarded implements transactionReplica.
func (g *Group) TxnDiscarded(half int64) bool { return g.st.txnDiscarded(half) }

// TxnRolledBack implements transactionReplica.
func (g *Group) TxnRolledBack(half int64) bool { return g.st.txnRolledBack(half) }

// TxnChecks implements transactionReplica.
func (g *Group) TxnChecks(half int64) int32 { return g.st.txnChecks(half) }

// TxnFloor implements transactionReplica.
func (g *Group) TxnFloor() txnView { return g.st.txnFloor() }

// TxnSizes implements transactionReplica.
func (g *Group) TxnSizes() (decided, checking int) { return g.st.txnSizes() }

// txnPin is the CommitLog position of the oldest half the check walk has
// not passed (math.MaxInt64: none): retention deletes no segment that
// reaches past it, as for timers (timerPin). A half deleted before its
// END_TRANSACTION cannot be committed, so a producer told its half was
// stored would commit a message nobody receives (a transaction kept open
// past fileReservedTime by a large transactionCheckMax, or a disk-full
// forced deletion). RocketMQ keeps an undecided half young by writing it
// again at every check; here the replicated walk floor, which every
// member holds, marks the oldest half that may still be committed. Halves
// decided above the floor stay pinned until the next walk passes them.
func (g *Group) txnPin() int64 {
	return queuePin(g.ms.ConsumeQueues().Get(wire.TopicTransHalf, 0), g.st.txnFloor().FloorQueue)
}
