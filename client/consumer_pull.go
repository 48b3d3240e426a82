package client

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// pullLoop long-polls one queue until it is dropped
// (DefaultMQPushConsumerImpl.pullMessage + its PullCallback): flow control
// first, then a suspended pull; FOUND messages go to the hook's deliver,
// NOT_FOUND / NO_MATCHED pull again at once from nextBeginOffset,
// OFFSET_MOVED jumps to nextBeginOffset and commits it (unless the
// application commits: lite pull without AutoCommit), not-leader answers
// are followed at once, a failure that moved the group's reads to another
// member (a dead member marked down) pulls there at once, a message that
// cannot be decoded goes to the DLQ (settleUndecodable), anything else
// backs off PullBackoff. A follower's answer naming the leader moves the
// next pull there.
func (c *consumerCore) pullLoop(pq *processQueue, offset int64) {
	mq := pq.mq
	key := "pull:" + mq.String()
	// quickRetries counts failed pulls retried at once on another member
	// since the last answer; bounded so dead members are not spun on.
	quickRetries := 0
	for pq.ctx.Err() == nil {
		if c.flowControlled(pq) {
			if !wait(pq.ctx, c.cfg.flowControlDelay) {
				return
			}
			continue
		}
		if c.hooks.orderly && c.cfg.model == Clustering && !pq.isLocked(c.cfg.common.now(), lockMaxLiveTime) {
			// Orderly pulls need the lock (pullMessage: "not locked, pull later").
			if !wait(pq.ctx, c.cfg.lockRetryDelay) {
				return
			}
			continue
		}
		addr := c.routes.brokerAddr(mq.BrokerName)
		if addr == "" {
			c.requestRefresh(mq.Topic)
			if !wait(pq.ctx, c.cfg.pullBackoff) {
				return
			}
			continue
		}
		// No consumed offset rides on the pull (the commit flag the Java
		// push consumer sets): brokers run pulls and offset updates on
		// separate pools and keep the last offset they get, so a pull
		// sent before Close's or a hand-over's commit can be processed
		// after it and move the group's offset back; the next consumer
		// would then get those messages again. Offsets go only through
		// sendOffsets, whose sends of a group are ordered.
		req := &PullRequest{
			Group:         c.cfg.group,
			Queue:         mq,
			Offset:        offset,
			MaxMsgNums:    c.cfg.pullBatchSize,
			SysFlag:       wire.PullFlagSuspend | wire.PullFlagSubscription,
			SuspendMillis: c.cfg.pollSuspend.Milliseconds(),
			Subscription:  c.pullSubscription(mq.Topic),
		}
		// pollTimeout (suspend + margin) is the outer bound of a long poll;
		// movePulls cuts it short when addr stops being where the group is
		// read from (a new leader in the route, addr marked down).
		tctx, cancelT := context.WithTimeout(pq.ctx, c.cfg.pollTimeout)
		pctx, cancel := context.WithCancelCause(tctx)
		c.trackPull(pq, mq.BrokerName, addr, cancel)
		res, err := PullMessage(pctx, c.rc, addr, req)
		c.untrackPull(pq)
		moved := errors.Is(context.Cause(pctx), errPullMoved)
		cancel(nil)
		cancelT()
		if pq.ctx.Err() != nil {
			return
		}
		var ue *UndecodableMessageError
		if errors.As(err, &ue) {
			// The broker answered; the message at the queue's head cannot
			// be decoded (consumer_undecodable.go).
			quickRetries = 0
			c.clearWarn(key)
			if !c.settleUndecodable(pq, ue) {
				if !wait(pq.ctx, c.cfg.sendBackRetry) {
					return
				}
				continue
			}
			next := ue.Message.QueueOffset + 1
			pq.pass(ue.Message.QueueOffset)
			c.correctOffset(pq, next)
			offset = next
			continue
		}
		if err != nil && moved {
			// Abandoned for the group's current address: pull again at
			// once, from the same offset (nothing of this pull was used).
			c.log.Debug("long poll moved off a member that no longer serves the group",
				zap.Stringer("queue", mq), zap.String("broker", addr))
			continue
		}
		if err != nil {
			if errors.Is(err, remoting.ErrTimeout) {
				// Not even a NOT_FOUND within suspend + margin: the member
				// is stalled (paused, partitioned) with its connection up.
				// Read elsewhere for a while; followers serve pulls too.
				c.routes.markDown(mq.BrokerName, addr, c.routes.downFor)
				c.requestRefresh(mq.Topic)
			}
			if c.followLeader(mq.BrokerName, addr, err) {
				continue // pull again from the leader it named, at once
			}
			if next := c.routes.brokerAddr(mq.BrokerName); next != "" && next != addr && quickRetries < maxBrokerHops {
				// The member is down (a killed leader refuses connections)
				// and another one serves the group's reads: pull there at
				// once instead of stalling this queue for PullBackoff.
				quickRetries++
				continue
			}
			c.warnOnce(key, "pull failed; backing off", zap.Stringer("queue", mq), zap.String("broker", addr), zap.Error(err))
			if !wait(pq.ctx, c.cfg.pullBackoff) {
				return
			}
			continue
		}
		quickRetries = 0
		c.clearWarn(key)
		c.routes.markUp(mq.BrokerName, addr)
		if res.LeaderAddr != "" && c.routes.brokerAddr(mq.BrokerName) == addr {
			// A follower answered: the route is behind the group's leader.
			// Read from the leader it names from the next pull on, as the
			// route will say once refreshed (unless it failed us lately:
			// see followHint).
			c.followHint(mq.BrokerName, addr, res.LeaderAddr)
		}
		switch res.Status {
		case PullFound:
			offset = res.NextBeginOffset
			if len(res.Messages) == 0 {
				// Everything was filtered out client-side.
				c.correctOffset(pq, offset)
				continue
			}
			for _, m := range res.Messages {
				restoreRetryTopic(m, c.cfg.group)
			}
			if !c.hooks.deliver(pq, res.Messages) {
				return
			}
		case PullNoNewMsg, PullNoMatchedMsg:
			offset = res.NextBeginOffset
			c.correctOffset(pq, offset)
		case PullOffsetIllegal:
			c.log.Warn("pull offset outside the queue; moving on", zap.Stringer("queue", mq),
				zap.Int64("offset", offset), zap.Int64("nextBeginOffset", res.NextBeginOffset))
			if res.NextBeginOffset <= pq.highest() {
				c.restartQueue(pq, res.NextBeginOffset)
				return
			}
			offset = res.NextBeginOffset
			// A lite pull consumer without AutoCommit commits only what
			// Commit says: the jump moves where it pulls, as
			// DefaultLitePullConsumerImpl's updatePullOffset does.
			if c.autoCommits() {
				c.commitJump(pq, offset)
			}
		}
	}
}

// commitJump stores and commits offset, where an OFFSET_ILLEGAL answer
// moved pq's pulls: through the group's send token, after any older send
// of the queue's offset in progress, and only while the queue is still
// ours (a hand-over sends its own).
func (c *consumerCore) commitJump(pq *processQueue, offset int64) {
	c.store.Update(pq.mq, offset, false)
	ctx, cancel := context.WithTimeout(pq.ctx, c.cfg.common.requestTimeout)
	defer cancel()
	_, _ = c.sendOffsets(ctx, []MessageQueue{pq.mq}, true, true)
}

// restartQueue starts pq's queue afresh at off, where an OFFSET_ILLEGAL
// answer moved its pulls, when off is at or below a message pq already
// holds: the queue started over (a RocketMQ topic deleted and created
// again, a wiped store), and the messages now at those offsets are new.
// pq would take them for copies of the ones it had (put) and commit one
// past the old queue's last offset, so it is dropped and a new process
// queue starts at off, as a broker's reset does (RocketMQ's push
// consumer drops the process queue on OFFSET_ILLEGAL and rebuilds it):
// listener calls in progress are awaited as restartAt says, and off is
// committed unless the application commits (lite pull without
// AutoCommit: its next Commit sends off, unless it polled since). A
// queue handed over meanwhile is left to its hand-over.
func (c *consumerCore) restartQueue(pq *processQueue, off int64) {
	c.rebalanceMu.Lock()
	defer c.rebalanceMu.Unlock()
	mq := pq.mq
	c.mu.Lock()
	owned := c.pqs[mq] == pq
	if owned {
		delete(c.pqs, mq)
		c.seeks[mq] = off
	}
	c.mu.Unlock()
	if !owned {
		return
	}
	c.log.Warn("the queue started over below the offsets consumed here; consuming it afresh from its start",
		zap.Stringer("queue", mq), zap.Int64("offset", off), zap.Int64("highestCached", pq.highest()))
	pq.drop()
	if c.hooks.reset != nil {
		c.hooks.reset(mq, off)
	}
	store, commit := func() {}, func() {}
	if c.autoCommits() {
		// Pending until a broker takes it, so that Close sends it should
		// the consumer close before the queue starts again.
		store = func() { c.recordCommits(map[MessageQueue]int64{mq: off}) }
		commit = func() { c.commitReset(c.ctx, mq) }
	}
	c.restartAt(c.ctx, pq, store, commit)
}

// errPullMoved is the cancel cause of a long poll that movePulls abandoned.
var errPullMoved = errors.New("client: long poll moved to the broker group's current address")

// pullCall is a long poll in flight, for movePulls.
type pullCall struct {
	brokerName, addr string
	cancel           context.CancelCauseFunc
}

// trackPull records pq's long poll to addr. A route change that landed
// after the pull loop chose addr cancels it at once.
func (c *consumerCore) trackPull(pq *processQueue, brokerName, addr string, cancel context.CancelCauseFunc) {
	c.mu.Lock()
	c.pulls[pq] = &pullCall{brokerName: brokerName, addr: addr, cancel: cancel}
	c.mu.Unlock()
	if cur := c.routes.brokerAddr(brokerName); cur != "" && cur != addr {
		cancel(errPullMoved)
	}
}

func (c *consumerCore) untrackPull(pq *processQueue) {
	c.mu.Lock()
	delete(c.pulls, pq)
	c.mu.Unlock()
}

// movePulls cancels the long polls of brokerName parked at an address the
// group is no longer read from, so that their pull loops ask the current
// one at once (routeManager.onAddrChange). A deposed or paused leader
// keeps its TCP connection and would otherwise hold each poll until
// pollTimeout, stalling consumption for the whole fault.
func (c *consumerCore) movePulls(brokerName string) {
	cur := c.routes.brokerAddr(brokerName)
	if cur == "" {
		return
	}
	c.mu.Lock()
	moved := 0
	from := ""
	for _, pc := range c.pulls {
		if pc.brokerName == brokerName && pc.addr != cur {
			pc.cancel(errPullMoved)
			moved++
			from = pc.addr
		}
	}
	c.mu.Unlock()
	if moved > 0 {
		c.log.Info("moving long polls to the broker group's current address",
			zap.String("brokerName", brokerName), zap.String("from", from), zap.String("to", cur), zap.Int("pulls", moved))
	}
}

// correctOffset moves the stored offset past messages the broker skipped
// (correctTagsOffset): only when nothing is cached, or a cached message
// would be skipped, and only for a push consumer: a lite pull consumer has
// nothing cached once Poll returned its messages, which the application
// may still be processing (RocketMQ's lite pull consumer moves only where
// it pulls).
func (c *consumerCore) correctOffset(pq *processQueue, next int64) {
	if c.hooks.consumeType == wire.ConsumeTypePush && !pq.hasMessages() {
		c.store.Update(pq.mq, next, true)
	}
}

// flowControlled applies the three thresholds; crossing one is logged
// once per queue until it clears.
func (c *consumerCore) flowControlled(pq *processQueue) bool {
	count, size, span := pq.stats()
	key := "flow:" + pq.mq.String()
	switch {
	case count > c.cfg.thresholdCount:
		c.warnOnce(key, "flow control: too many cached messages", zap.Stringer("queue", pq.mq), zap.Int("count", count))
	case size > c.cfg.thresholdSize:
		c.warnOnce(key, "flow control: cached bodies too large", zap.Stringer("queue", pq.mq), zap.Int64("bytes", size))
	case !c.hooks.orderly && span > c.cfg.maxSpan:
		c.warnOnce(key, "flow control: cached offsets span too wide (a message is stuck in the listener)",
			zap.Stringer("queue", pq.mq), zap.Int64("span", span))
	default:
		return false
	}
	return true
}

// pullSubscription is what a pull carries; the retry topic takes all tags.
func (c *consumerCore) pullSubscription(topic string) *SubscriptionData {
	if sd := c.subscription(topic); sd != nil {
		return sd
	}
	sd, _ := ParseTagExpression(topic, wire.SubAll, 0)
	return sd
}

// restoreRetryTopic gives a redelivered message its original topic back
// (resetRetryAndNamespace): listeners see the topic they subscribed to.
func restoreRetryTopic(m *MessageExt, group string) {
	if m.Topic != wire.RetryTopic(group) {
		return
	}
	if orig := m.Properties[wire.PropertyRetryTopic]; orig != "" {
		m.Topic = orig
	}
}

// queueOffsetAt asks mq's broker group for its max or min offset
// (remoting.RequestGetMaxOffset / RequestGetMinOffset).
func (c *consumerCore) queueOffsetAt(ctx context.Context, mq MessageQueue, code int16) (int64, error) {
	if c.routes.brokerAddr(mq.BrokerName) == "" {
		if _, err := c.routes.subscribeInfo(ctx, mq.Topic); err != nil {
			return 0, err
		}
	}
	var off int64
	err := c.onBroker(ctx, mq.BrokerName, func(ctx context.Context, addr string) error {
		var err error
		off, err = queueOffset(ctx, c.rc, addr, code, mq)
		return err
	})
	return off, err
}
