package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/broker/timerindex"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Timer messages (RocketMQ 5 HookUtils.transformTimerMessage and
// TimerMessageStore, with raftmq's own storage of the pending timers).
//
// A send with TIMER_DELAY_SEC, TIMER_DELAY_MS, TIMER_DELIVER_MS or
// __STARTDELIVERTIME (checked in that order; a DELAY level wins over all of
// them, as in RocketMQ) due within timerMaxDelaySec is stored in
// rmq_sys_wheel_timer queue 0 with its due time in TIMER_OUT_MS and its
// real topic and queue in REAL_TOPIC / REAL_QID. A due time already passed
// makes it a normal message; a malformed value or one beyond the maximum is
// refused with MESSAGE_ILLEGAL.
//
// Every replica's FSM adds a record (due time, queue offset) to its on-disk
// index (package timerindex, one file per one-second bucket) as it applies
// the message (timer_fsm.go). The replicated TimerCursor says which bucket
// the leader is delivering and how many of its records, in file order, are
// delivered. The leader's timer service reads the cursor's bucket, re-puts
// each due message to its real topic through the path the delay levels use
// (Controller.reput) and replicates the new cursor with CmdTimerProgress;
// once a bucket is delivered it moves the cursor to the next non-empty
// bucket that is due or, when none is, to the current second's bucket, so
// the delivered records go and pin no CommitLog segment. A record applied after the leader looked at a bucket
// is never lost: it lands in the cursor's bucket (one the cursor passed is
// clamped to it) and an advance moves the late records of the buckets it
// passes into the new one. A new leader resumes from the replicated cursor;
// messages re-put after the last replicated cursor are delivered again
// (at least once), and so is every message whose record follows a not yet
// due one in its bucket.

// TimerCursor is the timer service's replicated position: Bucket is the
// bucket being delivered, Fired the number of its records (in file order)
// delivered. The JSON names are part of the snapshot image.
type TimerCursor struct {
	Bucket int64 `json:"bucket"`
	Fired  int64 `json:"fired"`
}

// TimerProgress is a CmdTimerProgress entry: the cursor moves from From to
// To. When To is a later bucket, Done is the number of From's records the
// leader delivered; the rest (late arrivals) move to To.
type TimerProgress struct {
	From, To TimerCursor
	Done     int64
}

func (p TimerProgress) valid() bool {
	if p.To.Bucket == p.From.Bucket {
		return p.To.Fired > p.From.Fired
	}
	return p.To.Bucket > p.From.Bucket && p.To.Fired == 0 && p.Done >= p.From.Fired
}

func encodeTimerProgress(p TimerProgress) []byte {
	b := binary.AppendVarint(nil, p.From.Bucket)
	b = binary.AppendVarint(b, p.From.Fired)
	b = binary.AppendVarint(b, p.To.Bucket)
	b = binary.AppendVarint(b, p.To.Fired)
	return binary.AppendVarint(b, p.Done)
}

func decodeTimerProgress(data []byte) (TimerProgress, error) {
	r := reader{b: data}
	p := TimerProgress{From: TimerCursor{r.varint(), r.varint()}, To: TimerCursor{r.varint(), r.varint()}, Done: r.varint()}
	return p, r.done()
}

// timerReplica is the Replica extension timer messages need (the Group has
// it; a Replica without it refuses timer messages at send).
type timerReplica interface {
	// TimerCursor is the applied replicated cursor.
	TimerCursor() TimerCursor
	// UpdateTimerProgress replicates a cursor move (leader only).
	UpdateTimerProgress(ctx context.Context, p TimerProgress) error
	// TimerIndex is this replica's on-disk index.
	TimerIndex() *timerindex.Index
}

var _ timerReplica = (*Group)(nil)

// TimerCursor implements timerReplica.
func (g *Group) TimerCursor() TimerCursor {
	g.st.mu.RLock()
	defer g.st.mu.RUnlock()
	return g.st.timer
}

// UpdateTimerProgress implements timerReplica.
func (g *Group) UpdateTimerProgress(ctx context.Context, p TimerProgress) error {
	return g.proposeCommand(ctx, &Command{Type: CmdTimerProgress, Timer: p})
}

// TimerIndex implements timerReplica.
func (g *Group) TimerIndex() *timerindex.Index { return g.timers }

// timerProperties are the properties that make a timer message, in the
// order they are read.
var timerProperties = [...]string{wire.PropertyTimerDelaySec, wire.PropertyTimerDelayMs,
	wire.PropertyTimerDeliverMs, wire.PropertyStartDeliverTime}

// hasTimerProperty reports whether a properties string may name a timer
// property (a substring test: a false positive costs the property map).
func hasTimerProperty(props string) bool {
	return strings.Contains(props, "TIMER_") || strings.Contains(props, wire.PropertyStartDeliverTime)
}

// applyTimer rewrites a timer message to the timer topic. nil means fine
// (also when it is no timer message).
func (c *Controller) applyTimer(ctx context.Context, m *store.Message) *remoting.RemotingCommand {
	if m.Properties == nil || m.SysFlag&wire.SysFlagTransMask == wire.SysFlagTransPrepared {
		return nil
	}
	deliverMs, verdict, r := c.timerDue(m.Properties)
	switch {
	case r != nil:
		return r
	case verdict == timerOverridden:
		for _, k := range timerProperties[:3] {
			delete(m.Properties, k)
		}
		return nil
	case verdict != timerHeld:
		return nil
	}
	if _, ok := c.rep.(timerReplica); !ok {
		return response(remoting.ResponseSystemError, "timer messages are not supported by this broker's replica (no timer index)")
	}
	qualifyProducerID(m)
	m.Properties[wire.PropertyTimerOutMs] = strconv.FormatInt(deliverMs, 10)
	m.Properties[wire.PropertyRealTopic] = m.Topic
	m.Properties[wire.PropertyRealQueueID] = strconv.Itoa(int(m.QueueID))
	m.Topic, m.QueueID = wire.TopicTimer, 0
	if _, err := c.ensureTopic(ctx, wire.TopicTimer, 1, 0, false); err != nil {
		return c.writeError("create "+wire.TopicTimer, err)
	}
	return nil
}

// timerVerdict is what timerDue decides about a message's timer property.
type timerVerdict int

const (
	// timerNone: no timer property, a due time already passed, or a
	// message already converted (RocketMQ's double check): nothing to do.
	timerNone timerVerdict = iota
	// timerHeld: a due time still ahead; the message goes to the timer
	// topic.
	timerHeld
	// timerOverridden: a DELAY level wins, as in RocketMQ; the timer
	// values are not looked at and TIMER_DELAY_SEC, TIMER_DELAY_MS and
	// TIMER_DELIVER_MS are dropped (transformTimerMessage).
	timerOverridden
)

// timerDue reads the timer property of a message's properties without
// changing them and decides what becomes of it (deliverMs for
// timerHeld); a malformed value, one beyond timerMaxDelaySec or a cancel
// marker is refused.
func (c *Controller) timerDue(props map[string]string) (deliverMs int64, verdict timerVerdict, r *remoting.RemotingCommand) {
	if _, rolled := props[wire.PropertyTimerOutMs]; rolled {
		return 0, timerNone, nil
	}
	if k := props[wire.PropertyTimerDelUniqKey]; k != "" {
		// Storing the cancel marker as a message would deliver it.
		return 0, timerNone, response(remoting.ResponseMessageIllegal,
			"timer message illegal: cancelling a timer (TIMER_DEL_UNIQKEY=%s) is not supported by raftmq", k)
	}
	// A DELAY level above 0 wins (RocketMQ: getDelayTimeLevel() > 0); one
	// that is not a number is refused by the delay path.
	if lv, r := delayLevel(props[wire.PropertyDelayTimeLevel]); r != nil || lv > 0 {
		return 0, timerOverridden, nil
	}
	name, v := "", ""
	for _, k := range timerProperties {
		if s, ok := props[k]; ok {
			name, v = k, s
			break
		}
	}
	if name == "" {
		return 0, timerNone, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, timerNone, response(remoting.ResponseMessageIllegal, "timer message illegal: %s=%q is not an integer", name, v)
	}
	nowMs := time.Now().UnixMilli() // only a timer message reads the clock
	deliverMs = n
	switch name {
	case wire.PropertyTimerDelaySec:
		n = max(min(n, 1<<40), -(1 << 40)) // n*1000 stays in range
		deliverMs = nowMs + n*1000
	case wire.PropertyTimerDelayMs:
		n = max(min(n, 1<<50), -(1 << 50)) // nowMs+n stays in range
		deliverMs = nowMs + n
	}
	// Past first: deliverMs-nowMs of a time far in the past would wrap to
	// far ahead.
	if deliverMs <= nowMs {
		return 0, timerNone, nil // due already: a normal message, as in RocketMQ
	}
	maxMs := int64(c.cfg.TimerMaxDelaySec) * 1000
	if deliverMs-nowMs > maxMs {
		return 0, timerNone, response(remoting.ResponseMessageIllegal,
			"timer message illegal: %s=%s is %d ms ahead, beyond the max delay %d ms (timerMaxDelaySec=%d)",
			name, v, deliverMs-nowMs, maxMs, c.cfg.TimerMaxDelaySec)
	}
	return deliverMs, timerHeld, nil
}

// qualifyProducerID keeps an idempotent producer's dedup right for a
// message held back in a system topic (timer, delay level). Dedup streams
// are keyed by producer, topic and queue, and the producer numbers its
// sends per real queue: in the system topic two real queues' numbers would
// meet in one stream and the second message would be taken for a retry of
// the first. The producer id is therefore qualified with the real queue;
// the re-put drops both properties (realMessage), because by then the
// message's sequence number may have fallen out of the real stream's
// window.
func qualifyProducerID(m *store.Message) {
	if pid := m.Properties[wire.PropertyProducerID]; pid != "" {
		m.Properties[wire.PropertyProducerID] = pid + "@" + m.Topic + "@" + strconv.Itoa(int(m.QueueID))
	}
}

// timerReadBatch is how many records of the cursor's bucket one round reads.
const timerReadBatch = 1024

// timerService delivers due timer messages while this node leads.
type timerService struct {
	c  *Controller
	tr timerReplica // nil: the Replica has no timer index
	// Owned by run. fired holds the records of bucket (by position)
	// re-put during this leadership beyond the replicated cursor, so a
	// record behind a not yet due one is not re-put every round.
	wasLeader bool
	bucket    int64
	fired     map[int64]struct{}

	// Metrics (raftmq_broker_timer_*).
	delivered prometheus.Counter
	skipped   prometheus.Counter
	lateness  prometheus.Histogram
}

// newTimerService builds the service and registers its metrics on the
// node's registry: timer_delivered_total (re-put by this node as leader),
// timer_skipped_total (records whose message was missing or corrupt: not
// delivered), timer_fire_delay_seconds (re-put time − due time) and the
// timer_index_buckets gauge (buckets of this replica's index that hold
// records).
func newTimerService(c *Controller) *timerService {
	tr, _ := c.rep.(timerReplica)
	s := &timerService{c: c, tr: tr, fired: map[int64]struct{}{},
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "timer_delivered_total",
			Help: "Timer messages this node re-put to their real topics as leader."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "timer_skipped_total",
			Help: "Timer records not delivered: their message was missing on this replica or the record was corrupt."}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "timer_fire_delay_seconds",
			Help:    "Re-put time of a timer message minus its due time (TIMER_OUT_MS), on the leader.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 60}}),
	}
	if c.metrics != nil {
		c.metrics.reg.MustRegister(s.delivered, s.skipped, s.lateness)
		if tr != nil {
			c.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "timer_index_buckets",
				Help: "One-second buckets of this replica's timer index that hold records."},
				func() float64 { return float64(tr.TimerIndex().Buckets()) }))
		}
	}
	return s
}

func (s *timerService) run() {
	if s.tr == nil {
		return
	}
	t := time.NewTicker(s.c.cfg.TimerCheckInterval)
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

func (s *timerService) tick(now time.Time) {
	if !s.c.rep.IsLeader() {
		s.wasLeader = false
		return
	}
	if !s.wasLeader {
		clear(s.fired)
		s.wasLeader = true
	}
	// A few rounds per tick, so an advance and the next bucket's due
	// records go out together.
	for range 4 {
		more, err := s.round(now.UnixMilli())
		if err != nil {
			s.c.log.Warn("timer delivery failed; retrying next round", zap.Error(err))
			return
		}
		if !more {
			return
		}
	}
}

// round delivers the due records of the cursor's bucket and moves the
// cursor. more is true when the cursor moved to another bucket.
func (s *timerService) round(nowMs int64) (more bool, err error) {
	cur := s.tr.TimerCursor()
	idx := s.tr.TimerIndex()
	if cur.Bucket != s.bucket {
		s.bucket = cur.Bucket
		clear(s.fired)
	}
	recs, total, err := idx.Read(cur.Bucket, cur.Fired, timerReadBatch)
	if err != nil {
		return false, err
	}
	var out []*store.Message
	var outPos, dues []int64
	var outAt []int // out[k]'s index in outPos
	for i, r := range recs {
		pos := cur.Fired + int64(i)
		if _, ok := s.fired[pos]; ok || r.DeliverMs > nowMs {
			continue
		}
		m, err := s.load(r)
		if err != nil {
			return false, err
		}
		if m != nil {
			out = append(out, realMessage(m, s.c))
			dues = append(dues, r.DeliverMs)
			outAt = append(outAt, len(outPos))
		}
		outPos = append(outPos, pos)
	}
	if len(outPos) > 0 {
		ctx, cancel := context.WithTimeout(s.c.ctx, s.c.cfg.ApplyTimeout)
		stored, err := s.c.reput(ctx, out)
		cancel()
		// The records before the first message not stored are settled
		// (re-put, or skipped): the retry must not re-put them.
		settled := len(outPos)
		if err != nil {
			settled = outAt[stored]
		}
		now := time.Now().UnixMilli()
		for _, due := range dues[:stored] {
			s.lateness.Observe(float64(now-due) / 1000)
		}
		s.delivered.Add(float64(stored))
		s.skipped.Add(float64(settled - stored))
		for _, p := range outPos[:settled] {
			s.fired[p] = struct{}{}
		}
		if err != nil {
			return false, err
		}
	}
	n := cur.Fired
	for {
		if _, ok := s.fired[n]; !ok {
			break
		}
		n++
	}
	p := TimerProgress{From: cur, To: TimerCursor{Bucket: cur.Bucket, Fired: n}}
	// n > total: this replica holds fewer records in the bucket than the
	// replicated cursor says were fired (its index diverged from the
	// one that moved the cursor). Nothing is left to deliver here, so the
	// bucket is done as well. Done stays n, at least the cursor's Fired,
	// or every replica would ignore the move (TimerProgress.valid); a
	// replica holding more records moves those after Done on.
	if n >= total {
		nowBucket := timerindex.BucketOf(nowMs)
		if next, ok := idx.Next(cur.Bucket+1, nowBucket); ok {
			p.To, p.Done, more = TimerCursor{Bucket: next}, n, true
		} else if n > 0 && nowBucket > cur.Bucket {
			// Every record of the bucket is delivered and no later bucket
			// is due: the cursor moves on to the current second's (empty)
			// bucket, so the advance removes the delivered records. Kept,
			// they would pin their messages' CommitLog segment, and every
			// later one, against retention until another timer came due.
			p.To, p.Done = TimerCursor{Bucket: nowBucket}, n
		}
	}
	if p.To == cur {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(s.c.ctx, s.c.cfg.ApplyTimeout)
	defer cancel()
	if err := s.tr.UpdateTimerProgress(ctx, p); err != nil {
		return false, err
	}
	for pos := range s.fired {
		if pos < n || p.To.Bucket != cur.Bucket {
			delete(s.fired, pos)
		}
	}
	return more, nil
}

// load reads the timer message of a record; nil (logged) when the record is
// corrupt or its message is no longer on this replica (retention removed
// it, or the replica installed a snapshot taken after it).
func (s *timerService) load(r timerindex.Record) (*store.Message, error) {
	if r.QueueOffset < 0 {
		s.c.log.Error("timer record corrupt; its message is not delivered")
		return nil, nil
	}
	res, err := s.c.st.GetMessage("", wire.TopicTimer, 0, r.QueueOffset, 1, nil)
	if err != nil {
		return nil, err
	}
	if res.Status != store.Found || len(res.Messages) == 0 || res.QueueOffsets[0] != r.QueueOffset {
		s.c.log.Error("timer message missing on this replica; it is not delivered",
			zap.Int64("queueOffset", r.QueueOffset), zap.Int64("deliverMs", r.DeliverMs), zap.Stringer("status", res.Status))
		return nil, nil
	}
	m, _, err := wire.DecodeMessage(res.Messages[0], true)
	if err != nil {
		return nil, fmt.Errorf("timer message at queue offset %d: %w", r.QueueOffset, err)
	}
	return m, nil
}

// refuseBatchTimer refuses a timer property in a batch: batches are not
// rewritten per message (as with delay levels), and storing the message
// as a normal one would deliver it early.
func (c *Controller) refuseBatchTimer(m *store.Message) *remoting.RemotingCommand {
	for _, k := range timerProperties {
		if m.Property(k) != "" {
			return response(remoting.ResponseMessageIllegal, "batch messages cannot carry the timer property %s; send timer messages one by one", k)
		}
	}
	return nil
}

// timerPin is the CommitLog position below which no pending timer message
// lies (math.MaxInt64: none): retention deletes no segment that reaches
// past it, so a timer due after fileReservedTime still finds its message.
func (g *Group) timerPin() int64 {
	if g.timers == nil {
		return math.MaxInt64
	}
	q, ok := g.timers.MinQueueOffset()
	if !ok {
		return math.MaxInt64
	}
	return queuePin(g.ms.ConsumeQueues().Get(wire.TopicTimer, 0), q)
}
