package broker

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Delay levels (RocketMQ ScheduleMessageService). A message with the
// DELAY property is stored in SCHEDULE_TOPIC_XXXX, queue level-1, with its
// real topic and queue in REAL_TOPIC / REAL_QID. The leader's schedule
// service walks every level queue in order; a message is due at its store
// time + the level's delay (every message of one queue has the same
// delay, so the queue is in due order and the walk stops at the first
// message not yet due). Due messages are re-put to their real topic and
// the walk's position is replicated with Replica.UpdateScheduleOffsets,
// so a new leader resumes where the old one stopped. A message re-put
// whose progress was not yet replicated when the leader died is
// delivered again: delayed delivery is at least once.

// applyDelay rewrites a message with a DELAY level to the schedule topic.
// nil means fine (also when there is no delay).
func (c *Controller) applyDelay(ctx context.Context, m *store.Message) *remoting.RemotingCommand {
	level, r := delayLevel(m.Properties[wire.PropertyDelayTimeLevel])
	if r != nil {
		return r
	}
	if level <= 0 || m.SysFlag&wire.SysFlagTransMask == wire.SysFlagTransPrepared {
		return nil
	}
	level = min(level, len(c.delayLevels))
	qualifyProducerID(m)
	m.Properties[wire.PropertyDelayTimeLevel] = strconv.Itoa(level)
	m.Properties[wire.PropertyRealTopic] = m.Topic
	m.Properties[wire.PropertyRealQueueID] = strconv.Itoa(int(m.QueueID))
	m.Topic, m.QueueID = wire.TopicSchedule, int32(level-1)
	if _, err := c.ensureTopic(ctx, wire.TopicSchedule, len(c.delayLevels), 0, false); err != nil {
		return c.writeError("create "+wire.TopicSchedule, err)
	}
	return nil
}

// delayLevel parses a DELAY property (0: none).
func delayLevel(v string) (int, *remoting.RemotingCommand) {
	if v == "" {
		return 0, nil
	}
	level, err := strconv.Atoi(v)
	if err != nil {
		return 0, response(remoting.ResponseMessageIllegal, "the DELAY property %q is not a number", v)
	}
	return level, nil
}

// scheduleService delivers due delayed messages while this node leads.
type scheduleService struct {
	c *Controller
	// progress is the next queue offset per level (1-based), owned by run.
	// It is read from the replicated state at every round: a leadership
	// lost and regained between two rounds (another leader re-put and
	// moved it meanwhile) must not re-put from a stale position. The
	// leader's own moves are applied before UpdateScheduleOffsets returns.
	progress   map[int32]int64
	batchLimit int
}

func newScheduleService(c *Controller) *scheduleService {
	return &scheduleService{c: c, progress: map[int32]int64{}, batchLimit: 64}
}

func (s *scheduleService) run() {
	t := time.NewTicker(s.c.cfg.ScheduleMessageCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.c.quit:
			return
		case now := <-t.C:
			s.tick(now)
		}
	}
}

func (s *scheduleService) tick(now time.Time) {
	if !s.c.rep.IsLeader() {
		return
	}
	s.progress = s.c.rep.State().ScheduleOffsets()
	if s.progress == nil {
		s.progress = map[int32]int64{}
	}
	if _, ok := s.c.rep.State().Topic(wire.TopicSchedule); !ok {
		return
	}
	for i, delay := range s.c.delayLevels {
		level := int32(i + 1)
		// A level whose batch was all due has more due, most likely: it
		// goes on, so a level's delivery keeps up with far more than one
		// batch a round (RocketMQ delivers everything due in a run), up to
		// scheduleBatchesPerRound so the other levels get their turn.
		for range scheduleBatchesPerRound {
			more, err := s.deliverLevel(level, delay, now)
			if err != nil {
				s.c.log.Warn("delayed delivery failed; retrying next round", zap.Int32("level", level), zap.Error(err))
			}
			if !more || err != nil {
				break
			}
		}
	}
}

// scheduleBatchesPerRound bounds the batches one level re-puts in one
// round.
const scheduleBatchesPerRound = 64

// deliverLevel re-puts the due messages of one batch of a level and
// replicates the new position. more says the batch was full and all due:
// the level may have more due now.
func (s *scheduleService) deliverLevel(level int32, delay time.Duration, now time.Time) (more bool, err error) {
	qid := level - 1
	start := s.progress[level]
	maxOff := s.c.st.GetMaxOffsetInQueue(wire.TopicSchedule, qid)
	if start >= maxOff {
		if minOff := s.c.st.GetMinOffsetInQueue(wire.TopicSchedule, qid); start < minOff {
			s.progress[level] = minOff
		}
		return false, nil
	}
	res, err := s.c.st.GetMessage("", wire.TopicSchedule, qid, start, s.batchLimit, nil)
	if err != nil {
		return false, err
	}
	next := start
	switch res.Status {
	case store.Found:
	case store.OffsetTooSmall, store.MessageWasRemoving, store.NoMatchedMessage, store.OffsetFoundNull:
		// OffsetFoundNull: no ConsumeQueue file holds start (a file lost
		// between others); the next file's first offset, as a pull.
		next = res.NextBeginOffset
	default:
		return false, nil
	}
	var out []*store.Message
	for i, b := range res.Messages {
		// The pulled copy's patched QUEUEOFFSET is outside the entry CRC,
		// so the copy decodes and verifies as is.
		m, _, err := wire.DecodeMessage(b, true)
		if err != nil {
			return false, err
		}
		if now.Before(time.UnixMilli(m.StoreTimestamp).Add(delay)) {
			break
		}
		out = append(out, realMessage(m, s.c))
		next = res.QueueOffsets[i] + 1
	}
	var reputErr error
	if len(out) > 0 {
		ctx, cancel := context.WithTimeout(s.c.ctx, s.c.cfg.ApplyTimeout)
		stored, err := s.c.reput(ctx, out)
		cancel()
		if err != nil {
			// The position still moves past the messages stored, so the
			// retry does not store them again (out[i] is the batch's i-th).
			reputErr, next = err, start
			if stored > 0 {
				next = res.QueueOffsets[stored-1] + 1
			}
		}
	}
	if next != start {
		ctx, cancel := context.WithTimeout(s.c.ctx, s.c.cfg.ApplyTimeout)
		defer cancel()
		if err := s.c.rep.UpdateScheduleOffsets(ctx, map[int32]int64{level: next}); err != nil {
			return false, errors.Join(reputErr, err)
		}
		s.progress[level] = next
	}
	if reputErr != nil {
		return false, reputErr
	}
	return next != start && (res.Status != store.Found || len(out) == len(res.Messages)) && next < maxOff, nil
}

// reputBatchBytes bounds the stored bytes of one re-put request.
const reputBatchBytes = 1 << 20

// reput stores messages that were held back (delay levels, timer
// messages) in their real topics, creating a missing topic as a send
// would. Messages for different topics share a request (one Raft entry)
// up to reputBatchBytes, or raftBatchMaxBytes if smaller, of stored
// bytes (bodies, headers, topics, properties): the group refuses a larger
// request, and would at every retry. A message goes alone whatever its
// size: its copy in the system topic, no smaller, was stored. stored is
// how many of msgs, from the first, are stored (all of them when err is
// nil): a caller whose re-put failed part way resumes after them, or it
// would store them again at every retry.
func (c *Controller) reput(ctx context.Context, msgs []*store.Message) (stored int, err error) {
	limit := min(reputBatchBytes, c.cfg.RaftBatchMaxBytes)
	for stored < len(msgs) {
		rest := msgs[stored:]
		n, size := 0, 0
		for n < len(rest) {
			sz, err := wire.EncodedSize(rest[n])
			if err != nil {
				sz = len(rest[n].Body) // refused by the put, with the reason
			}
			if n > 0 && size+sz > limit {
				break
			}
			size += sz
			n++
		}
		for _, m := range rest[:n] {
			if _, err := c.ensureTopic(ctx, m.Topic, c.live().DefaultTopicQueueNums, 0, false); err != nil {
				return stored, err
			}
		}
		if _, err := c.rep.PutMessages(ctx, rest[:n]); err != nil {
			return stored, err
		}
		stored += n
	}
	return stored, nil
}

// realMessage rebuilds the message for its real topic and queue
// (RocketMQ messageTimeup; TimerMessageStore.convertMessage keeps the
// timer properties, TIMER_OUT_MS included, so does this).
func realMessage(m *store.Message, c *Controller) *store.Message {
	props := copyProps(m.Properties)
	topic := props[wire.PropertyRealTopic]
	qid, _ := strconv.Atoi(props[wire.PropertyRealQueueID])
	delete(props, wire.PropertyRealTopic)
	delete(props, wire.PropertyRealQueueID)
	delete(props, wire.PropertyDelayTimeLevel)
	delete(props, wire.PropertyCRC32)
	delete(props, wire.PropertyProducerID)
	delete(props, wire.PropertySequence)
	return &store.Message{
		Topic: topic, QueueID: int32(qid), Flag: m.Flag, Body: m.Body, Properties: props,
		SysFlag: m.SysFlag &^ (wire.SysFlagBornHostV6 | wire.SysFlagStoreHostV6), BornTimestamp: m.BornTimestamp,
		BornHost: m.BornHost, StoreHost: c.storeHost, ReconsumeTimes: m.ReconsumeTimes,
	}
}

// scheduleReplica is what the schedule service tells a Replica that keeps
// its delayed messages against retention (Group.schedulePin).
type scheduleReplica interface {
	// SetScheduleLevels says how many delay levels the schedule service
	// delivers: queues of SCHEDULE_TOPIC_XXXX past them (levels dropped
	// from messageDelayLevel) are never delivered, so they pin nothing.
	SetScheduleLevels(n int)
}

// SetScheduleLevels implements scheduleReplica.
func (g *Group) SetScheduleLevels(n int) { g.scheduleLevels.Store(int32(n)) }

// schedulePin is the CommitLog position below which no delayed message
// waits for its level (math.MaxInt64: none): retention deletes no segment
// that reaches past it, as for timers (timerPin), so a message whose level
// outlasts fileReservedTime, or a disk-full forced deletion, does not take
// an acknowledged message before its re-put. Each level's queue is pending
// from the replicated progress on, which every member holds.
func (g *Group) schedulePin() int64 {
	pin := int64(math.MaxInt64)
	levels := g.scheduleLevels.Load() // 0: not told, every queue counts
	progress := g.st.ScheduleOffsets()
	for qid, cq := range g.ms.ConsumeQueues().Queues(wire.TopicSchedule) {
		if levels > 0 && qid >= levels {
			continue
		}
		pin = min(pin, queuePin(cq, progress[qid+1]))
	}
	return pin
}
