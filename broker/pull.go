package broker

import (
	"context"
	"strings"
	"time"

	"github.com/raftmq/raftmq/broker/filter"
	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361) (RocketMQ
// PullMessageProcessor).

// maxPullSubscriptionLength bounds the expression a pull carries (sysFlag
// PullFlagSubscription) and the one a heartbeat registers
// (checkHeartbeatSubscriptions): a tag expression is parsed into a set on
// every pull, and a held pull keeps a posted text for its suspend timeout. SQL92 is bounded tighter by the
// compiler (filter.MaxExprLen).
const maxPullSubscriptionLength = 16 << 10

// parseTagExpression turns "a || b" into a tags filter ("*" or "" = all).
func parseTagExpression(expr string) store.TagsFilter {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return store.TagsFilter{}
	}
	var tags []string
	for _, t := range strings.Split(expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return store.NewTagsFilter(tags...)
}

func (c *Controller) processPull(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	if conn.Closed() {
		// Queued behind a client that is gone (one that never read
		// its answers and was closed): no one to read this answer.
		return nil, nil
	}
	var h wire.PullMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	if r := checkTopic(h.Topic); r != nil {
		return r, nil
	}
	if r := checkGroup(h.ConsumerGroup); r != nil {
		return r, nil
	}
	if sg, ok := c.rep.State().SubscriptionGroup(h.ConsumerGroup); ok {
		if !sg.ConsumeEnable {
			return response(remoting.ResponseNoPermission, "subscription group no permission, %s: consumeEnable is false on broker %s",
				h.ConsumerGroup, c.cfg.BrokerName), nil
		}
		if !sg.ConsumeBroadcastEnable && c.clients.broadcasting(h.ConsumerGroup) {
			return response(remoting.ResponseNoPermission, "the consumer group[%s] can not consume by broadcast way: consumeBroadcastEnable is false on broker %s",
				h.ConsumerGroup, c.cfg.BrokerName), nil
		}
	} else if r := c.uncreatedGroup(h.ConsumerGroup); r != nil {
		// Without auto-creation a group must be created before it
		// consumes. A follower may not have applied the creation yet:
		// only the leader says so (as for a topic below).
		if !c.rep.IsLeader() {
			return c.notLeader(), nil
		}
		return r, nil
	}
	tc, ok := c.rep.State().Topic(h.Topic)
	// Only read queues are served (RocketMQ): readQueueNums below
	// writeQueueNums stops consumption of the queues beyond it.
	if !ok || h.QueueID < 0 || int(h.QueueID) >= tc.ReadQueueNums {
		if !c.rep.IsLeader() {
			// A follower may not have applied the topic's creation or its
			// new queues yet (one restarted moments ago replays its log):
			// only the leader says a topic or queue does not exist, which
			// makes clients back off for seconds. Send the pull there.
			return c.notLeader(), nil
		}
		if !ok {
			return response(remoting.ResponseTopicNotExist, "topic %s does not exist on broker %s", h.Topic, c.cfg.BrokerName), nil
		}
		return response(remoting.ResponseSystemError, "queueId[%d] is illegal: topic %s has %d read queues on broker %s",
			h.QueueID, h.Topic, tc.ReadQueueNums, c.cfg.BrokerName), nil
	}
	if tc.Perm&wire.PermRead == 0 {
		return response(remoting.ResponseNoPermission, "the topic[%s] pulling message is forbidden: perm %d has no read bit on broker %s",
			h.Topic, tc.Perm, c.cfg.BrokerName), nil
	}
	if h.SysFlag&wire.PullFlagSubscription != 0 && len(h.Subscription) > maxPullSubscriptionLength {
		return c.refuse("pullSubscriptionLength", remoting.ResponseSubscriptionParseFailed,
			"the subscription expression the pull carries is %d bytes, longer than %d", len(h.Subscription), maxPullSubscriptionLength), nil
	}
	f, refused := c.pullFilter(&h)
	if refused != nil {
		return refused, nil
	}
	p := &pullRequest{conn: conn, req: req, h: h, filter: f}
	// A piggybacked commit is skipped while a delete holds the offsets
	// (offsetCoalescer.tables) rather than holding the pull: the consumer
	// commits its position again with its next pull or persist.
	// At a follower it is passed on to the leader: RocketMQ's clients
	// clear the flag on pulls to an address their route names a follower,
	// so one here comes from a route that still names this member leader.
	commit := h.SysFlag&wire.PullFlagCommitOffset != 0 && h.CommitOffset >= 0
	switch {
	case commit && !c.rep.IsLeader():
		c.offsets.forward(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	case commit && c.offsets.tables.TryRLock():
		if c.checkOffsetCommit(ctx, h.ConsumerGroup, h.Topic, h.QueueID, false) == nil {
			c.offsets.add(OffsetCommit{Group: h.ConsumerGroup, Topic: h.Topic, QueueID: h.QueueID, Offset: h.CommitOffset})
		}
		c.offsets.tables.RUnlock()
	}
	return c.pull(p, true), nil
}

// pullFilter chooses the filter of a pull (RocketMQ
// PullMessageProcessor's subscription checks), or the answer refusing it.
//
// The expression comes with the pull only when the client posts it
// (sysFlag PullFlagSubscription); normally it is the one the group's
// heartbeat registered. A tag pull with neither (a heartbeat not seen yet,
// e.g. right after a failover) gets everything: the official clients
// re-filter by tag anyway, and SUBSCRIPTION_NOT_EXIST would make them back
// off for 3 s. A SQL92 pull with neither gets SUBSCRIPTION_NOT_EXIST:
// clients do not re-filter SQL92, so everything would be wrong.
//
// The official Go push consumer always says TAG in its pulls, with the
// expression only under PostSubscriptionWhenPull; when the group's
// heartbeat subscribed to the topic with SQL92 and the posted text is that
// subscription's, SQL92 is the type.
func (c *Controller) pullFilter(h *wire.PullMessageRequestHeader) (store.MessageFilter, *remoting.RemotingCommand) {
	hb, compiled, known := c.clients.subscription(h.ConsumerGroup, h.Topic)
	own := h.SysFlag&wire.PullFlagSubscription != 0
	var expr, exprType string
	switch {
	case own:
		expr, exprType = h.Subscription, h.ExpressionType
		switch {
		case known && isTagType(exprType) && isSQL92(hb.ExpressionType) && expr == hb.SubString:
			exprType = hb.ExpressionType
		case !known && isTagType(exprType) && c.cfg.EnablePropertyFilter:
			// The posted text may be SQL92 the client labels TAG; read as
			// tags it would match nothing and the offset would move past
			// messages the consumer wants. Everything is safe instead:
			// tag consumers re-filter on their side.
			expr = ""
		}
	case known && h.SubVersion > hb.SubVersion:
		// The consumer's subscription is newer than its group's last
		// heartbeat said: filtering by the old one would skip messages it
		// now wants and move its offset past them (RocketMQ's answer; the
		// client pulls again after its next heartbeat).
		return nil, response(remoting.ResponseSubscriptionNotLatest,
			"the subscription of consumer group %s to topic %s on broker %s is subVersion %d, older than the pull's %d: retry after the next heartbeat",
			h.ConsumerGroup, h.Topic, c.cfg.BrokerName, hb.SubVersion, h.SubVersion)
	case known:
		expr, exprType = hb.SubString, hb.ExpressionType
	case isSQL92(h.ExpressionType):
		exprType = h.ExpressionType
	}
	switch {
	case isTagType(exprType):
		return parseTagExpression(expr), nil
	case !isSQL92(exprType):
		return nil, response(remoting.ResponseSubscriptionParseFailed, "expression type %s is not supported; use TAG or SQL92", exprType)
	case !c.cfg.EnablePropertyFilter:
		return nil, c.propertyFilterOff()
	}
	var x *filter.Expr
	switch {
	case own:
		var err error
		if x, err = c.filters.Compile(expr); err != nil {
			return nil, response(remoting.ResponseSubscriptionParseFailed, "%v", err)
		}
	case !known:
		return nil, response(remoting.ResponseSubscriptionNotExist,
			"consumer group %s has no subscription to topic %s on broker %s yet (no heartbeat); retry after the next heartbeat",
			h.ConsumerGroup, h.Topic, c.cfg.BrokerName)
	case compiled == nil:
		// Unreachable: a heartbeat's SQL92 subscription is always compiled.
		return nil, response(remoting.ResponseFilterDataNotExist, "no compiled SQL92 subscription of group %s to topic %s",
			h.ConsumerGroup, h.Topic)
	case compiled.err != nil:
		return nil, response(remoting.ResponseFilterDataNotExist, "the SQL92 subscription of group %s to topic %s (subVersion %d) does not compile: %v",
			h.ConsumerGroup, h.Topic, compiled.version, compiled.err)
	default:
		x = compiled.expr
	}
	if strings.HasPrefix(h.Topic, wire.RetryGroupTopicPrefix) {
		// Retry topics are not filtered (RocketMQ filterSupportRetry=false):
		// a redelivered message already matched once.
		return store.TagsFilter{}, nil
	}
	return sqlFilter{x}, nil
}

// applyBehind reports whether the replica's FSM has not applied every
// committed entry yet (CommittedApplier; false when it cannot say).
func (c *Controller) applyBehind() bool {
	a, ok := c.rep.(CommittedApplier)
	return ok && !a.CommittedApplied()
}

// pullRequest is one pull, kept while it is held.
type pullRequest struct {
	conn     *remoting.Conn
	req      *remoting.RemotingCommand
	h        wire.PullMessageRequestHeader
	filter   store.MessageFilter
	deadline time.Time
	// wakeAbove is the queue end past which the held pull is answered:
	// its offset, or the queue's end when a follower would not serve a
	// message below it (a range it no longer holds): a new message, a
	// timeout or leadership then change the answer, not the queue's
	// existing messages.
	wakeAbove int64
}

// notServedHold caps the hold of a pull a follower does not serve below
// its queue's end.
const notServedHold = time.Second

// pull runs the read and maps the store status to RocketMQ's pull codes.
// With allowSuspend a PULL_NOT_FOUND is held by the hold service instead
// (nil is returned: the answer is written later).
func (c *Controller) pull(p *pullRequest, allowSuspend bool) *remoting.RemotingCommand {
	h := &p.h
	maxNums := int(h.MaxMsgNums)
	if maxNums <= 0 || maxNums > c.cfg.MaxPullBatch {
		maxNums = c.cfg.MaxPullBatch
	}
	res, err := c.st.GetMessage(h.ConsumerGroup, h.Topic, h.QueueID, h.QueueOffset, maxNums, p.filter)
	if err != nil {
		c.noteStoreReadError(err)
		return response(remoting.ResponseSystemError, "read %s/%d at %d: %v", h.Topic, h.QueueID, h.QueueOffset, err)
	}
	leader := c.rep.IsLeader()
	if !leader && res.SkippedRemoved {
		// Only the leader moves a consumer past messages: a follower may
		// lack a range the leader retains (its snapshot install reset its
		// log and the catch-up is not done, or its queues' minimum is not
		// corrected yet after its own retention). Stepped over here, they
		// would be skipped for good. Answered as nothing to read here
		// (PULL_NOT_FOUND, offset kept, held like any such pull), as a
		// follower answers an offset outside its queue.
		res = store.GetMessageResult{Status: store.OffsetOverflowOne, NextBeginOffset: h.QueueOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}
	}
	c.stats.got(h.ConsumerGroup, h.Topic, len(res.Messages), len(res.Body))
	r := remoting.NewResponse(remoting.ResponseSuccess, "")
	code := remoting.ResponseSuccess
	switch res.Status {
	case store.Found:
		r.Body = res.Body
		c.metrics.pullMsgs.Add(float64(len(res.Messages)))
		c.metrics.pullBytes.Add(float64(len(res.Body)))
		c.metrics.traffic.countGet(h.ConsumerGroup, h.Topic, len(res.Messages), len(res.Body))
	case store.NoMatchedMessage, store.MessageWasRemoving:
		code = remoting.ResponsePullRetryImmediately
	case store.OffsetFoundNull, store.OffsetOverflowOne:
		// RocketMQ's PullMessageProcessor answers OFFSET_FOUND_NULL (no
		// ConsumeQueue file holds the offset) PULL_NOT_FOUND too, with the
		// next file's first offset as nextBeginOffset; clients take it.
		code = remoting.ResponsePullNotFound
	case store.NoMatchedLogicQueue, store.NoMessageInQueue:
		if h.QueueOffset != 0 {
			code = remoting.ResponsePullOffsetMoved
		} else {
			code = remoting.ResponsePullNotFound
		}
	case store.OffsetOverflowBadly, store.OffsetTooSmall:
		code = remoting.ResponsePullOffsetMoved
	}
	if code == remoting.ResponsePullOffsetMoved && (!leader || res.Status != store.OffsetTooSmall && c.applyBehind()) {
		// Only the leader corrects a consumer's offset, and past the end of
		// its queue only once its queues hold every committed message: a
		// follower may simply be behind (the consumer is sent back to the
		// leader), and so may the leader's FSM, which a follower can get
		// ahead of (a consumer that read there pulls past the leader's
		// end). Moved, it would consume the queue again from its end or
		// from 0; it waits instead.
		code = remoting.ResponsePullNotFound
		res.NextBeginOffset = h.QueueOffset
	}
	// Followers hold too: they apply every committed entry, whose dispatch
	// wakes the pull, and a consumer reading from one (its leader marked
	// down, or the route not refreshed yet) would otherwise pull again and
	// again as fast as the follower answers. A pull moved on (past a
	// missing ConsumeQueue file) is answered at once, so that the consumer
	// reads where it moved to without waiting out a hold.
	if code == remoting.ResponsePullNotFound && res.NextBeginOffset == h.QueueOffset && allowSuspend && h.SysFlag&wire.PullFlagSuspend != 0 {
		timeout := time.Duration(h.SuspendTimeoutMillis) * time.Millisecond
		if !c.live().LongPollingEnable {
			timeout = c.live().ShortPollingTimeMills
		}
		if timeout > 0 {
			p.wakeAbove = max(h.QueueOffset, res.MaxOffset)
			if p.wakeAbove > h.QueueOffset {
				// Not served here though the queue holds the offset (a
				// follower lacking the range): held briefly, so that the
				// client neither pulls again at once, again and again,
				// nor waits out its whole suspend before the SDK reads
				// from the leader the answer names.
				timeout = min(timeout, notServedHold)
			}
			held, limit := c.hold.hold(p, time.Now().Add(timeout))
			if held {
				return nil
			}
			if limit != "" {
				return c.heldPullRefusal(limit)
			}
		}
	}
	r.Code = code
	rh := &wire.PullMessageResponseHeader{NextBeginOffset: res.NextBeginOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}
	if !leader {
		// A consumer whose route is behind reads from a follower (a
		// RocketMQ client until its next route refresh, the SDK while the
		// old leader is marked down): name the leader, so that the SDK's
		// next pull goes there, without the follower's apply lag.
		rh.LeaderAddr = c.rep.LeaderAddr()
	}
	r.EncodeHeader(rh)
	if code == remoting.ResponsePullOffsetMoved {
		r.Remark = "the requested offset is out of the queue's range; moved to nextBeginOffset"
	}
	return r
}
