package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Consumer offsets and queue offsets: QUERY_CONSUMER_OFFSET (14),
// UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
// SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32),
// GET_ALL_CONSUMER_OFFSET (43), GET_CONSUME_STATS (208).

// processQueryConsumerOffset answers the committed offset, or
// QUERY_NOT_FOUND (22) when the group never committed one for the queue
// (the client then starts per its consumeFromWhere). Only the leader says
// so: a follower may not have applied the commit yet (a member just
// added, or one re-applying its log after a restart), and a consumer told
// "none" starts at the queue's end by default, skipping what lies between.
// A follower names the leader instead, and a leader whose FSM stopped
// (ApplyStopped: commits after the stop are committed but not in its
// tables) refuses until its step-down moved leadership: official clients
// retry a refused query at the next rebalance, while "none" makes them
// skip.
func (c *Controller) processQueryConsumerOffset(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.QueryConsumerOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	off, ok := c.offsets.lookup(h.ConsumerGroup, h.Topic, h.QueueID)
	if !ok && !c.rep.IsLeader() {
		return c.notLeader(), nil
	}
	if !ok {
		if as, isAS := c.rep.(applyStopper); isAS {
			if err := as.ApplyStopped(); err != nil {
				return response(remoting.ResponseServiceNotAvailable,
					"consumer offset of group %s on %s/%d unknown here: %v; leadership is moving to another member, retry",
					h.ConsumerGroup, h.Topic, h.QueueID, err), nil
			}
		}
		if c.st.QueueStartsRecently(h.Topic, h.QueueID) {
			// As RocketMQ: a group new to a queue that still starts at 0
			// with recent messages reads it from 0. Told "none", a group
			// consuming from the last offset would skip what a queue added
			// to its topic, or a young topic, got before it arrived.
			r := success()
			r.ExtFields = map[string]string{"offset": "0"}
			return r, nil
		}
		return response(remoting.ResponseQueryNotFound, "no committed offset for group %s on %s/%d", h.ConsumerGroup, h.Topic, h.QueueID), nil
	}
	r := success()
	r.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
	return r, nil
}

// processUpdateConsumerOffset replicates a commit through Raft (the
// group batches concurrent commits into one entry). Followers answer
// not-leader (broker-plan decision 7) before judging the commit: a member
// still catching up may not have applied its topic or group yet, and a
// refusal from it would fail a commit the leader takes.
func (c *Controller) processUpdateConsumerOffset(ctx context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.UpdateConsumerOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	if !c.rep.IsLeader() {
		if req.IsOneway() {
			c.offsets.forward(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
		}
		return c.notLeader(), nil
	}
	c.offsets.tables.RLock() // until queued: see offsetCoalescer.tables
	defer c.offsets.tables.RUnlock()
	if r := c.checkOffsetCommit(ctx, h.ConsumerGroup, h.Topic, h.QueueID, true); r != nil {
		return r, nil
	}
	oc := OffsetCommit{Group: h.ConsumerGroup, Topic: h.Topic, QueueID: h.QueueID, Offset: h.CommitOffset}
	if expect, ok := req.ExtValue(extHandOverExpect); ok {
		_, deposed := req.ExtValue(extHandOverDeposed)
		if cur, added := c.offsets.addIf(oc, expect, deposed); !added {
			r := success()
			r.ExtFields = map[string]string{extHandOverKept: cur}
			return r, nil
		}
		return success(), nil
	}
	c.offsets.add(oc)
	return success(), nil
}

// extHandOverExpect marks an UPDATE_CONSUMER_OFFSET a deposed leader sends
// its successor (offsetCoalescer.handOver): the commit is taken only while
// the queue's offset here, pending or replicated, is still the value it
// names ("none": no offset), the one the deposed leader had replicated. A
// newer commit, a reset or a delete the new leader took meanwhile is thus
// never undone by an older term's commit. The answer to one that was not
// taken carries extHandOverKept, the offset kept.
const (
	extHandOverExpect = "raftmqHandOverExpect"
	extHandOverKept   = "raftmqHandOverKept"
	noOffset          = "none"
	// extHandOverDeposed marks a hand-over from a deposed leader, as
	// opposed to a commit a follower passes on (passOn): see
	// offsetCoalescer.fenced.
	extHandOverDeposed = "raftmqHandOverDeposed"
)

// checkOffsetCommit refuses a commit the broker would otherwise replicate
// and snapshot forever for a key no consumer can use: a name over
// wire.MaxGroupLength/MaxTopicLength or with illegal characters, a topic
// that does not exist (a group's retry topic exists once its consumers
// heartbeat), a group without a subscription group config, or a queue the
// topic does not have. nil means accept.
//
// The group must have a config, not only live consumers: a heartbeat
// registers any group name, and offsets outlive the consumers, so
// accepting connected groups would let one client grow the replicated
// state without bound (heartbeat new names, commit, repeat) past the
// auto-creation limits that bound configs. With create, a connected
// group's config is auto-created here as its heartbeat would have
// (prepareConsumerGroup: its creation there may have been refused by
// autoCreateTopicMaxPerSecond), within the same limits; the refusal
// names the limit.
func (c *Controller) checkOffsetCommit(ctx context.Context, group, topic string, queueID int32, create bool) *remoting.RemotingCommand {
	r := checkGroup(group)
	if r == nil {
		r = checkTopic(topic)
	}
	if r != nil {
		c.metrics.limitRefusals.WithLabelValues("offsetCommit").Inc()
		r.Remark = "offset commit refused: " + r.Remark
		return r
	}
	st := c.rep.State()
	tc, ok := st.Topic(topic)
	if !ok {
		return c.refuse("offsetCommit", remoting.ResponseTopicNotExist,
			"offset commit refused: topic %s does not exist on broker %s", topic, c.cfg.BrokerName)
	}
	n := queueCount(max(tc.ReadQueueNums, tc.WriteQueueNums))
	if queueID < 0 || int(queueID) >= n {
		return c.refuse("offsetCommit", remoting.ResponseInvalidParameter,
			"offset commit refused: queueId %d out of 0..%d of topic %s", queueID, n-1, topic)
	}
	if _, ok := st.SubscriptionGroup(group); ok {
		return nil
	}
	if _, ok := c.clients.group(group); !ok {
		return c.refuse("offsetCommit", remoting.ResponseSubscriptionGroupNotExist,
			"offset commit refused: consumer group %s is neither configured nor connected on broker %s", group, c.cfg.BrokerName)
	}
	if !create {
		return c.refuse("offsetCommit", remoting.ResponseSubscriptionGroupNotExist,
			"offset commit refused: consumer group %s is not configured on broker %s", group, c.cfg.BrokerName)
	}
	if r := c.prepareConsumerGroup(ctx, group); r != nil {
		c.metrics.limitRefusals.WithLabelValues("offsetCommit").Inc()
		r.Remark = "offset commit refused: " + r.Remark
		return r
	}
	return nil
}

func offsetResponse(off int64) *remoting.RemotingCommand {
	r := success()
	r.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
	return r
}

func (c *Controller) processGetMaxOffset(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.QueueOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	_, maxOff, err := c.st.QueueRange(h.Topic, h.QueueID)
	if err != nil {
		return response(remoting.ResponseSystemError, "max offset of %s/%d: %v", h.Topic, h.QueueID, err)
	}
	return offsetResponse(maxOff)
}

// catchingUp is the not-leader answer of a member whose full-data
// catch-up is pending (catchup.go), nil otherwise. Its queues restart at
// the snapshot it installed, after the group's oldest retained messages,
// so where a queue starts (its minimum offset, earliest message, an
// offset by a time before that) is not its to say: a consumer starting
// from the first offset would skip the messages it lacks.
func (c *Controller) catchingUp() *remoting.RemotingCommand {
	if cu, ok := c.rep.(interface{ catchupBlocksVoting() bool }); ok && cu.catchupBlocksVoting() {
		return c.notLeader()
	}
	return nil
}

func (c *Controller) processGetMinOffset(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.QueueOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := c.catchingUp(); r != nil {
		return r
	}
	minOff, _, err := c.st.QueueRange(h.Topic, h.QueueID)
	if err != nil {
		return response(remoting.ResponseSystemError, "min offset of %s/%d: %v", h.Topic, h.QueueID, err)
	}
	return offsetResponse(minOff)
}

func (c *Controller) processSearchOffset(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.SearchOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := c.catchingUp(); r != nil {
		return r
	}
	search := c.st.GetOffsetInQueueByTime
	if strings.EqualFold(h.BoundaryType, "upper") { // RocketMQ's BoundaryType.getType: anything else is LOWER
		search = c.st.GetUpperOffsetInQueueByTime
	}
	off, err := search(h.Topic, h.QueueID, h.Timestamp)
	if err != nil {
		return response(remoting.ResponseSystemError, "search %s/%d by time %d: %v", h.Topic, h.QueueID, h.Timestamp, err)
	}
	return offsetResponse(off)
}

func (c *Controller) processEarliestStoreTime(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.QueueOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := c.catchingUp(); r != nil {
		return r
	}
	ts, err := c.st.GetEarliestMessageTime(h.Topic, h.QueueID)
	if err != nil {
		return response(remoting.ResponseSystemError, "earliest store time of %s/%d: %v", h.Topic, h.QueueID, err)
	}
	r := success()
	r.ExtFields = map[string]string{"timestamp": strconv.FormatInt(ts, 10)}
	return r
}

func (c *Controller) processGetAllConsumerOffset() *remoting.RemotingCommand {
	r := success()
	r.Body, _ = json.Marshal(struct {
		OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
	}{c.rep.State().ConsumerOffsets()})
	return r
}

// processGetConsumeStats renders ConsumeStats; RocketMQ's JSON uses
// MessageQueue objects as map keys (fastjson), so the body is written by
// hand in that shape.
func (c *Controller) processGetConsumeStats(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.ConsumeStatsRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	var topics []string
	switch {
	case h.TopicList != "":
		// The topics asked for, whatever the group subscribes
		// (RocketMQ's getTopicsForCollectingConsumeStats).
		seen := map[string]bool{}
		for _, t := range strings.Split(h.TopicList, ";") {
			if t = strings.TrimSpace(t); t != "" && !seen[t] {
				seen[t] = true
				topics = append(topics, t)
			}
		}
		sort.Strings(topics)
	case h.Topic != "":
		// A named topic is reported whether or not the group has
		// committed on it (its queues then at offset 0, the whole
		// backlog as lag). Left out, a group stuck before its first
		// commit would show no lag at all.
		topics = c.subscribedTopics(h.ConsumerGroup, []string{h.Topic})
	default:
		prefix := "@" + h.ConsumerGroup
		for key := range c.offsetKeys() {
			if t, ok := strings.CutSuffix(key, prefix); ok {
				topics = append(topics, t)
			}
		}
		sort.Strings(topics)
		topics = c.subscribedTopics(h.ConsumerGroup, topics)
	}
	b, _, err := c.consumeStats(h.ConsumerGroup, topics)
	if err != nil {
		return response(remoting.ResponseSystemError, "%v", err)
	}
	r := success()
	r.Body = b
	return r
}

// subscribedTopics drops from topics those the group's online consumers
// do not subscribe, unless none of them subscribes anything (or none is
// online), as RocketMQ's consume stats do: offsets a group left behind on
// a topic it no longer consumes are not its lag, and would otherwise
// show as a backlog that only grows (consumerProgress, the dashboard,
// rocketmq-exporter's rocketmq_group_diff).
func (c *Controller) subscribedTopics(group string, topics []string) []string {
	g, online := c.clients.group(group)
	if !online || len(g.Subscriptions) == 0 {
		return topics
	}
	out := make([]string, 0, len(topics))
	for _, t := range topics {
		if _, ok := g.Subscriptions[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// offsetCoalescer collects offset commits (UPDATE_CONSUMER_OFFSET and the
// pull commitOffset flag) per group/topic/queue on the leader and
// proposes them every consumerOffsetCommitInterval as one Replica call
// (broker-plan decision 7). The request is answered once queued; until
// replicated, lookups see the pending value, so a client reading back its
// own commit is not surprised.
//
// An acknowledged commit stays pending until a flush replicates it, a
// newer commit of its queue replaces it, or offsetFlushAttempts flushes
// failed: a consumer may have committed it once (a lite consumer's Close)
// and never send it again. When this node stops leading it hands its
// pending commits to the new leader (handOver) instead of proposing them:
// the next leader may take newer commits or a reset of the queue, and the
// state machine takes the last write (an offset may move back), so a
// commit from an older term must never be proposed blindly in a later
// one. The new leader takes a handed-over commit only where the queue's
// offset is still the one this node had replicated. A planned transfer
// needs that: Raft refuses every write from the moment the transfer starts
// until leadership has moved (up to an election timeout), while consumers
// keep committing (official clients oneway, or in pulls) to this node.
// After an unplanned loss the new leader may be unreachable or the
// commits stale; those not handed over are lost and their consumers
// re-consume from the offset the group has (at-least-once, ADR 0004).
type offsetCoalescer struct {
	c *Controller

	// tables orders offset commits against the deletes that remove
	// offsets (deleteTopic, deleteSubGroup with cleanOffset). A commit
	// holds it shared from its check that the topic and group exist until
	// it is queued here (resets and clones, which propose directly: until
	// proposed); a delete holds it exclusively from dropping the queued
	// commits until its entry is applied. A commit checked before a delete
	// is thus queued before the drop removes it, and one checked after it
	// sees the delete applied and is refused: none reaches the log after
	// the delete to bring the deleted offsets back. This is the leader's
	// order, not the FSM's, so every member applies the log as before,
	// whatever build it runs; a new leader serves only after applying its
	// predecessor's entries (ha.Roles' barrier), so it checks against any
	// delete committed before it. Order: tables, flushing, mu.
	tables sync.RWMutex

	// flushing is held by flush from reading the batch until it is
	// proposed, and by drop, so a batch read before a group or topic is
	// deleted is proposed before the delete, never after it (it would bring
	// the deleted offsets back); and by supersede while it replicates, so
	// no batch read before a reset or clone lands after it.
	flushing sync.Mutex

	mu      sync.Mutex
	pending map[offsetKey]pendingOffset // guarded by mu
	// deposals counts deposed calls, so a commit taken out of pending in
	// one term is never put back in a later one. Guarded by mu.
	deposals uint64
	// forwarding is, on a member not leading, the latest commit per queue
	// that RocketMQ's clients sent here as to brokerId 0 (oneway
	// UPDATE_CONSUMER_OFFSET, a pull's commitOffset): their route names a
	// former leader until its 30 s refresh, and the not-leader answer to a
	// oneway request never reaches them. Each tick passes them on to the
	// leader (passOn). Guarded by mu.
	forwarding map[offsetKey]int64
	// leading is set by the role change to leader and cleared by deposed:
	// a flush that finds this node no longer leading leaves the pending
	// commits to deposed while it is still set. Guarded by mu.
	leading bool
	// leadingSince is when the role change to leader last reached this
	// node (zero: never). Guarded by mu.
	leadingSince time.Time
	// fenced is what this node, in the first offsetHandOverFence of its
	// leadership, reset or cloned (queues) or deleted with its offsets
	// (groups, topics). A deposed leader's hand-over for them is refused
	// whatever offset it expects: the commit was acknowledged in an older
	// term, before the admin write, which must win (RocketMQ: a reset
	// wins over the commits a consumer made before it). The offset check
	// alone would take it where the write left the offset the hand-over
	// expects: a reset to that very offset, a group or topic deleted and
	// created again where the old leader had none. Hand-overs arrive
	// within offsetHandOverTimeout of their sender's deposal, and a
	// leader cut off from its quorum steps down within its lease timeout,
	// so shortly after this node's election: later writes need no record.
	// Guarded by mu.
	fenced offsetFence
}

// offsetFence is offsetCoalescer.fenced.
type offsetFence struct {
	queues         map[offsetKey]bool
	groups, topics map[string]bool
}

// offsetHandOverFence is how long into a node's leadership its admin
// writes of offsets are recorded against hand-overs (offsetCoalescer.fenced),
// with a wide margin over the time a deposed leader's hand-over can take to
// arrive.
const offsetHandOverFence = time.Minute

// handOverCommit is a pending commit a deposed leader hands over, with the
// offset it had replicated for the queue (noOffset: none).
type handOverCommit struct {
	OffsetCommit
	expect string
}

// offsetForwardLimit bounds the queues whose commits a member not leading
// holds for the leader between two ticks; commits of further queues are
// dropped (their clients send them again at their next persist).
const offsetForwardLimit = 10000

// offsetPassOnTimeout bounds one passOn: the commits it did not send by
// then are dropped (their clients send them again at their next persist).
const offsetPassOnTimeout = 2 * time.Second

// offsetHandOverTimeout bounds a deposed leader's hand-over of its pending
// commits: the new leader serves once it applied its predecessor's entries
// and committed its own first one, well within it.
const offsetHandOverTimeout = 5 * time.Second

type offsetKey struct {
	group, topic string
	queueID      int32
}

// pendingOffset is an acknowledged commit, how many flushes of it
// failed, and the queue's offset this leader had replicated under it
// (noOffset: none): read when the queue's first pending commit is queued
// and moved on by this leader's own writes of the queue (its flushes,
// resets and clones). A hand-over expects that one: once deposed, this
// node's state may already hold a later leader's writes (a reset), and
// a hand-over expecting those would undo them. inDoubt is the offset of
// this leader's last flush of the queue whose outcome it did not learn
// (""; none): that entry may still commit under the next leader, and a
// state showing it at the deposal shows this leader's own write, which
// the hand-over may then expect.
type pendingOffset struct {
	offset     int64
	failed     int
	replicated string
	inDoubt    string
}

// offsetFlushAttempts bounds the flushes of one acknowledged commit while
// this node leads; Raft refusing a write that long (an apply queue full for
// ApplyTimeout each time) would otherwise keep it forever.
const offsetFlushAttempts = 5

func newOffsetCoalescer(c *Controller) *offsetCoalescer {
	o := &offsetCoalescer{c: c, pending: map[offsetKey]pendingOffset{}, forwarding: map[offsetKey]int64{}}
	c.rep.OnRoleChange(func(leader bool, _ uint64) {
		if !leader {
			o.deposed()
			return
		}
		o.mu.Lock()
		o.leading = true
		o.leadingSince = time.Now()
		o.mu.Unlock()
	})
	return o
}

func (o *offsetCoalescer) add(oc OffsetCommit) {
	k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
	o.mu.Lock()
	defer o.mu.Unlock()
	replicated := o.replicatedLocked(k)
	o.pending[k] = pendingOffset{offset: oc.Offset, replicated: replicated, inDoubt: o.pending[k].inDoubt}
}

// replicatedLocked is the offset this leader had replicated under the
// queue's pending commit (see pendingOffset), or, with none pending, the
// replicated one now. o.mu held.
func (o *offsetCoalescer) replicatedLocked(k offsetKey) string {
	if p, ok := o.pending[k]; ok {
		return p.replicated
	}
	if off, ok := o.c.rep.State().ConsumerOffset(k.group, k.topic, k.queueID); ok {
		return strconv.FormatInt(off, 10)
	}
	return noOffset
}

// fenceLocked records an admin write of queues' offsets, or a delete of a
// group's or a topic's (whichever is not empty), for offsetCoalescer.fenced.
// Its caller serves as leader: with leading not yet set, the role change
// has yet to reach the coalescer (Roles notifies after it starts serving)
// and the leadership is new, so the write is recorded. deposed empties
// the record, the role change to leader keeps what it holds. o.mu held.
func (o *offsetCoalescer) fenceLocked(queues []OffsetCommit, group, topic string) {
	if o.leading && time.Since(o.leadingSince) > offsetHandOverFence {
		o.fenced = offsetFence{}
		return
	}
	f := &o.fenced
	for _, oc := range queues {
		if f.queues == nil {
			f.queues = map[offsetKey]bool{}
		}
		f.queues[offsetKey{oc.Group, oc.Topic, oc.QueueID}] = true
	}
	if group != "" {
		if f.groups == nil {
			f.groups = map[string]bool{}
		}
		f.groups[group] = true
	}
	if topic != "" {
		if f.topics == nil {
			f.topics = map[string]bool{}
		}
		f.topics[topic] = true
	}
}

// addIf queues a handed-over commit (extHandOverExpect) if the queue's
// offset, pending or replicated, is expect and, for a deposed leader's
// (extHandOverDeposed), this node did not reset, clone or delete it
// (fenced); otherwise it returns the offset kept (noOffset: none).
func (o *offsetCoalescer) addIf(oc OffsetCommit, expect string, deposed bool) (string, bool) {
	k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
	// With flushing held no flush or reset (supersede) is half-way: the
	// pending commit, else the replicated offset, is the queue's latest.
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := noOffset
	if p, ok := o.pending[k]; ok {
		cur = strconv.FormatInt(p.offset, 10)
	} else if off, ok := o.c.rep.State().ConsumerOffset(oc.Group, oc.Topic, oc.QueueID); ok {
		cur = strconv.FormatInt(off, 10)
	}
	f := o.fenced
	if cur != expect || (deposed && (f.queues[k] || f.groups[k.group] || f.topics[k.topic])) {
		return cur, false
	}
	o.pending[k] = pendingOffset{offset: oc.Offset, replicated: o.replicatedLocked(k)}
	return cur, true
}

// lookup is the pending commit if any, else the replicated one. A pending
// commit counts only while this node leads: once deposed it will never be
// replicated, and answering it would show a consumer an offset the new
// leader does not have (a regression when it then asks the new leader).
func (o *offsetCoalescer) lookup(group, topic string, queueID int32) (int64, bool) {
	o.mu.Lock()
	p, ok := o.pending[offsetKey{group, topic, queueID}]
	o.mu.Unlock()
	if ok && o.c.rep.IsLeader() {
		return p.offset, true
	}
	return o.c.rep.State().ConsumerOffset(group, topic, queueID)
}

// offsetKeys lists the "topic@group" keys the group/topic pairs have
// offsets under, replicated or, while this node leads, pending (lookup's
// rule): the admin reads that list a group's topics (consume stats) must
// see a commit a consumer made moments ago as lookup does.
func (c *Controller) offsetKeys() map[string]bool {
	keys := map[string]bool{}
	for k := range c.rep.State().ConsumerOffsets() {
		keys[k] = true
	}
	if !c.rep.IsLeader() {
		return keys // a deposed leader's pending commits are never replicated
	}
	o := c.offsets
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.pending {
		keys[k.topic+"@"+k.group] = true
	}
	return keys
}

// groupOffsets is group's offsets by topic and queue as lookups answer
// them: the replicated ones with, while this node leads, the pending
// commits over them.
func (c *Controller) groupOffsets(group string) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	suffix := "@" + group
	for key, qs := range c.rep.State().ConsumerOffsets() {
		if t, ok := strings.CutSuffix(key, suffix); ok {
			out[t] = maps.Clone(qs)
		}
	}
	if !c.rep.IsLeader() {
		return out
	}
	o := c.offsets
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, p := range o.pending {
		if k.group != group {
			continue
		}
		if out[k.topic] == nil {
			out[k.topic] = map[int32]int64{}
		}
		out[k.topic][k.queueID] = p.offset
	}
	return out
}

func (o *offsetCoalescer) run() {
	t := time.NewTicker(o.c.cfg.ConsumerOffsetCommitCoalescer)
	defer t.Stop()
	for {
		select {
		case <-o.c.quit:
			return
		case <-t.C:
			o.flush()
			o.passOn(false)
		}
	}
}

// forward keeps a commit a member not leading was sent (see forwarding)
// for passOn. Names the leader would refuse are not kept.
func (o *offsetCoalescer) forward(group, topic string, queueID int32, offset int64) {
	if checkGroup(group) != nil || checkTopic(topic) != nil || offset < 0 {
		return
	}
	k := offsetKey{group, topic, queueID}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.forwarding[k]; ok || len(o.forwarding) < offsetForwardLimit {
		o.forwarding[k] = offset
	}
}

// passOn sends the forwarded commits to the leader, oneway as their
// clients sent them, each marked extHandOverExpect with the offset this
// member has replicated for its queue: the leader takes it only where the
// queue's offset is still that one, and only a commit ahead of it is
// sent. A commit that reached this member late (the client's retry, or a
// newer commit to the leader since) thus never moves the group's offset
// back. They are dropped when no other member is known to lead (this one
// leads now, or none does): their clients send them again at their next
// persist. Shutdown calls it once more after the servers stopped, so the
// commits a stopping follower took since its last tick reach the leader;
// with wait each waits for the leader's answer, since a oneway frame still
// queued when Shutdown then closes the client is never written.
func (o *offsetCoalescer) passOn(wait bool) {
	o.mu.Lock()
	if len(o.forwarding) == 0 {
		o.mu.Unlock()
		return
	}
	fw := o.forwarding
	o.forwarding = map[offsetKey]int64{}
	o.mu.Unlock()
	addr := o.c.rep.LeaderAddr()
	if o.c.rep.IsLeader() || addr == "" || addr == o.c.addr {
		return
	}
	st := o.c.rep.State()
	// One bound for the whole pass, not the controller's context: Shutdown
	// cancels that before its last passOn, and waits for this one.
	ctx, cancel := context.WithTimeout(context.Background(), offsetPassOnTimeout)
	defer cancel()
	for k, off := range fw {
		expect := noOffset
		if cur, ok := st.ConsumerOffset(k.group, k.topic, k.queueID); ok {
			if off <= cur {
				continue
			}
			expect = strconv.FormatInt(cur, 10)
		}
		req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: k.group, Topic: k.topic, QueueID: k.queueID, CommitOffset: off}, nil)
		req.ExtFields[extHandOverExpect] = expect
		var err error
		if wait {
			_, err = o.c.nsClient.InvokeSync(ctx, addr, req)
		} else {
			err = o.c.nsClient.InvokeOneway(ctx, addr, req)
		}
		if err != nil {
			o.c.log.Debug("consumer offset commits sent to this follower not passed on to the leader",
				zap.String("leader", addr), zap.Int("commits", len(fw)), zap.Error(err))
			return
		}
	}
}

// flush proposes everything pending. A failed proposal leaves the batch
// pending for the next flush (offsetFlushAttempts at most) while this node
// leads; deposed, it leaves it to deposed to hand over (notLeading).
func (o *offsetCoalescer) flush() {
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	if len(o.pending) == 0 {
		o.mu.Unlock()
		return
	}
	batch := make([]OffsetCommit, 0, len(o.pending))
	for k, p := range o.pending {
		batch = append(batch, OffsetCommit{Group: k.group, Topic: k.topic, QueueID: k.queueID, Offset: p.offset})
	}
	o.mu.Unlock()
	if !o.c.rep.IsLeader() {
		o.notLeading(batch)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.c.cfg.ApplyTimeout)
	err := o.c.rep.CommitOffsets(ctx, batch)
	cancel()
	var stopped *ApplyStoppedError
	if err == nil || errors.As(err, &stopped) {
		// A stopped FSM does not apply the entries here, yet they are
		// committed: the other members apply them.
		o.dropSent(batch, true)
		return
	}
	o.markInDoubt(batch)
	if !o.c.rep.IsLeader() {
		// Leadership lost while committing (a planned transfer ends so:
		// Raft refuses the entry until leadership has moved): the entry
		// may still commit under the next leader, or not. The hand-over
		// tells the two apart.
		o.notLeading(batch)
		return
	}
	kept, dropped := o.failedSent(batch)
	o.c.log.Warn("consumer offset commit failed; kept for the next flush",
		zap.Int("kept", kept), zap.Int("dropped", dropped), zap.Int("maxAttempts", offsetFlushAttempts), zap.Error(err))
}

// notLeading handles a batch this node, no longer leading, did not
// replicate: left pending for deposed to hand over while the role change
// has yet to reach it, dropped once it has (commits a handler queued as
// the node was deposed: never to be proposed in a later term).
func (o *offsetCoalescer) notLeading(batch []OffsetCommit) {
	o.mu.Lock()
	leading := o.leading
	o.mu.Unlock()
	if !leading {
		o.dropSent(batch, false)
	}
}

// markInDoubt records a failed flush's values as in doubt on the pending
// entries of their queues (see pendingOffset.inDoubt).
func (o *offsetCoalescer) markInDoubt(batch []OffsetCommit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, oc := range batch {
		k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
		if p, ok := o.pending[k]; ok {
			p.inDoubt = strconv.FormatInt(oc.Offset, 10)
			o.pending[k] = p
		}
	}
}

// failedSent counts a failed flush against the pending entries that still
// hold the sent values, dropping those that reached offsetFlushAttempts.
func (o *offsetCoalescer) failedSent(batch []OffsetCommit) (kept, dropped int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, oc := range batch {
		k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
		p, ok := o.pending[k]
		if !ok || p.offset != oc.Offset {
			continue // replaced by a newer commit, or dropped
		}
		if p.failed++; p.failed >= offsetFlushAttempts {
			delete(o.pending, k)
			dropped++
			continue
		}
		o.pending[k] = p
		kept++
	}
	return kept, dropped
}

// deposed takes every pending commit when this node stops leading and
// hands them to the new leader (see offsetCoalescer). It runs on the
// role-change notification, which comes before this node can lead again,
// so nothing acknowledged in one term is proposed by this node in the
// next. The offsets this node had replicated are read now, before it
// applies much of its successor's log: they are what the hand-over
// expects the new leader still to have.
func (o *offsetCoalescer) deposed() {
	o.mu.Lock()
	taken := o.pending
	o.pending = map[offsetKey]pendingOffset{}
	o.deposals++
	o.leading = false
	o.fenced = offsetFence{}
	o.mu.Unlock()
	if len(taken) == 0 {
		return
	}
	commits := o.toHandOver(taken)
	if len(commits) == 0 {
		return
	}
	o.c.log.Info("leadership lost: handing the unreplicated consumer offset commits to the new leader", zap.Int("commits", len(commits)))
	o.c.goFunc(func() { o.handOver(commits) })
}

// toHandOver is what deposed hands over of the pending commits taken, each
// with the offset its hand-over expects.
func (o *offsetCoalescer) toHandOver(taken map[offsetKey]pendingOffset) []handOverCommit {
	st := o.c.rep.State()
	commits := make([]handOverCommit, 0, len(taken))
	for k, p := range taken {
		off, ok := st.ConsumerOffset(k.group, k.topic, k.queueID)
		if ok && off == p.offset {
			// Replicated (the flush had yet to take it out), or a later
			// leader's write left the queue there: nothing to hand over.
			continue
		}
		expect := p.replicated
		if ok && p.inDoubt == strconv.FormatInt(off, 10) {
			expect = p.inDoubt // this leader's own flush, committed after all
		}
		commits = append(commits, handOverCommit{
			OffsetCommit: OffsetCommit{Group: k.group, Topic: k.topic, QueueID: k.queueID, Offset: p.offset},
			expect:       expect,
		})
	}
	return commits
}

// handOver sends commits to the group's leader as UPDATE_CONSUMER_OFFSET
// requests marked with extHandOverExpect, over the member client (signed
// with the cluster account), retrying while no leader is known or the one
// named does not serve yet, for up to offsetHandOverTimeout. It outlives a
// Shutdown that starts meanwhile (a planned stop deposes this node just
// before it) while the leader answers, not when none is known or reached.
func (o *offsetCoalescer) handOver(commits []handOverCommit) {
	deadline := time.Now().Add(offsetHandOverTimeout)
	var taken, kept, refused int
	var lastErr error
	retry := time.NewTicker(50 * time.Millisecond)
	defer retry.Stop()
	wait := func(unreachable bool) {
		select {
		case <-o.c.quit:
			if unreachable {
				deadline = time.Now()
				return
			}
			<-retry.C
		case <-retry.C:
		}
	}
	for len(commits) > 0 && time.Now().Before(deadline) {
		addr := o.c.rep.LeaderAddr()
		if addr == "" {
			lastErr = errors.New("no leader known")
			wait(true)
			continue
		}
		hc := commits[0]
		req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: hc.Group, Topic: hc.Topic, QueueID: hc.QueueID, CommitOffset: hc.Offset}, nil)
		req.ExtFields[extHandOverExpect] = hc.expect
		req.ExtFields[extHandOverDeposed] = "true"
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		r, err := o.c.nsClient.InvokeSync(ctx, addr, req)
		cancel()
		switch {
		case err != nil:
			lastErr = err
			wait(true)
			continue
		case r.Code == remoting.ResponseServiceNotAvailable:
			lastErr = fmt.Errorf("%s: %s", addr, r.Remark) // not serving as leader (yet)
			wait(false)
			continue
		case r.Code != remoting.ResponseSuccess:
			lastErr = fmt.Errorf("%s refused %s@%s/%d: code %d %s", addr, hc.Group, hc.Topic, hc.QueueID, r.Code, r.Remark)
			refused++
		default:
			if _, ok := r.ExtValue(extHandOverKept); ok {
				kept++
			} else {
				taken++
			}
		}
		commits = commits[1:]
	}
	fields := []zap.Field{zap.Int("taken", taken), zap.Int("keptNewer", kept), zap.Int("refused", refused), zap.Int("lost", len(commits))}
	if len(commits) > 0 || refused > 0 {
		o.c.log.Warn("consumer offset hand-over to the new leader incomplete; consumers re-consume from the offsets it has",
			append(fields, zap.Error(lastErr))...)
		return
	}
	o.c.log.Info("consumer offset commits handed to the new leader", fields...)
}

// supersede replicates commits that replace the queued ones of their
// queues (a reset, a clone): a queued commit flushed after them would undo
// them. It holds flushing, so no flush is under way or starts, takes those
// queues' queued commits out and proposes through replicate. If that
// fails, they go back (unless a newer commit replaced them or this node
// was deposed meanwhile): the failed write changes nothing. Its own
// commits are never queued, so no later flush applies what its caller
// was told had failed. It fences those queues against hand-overs (see
// fenced) whether or not it succeeds: a failed write may still commit.
func (o *offsetCoalescer) supersede(commits []OffsetCommit, replicate func() *remoting.RemotingCommand) *remoting.RemotingCommand {
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	o.fenceLocked(commits, "", "")
	taken := map[offsetKey]pendingOffset{}
	for _, oc := range commits {
		k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
		if p, ok := o.pending[k]; ok {
			taken[k] = p
			delete(o.pending, k)
		}
	}
	deposals := o.deposals
	o.mu.Unlock()
	r := replicate()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deposals != deposals {
		return r
	}
	if r == nil {
		// Commits queued while it replicated now lie over its offsets.
		for _, oc := range commits {
			k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
			if p, ok := o.pending[k]; ok {
				p.replicated, p.inDoubt = strconv.FormatInt(oc.Offset, 10), ""
				o.pending[k] = p
			}
		}
		return r
	}
	for k, p := range taken {
		if _, ok := o.pending[k]; !ok {
			o.pending[k] = p
		}
	}
	return r
}

// deleting runs a delete that removes the offsets of a group or of a
// topic (whichever is not empty): it forgets their pending commits,
// waiting for a flush in progress, and replicates the delete with
// commits held off until it is applied (see tables). The delete removes
// the replicated offsets; without this a flush after it would write
// pending or concurrent commits back.
func (o *offsetCoalescer) deleting(group, topic string, replicate func() *remoting.RemotingCommand) *remoting.RemotingCommand {
	o.tables.Lock()
	defer o.tables.Unlock()
	o.drop(group, topic)
	return replicate()
}

// drop forgets the pending commits of a group or of a topic (whichever is
// not empty), waiting for a flush in progress.
func (o *offsetCoalescer) drop(group, topic string) {
	o.flushing.Lock()
	defer o.flushing.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fenceLocked(nil, group, topic)
	for k := range o.pending {
		if (group != "" && k.group == group) || (topic != "" && k.topic == topic) {
			delete(o.pending, k)
		}
	}
}

// dropSent removes the pending entries that still hold the sent values.
// With replicated (the batch was), a newer commit that replaced one lies
// over the sent value.
func (o *offsetCoalescer) dropSent(batch []OffsetCommit, replicated bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, oc := range batch {
		k := offsetKey{oc.Group, oc.Topic, oc.QueueID}
		p, ok := o.pending[k]
		switch {
		case !ok:
		case p.offset == oc.Offset:
			delete(o.pending, k)
		case replicated:
			// Replicated after any flush left in doubt: that one is
			// settled under it.
			p.replicated, p.inDoubt = strconv.FormatInt(oc.Offset, 10), ""
			o.pending[k] = p
		}
	}
}
