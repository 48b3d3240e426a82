package broker

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42): orderly consumers lock the
// queues they were assigned so that one client at a time consumes each
// (RocketMQ RebalanceLockManager). Locks live on the leader only and
// expire after rebalanceLockMaxLiveTime (60 s) without renewal; clients
// renew every 20 s. A new leader starts with no locks: clients re-lock at
// their next lock round.
//
// Expired entries are swept, so a client that went away leaves nothing
// behind.

type lockManager struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	table map[string]map[wire.MessageQueue]lockEntry // guarded by mu; group → queue → owner
	swept time.Time                                  // guarded by mu; when sweepLocked last ran
}

type lockEntry struct {
	clientID string
	last     time.Time
}

func newLockManager(ttl time.Duration, now func() time.Time) *lockManager {
	return &lockManager{ttl: ttl, now: now, table: map[string]map[wire.MessageQueue]lockEntry{}}
}

func (l *lockManager) expired(e lockEntry, now time.Time) bool { return now.Sub(e.last) > l.ttl }

// pruneLocked drops the expired entries of group, and its map once empty.
func (l *lockManager) pruneLocked(group string, now time.Time) {
	g := l.table[group]
	for mq, e := range g {
		if l.expired(e, now) {
			delete(g, mq)
		}
	}
	if g != nil && len(g) == 0 {
		delete(l.table, group)
	}
}

// sweepLocked prunes every group, at most once per TTL: an expired entry
// outlives its expiry by at most one TTL plus the wait for a lock call,
// and a busy broker does not walk the whole table on every call.
func (l *lockManager) sweepLocked(now time.Time) {
	if now.Sub(l.swept) < l.ttl {
		return
	}
	l.swept = now
	for group := range l.table {
		l.pruneLocked(group, now)
	}
}

// tryLockBatch locks every queue that is free, expired or already held by
// clientID, and returns those.
func (l *lockManager) tryLockBatch(group, clientID string, mqs []wire.MessageQueue) []wire.MessageQueue {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
	l.pruneLocked(group, now)
	out := make([]wire.MessageQueue, 0, len(mqs))
	if len(mqs) == 0 {
		return out
	}
	g := l.table[group]
	if g == nil {
		g = map[wire.MessageQueue]lockEntry{}
		l.table[group] = g
	}
	for _, mq := range mqs {
		e, ok := g[mq]
		if !ok || e.clientID == clientID || l.expired(e, now) {
			g[mq] = lockEntry{clientID: clientID, last: now}
			out = append(out, mq)
		}
	}
	return out
}

// unlockBatch releases the queues clientID holds.
func (l *lockManager) unlockBatch(group, clientID string, mqs []wire.MessageQueue) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.table[group]
	if g == nil {
		return
	}
	for _, mq := range mqs {
		if e, ok := g[mq]; ok && e.clientID == clientID {
			delete(g, mq)
		}
	}
	if len(g) == 0 {
		delete(l.table, group)
	}
}

// reset drops every lock (a node that becomes leader starts clean).
func (l *lockManager) reset() {
	l.mu.Lock()
	l.table = map[string]map[wire.MessageQueue]lockEntry{}
	l.mu.Unlock()
}

func (c *Controller) processLockBatch(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var b wire.LockBatchBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return response(remoting.ResponseSystemError, "malformed lock body: %v", err), nil
	}
	if !c.rep.IsLeader() {
		return c.notLeader(), nil
	}
	locked := c.locks.tryLockBatch(b.ConsumerGroup, b.ClientID, b.MQSet)
	r := success()
	r.Body, _ = json.Marshal(wire.LockBatchResponse{LockOKMQSet: locked})
	return r, nil
}

func (c *Controller) processUnlockBatch(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var b wire.LockBatchBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return response(remoting.ResponseSystemError, "malformed unlock body: %v", err), nil
	}
	c.locks.unlockBatch(b.ConsumerGroup, b.ClientID, b.MQSet)
	return success(), nil
}
