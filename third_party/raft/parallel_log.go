// Copyright (c) raftmq authors
// SPDX-License-Identifier: MPL-2.0

package raft

// ParallelLogStore is a LogStore whose leader-side append comes in two
// steps, so the leader can write its own copy of new entries to disk while
// they are being replicated (Raft thesis, section 10.2.1). WriteLogs stores
// the entries where GetLog reads them, without waiting for the disk;
// SyncLogs returns once every entry up to index is durable. Followers keep
// calling StoreLogs, which must be durable when it returns.
//
// WriteLogs may be called again before the previous SyncLogs returned; the
// store decides whether that write first makes the earlier one durable.
type ParallelLogStore interface {
	LogStore
	WriteLogs(logs []*Log) error
	SyncLogs(index uint64) error
}

// dispatchParallel is dispatchLogs's second half for a ParallelLogStore:
// the replicators are notified once the entries are written, and the
// leader's match index, which counts its vote toward the commit quorum,
// moves only after its own sync. The commit index therefore never passes
// an entry that a majority of voters has not made durable, whichever
// majority that is: the leader and a follower, or two followers while the
// leader's sync is still running.
func (r *Raft) dispatchParallel(w ParallelLogStore, applyLogs []*logFuture, logs []*Log, lastIndex, term uint64) {
	if err := w.WriteLogs(logs); err != nil {
		r.logger.Error("failed to commit logs", "error", err)
		for _, applyLog := range applyLogs {
			applyLog.respond(err)
		}
		r.setState(Follower)
		return
	}
	r.setLastLog(lastIndex, term)
	for _, f := range r.leaderState.replState {
		asyncNotifyCh(f.triggerCh)
	}
	// The commitment and the step-down channel belong to this leadership;
	// a sync finishing after a step-down reaches ones nobody reads any more.
	commitment, stepDown := r.leaderState.commitment, r.leaderState.stepDown
	r.goFunc(func() {
		if err := w.SyncLogs(lastIndex); err != nil {
			// The entries never count for this server, and a leader that
			// cannot make its log durable steps down at once rather than
			// at its next dispatch, which an idle group may not send.
			r.logger.Error("failed to sync logs", "error", err, "index", lastIndex)
			asyncNotifyCh(stepDown)
			return
		}
		commitment.match(r.localID, lastIndex)
	})
}
