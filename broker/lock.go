package broker

import (
	"context"
	"encoding/json"
	"fmt"
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
// The table is bounded by what the broker group has: a lock names a
// known group and a client id of at most maxLockClientIDLength bytes, and
// only queues this brokerName's topics have are locked. Official clients
// send each broker only its own queues; any other is absent from
// lockOKMQSet, as a queue another client holds is. Expired entries are
// swept, so a client that went away leaves nothing behind.

// maxLockClientIDLength bounds the client id each lock entry keeps
// (RocketMQ clients send ip@instanceName[@unitName]).
const maxLockClientIDLength = 255

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

// reset drops every lock (a node that stops leading).
func (l *lockManager) reset() {
	l.mu.Lock()
	l.table = map[string]map[wire.MessageQueue]lockEntry{}
	l.mu.Unlock()
}

// processLockBatch locks the queues of the body this broker group has.
// Followers answer not-leader before judging the request, as offset
// commits do: a member still catching up may lack a topic or group.
func (c *Controller) processLockBatch(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var b wire.LockBatchBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return response(remoting.ResponseSystemError, "malformed lock body: %v", err), nil
	}
	if !c.rep.IsLeader() {
		return c.notLeader(), nil
	}
	if r := c.checkLockRequest(b.ConsumerGroup, b.ClientID); r != nil {
		return r, nil
	}
	mqs, why := c.lockableQueues(b.MQSet)
	locked := c.locks.tryLockBatch(b.ConsumerGroup, b.ClientID, mqs)
	r := success()
	if n := len(b.MQSet) - len(mqs); n > 0 {
		c.metrics.limitRefusals.WithLabelValues("lockBatch").Inc()
		r.Remark = fmt.Sprintf("%d of %d queues not locked: %s", n, len(b.MQSet), why)
	}
	r.Body, _ = json.Marshal(wire.LockBatchResponse{LockOKMQSet: locked})
	return r, nil
}

// checkLockRequest refuses a lock whose group name is illegal or neither
// configured nor connected here, or whose client id is empty or longer
// than maxLockClientIDLength; nil means accept.
func (c *Controller) checkLockRequest(group, clientID string) *remoting.RemotingCommand {
	if r := checkGroup(group); r != nil {
		return c.refuse("lockBatch", r.Code, "lock refused: %s", r.Remark)
	}
	switch {
	case clientID == "":
		return c.refuse("lockBatch", remoting.ResponseInvalidParameter, "lock refused: the clientId is empty")
	case len(clientID) > maxLockClientIDLength:
		return c.refuse("lockBatch", remoting.ResponseInvalidParameter,
			"lock refused: the clientId is %d bytes, longer than %d", len(clientID), maxLockClientIDLength)
	}
	if _, ok := c.rep.State().SubscriptionGroup(group); !ok {
		if !c.clients.hasGroup(group) {
			return c.refuse("lockBatch", remoting.ResponseSubscriptionGroupNotExist,
				"lock refused: consumer group %s is neither configured nor connected on broker %s", group, c.cfg.BrokerName)
		}
	}
	return nil
}

// lockableQueues returns the queues of mqs this broker group has, and why
// the first one left out was.
func (c *Controller) lockableQueues(mqs []wire.MessageQueue) (ok []wire.MessageQueue, why string) {
	st := c.rep.State()
	ok = make([]wire.MessageQueue, 0, len(mqs))
	for _, mq := range mqs {
		var reason string
		if mq.BrokerName != c.cfg.BrokerName {
			reason = fmt.Sprintf("a queue of broker %.255s sent to broker %s", mq.BrokerName, c.cfg.BrokerName)
		} else if tc, found := st.Topic(mq.Topic); !found {
			reason = fmt.Sprintf("topic %.255s does not exist on broker %s", mq.Topic, c.cfg.BrokerName)
		} else if n := queueCount(max(tc.ReadQueueNums, tc.WriteQueueNums)); mq.QueueID < 0 || int(mq.QueueID) >= n {
			reason = fmt.Sprintf("queueId %d out of 0..%d of topic %s", mq.QueueID, n-1, mq.Topic)
		}
		if reason == "" {
			ok = append(ok, mq)
		} else if why == "" {
			why = reason
		}
	}
	return ok, why
}

func (c *Controller) processUnlockBatch(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var b wire.LockBatchBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return response(remoting.ResponseSystemError, "malformed unlock body: %v", err), nil
	}
	c.locks.unlockBatch(b.ConsumerGroup, b.ClientID, b.MQSet)
	return success(), nil
}
