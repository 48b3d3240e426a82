package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Automatic batching (option AutoBatch; RocketMQ 5's producer autoBatch /
// ProduceAccumulator, franz-go's and Kafka's record batching).
//
// Sends of one topic share a small number of request slots
// (autoBatchConfig.inflight). A send that finds a slot free goes out at
// once, alone, as an ordinary SEND_MESSAGE_V2 (after the linger, if one is
// set, or adaptiveWait right after a batch returned). A send that finds
// every slot busy waits in the topic's queue; when a request returns, the
// goroutine that ran it hands the slot and the waiting sends (up to
// maxMessages / maxBytes) to the first of them, which sends them as one
// SEND_BATCH_MESSAGE from its own goroutine, after waiting up to
// adaptiveWait for the callers the answer released. No goroutine is
// added: every batch runs on the goroutine of one of its callers
// (SendSync's caller, or SendAsync's goroutine).
//
// One batch request is the first attempt of each of its messages. On
// success every caller gets its own SendResult: its UNIQ_KEY as MsgID,
// its part of the comma-joined offset msgIds, and queue offset first+i
// (a batch is stored consecutively in one queue). On failure every
// message continues alone from that attempt under the normal retry policy
// (another group for plain sends; the same queue and sequence number for
// idempotent ones), in its caller's goroutine and within its caller's
// context. A batch refused as a whole (refusedAsBatch) is no attempt of
// its messages: each starts its own.

// autoBatchConfig is the AutoBatch option.
type autoBatchConfig struct {
	maxMessages int
	maxBytes    int
	linger      time.Duration
	inflight    int // request slots per topic
}

// defaultAutoBatchInflight is how many requests of one topic may be in
// flight at once with AutoBatch. One slot leaves the broker idle while a
// batch travels back; a few keep its pipeline busy while batches stay big.
const defaultAutoBatchInflight = 2

// adaptiveWait bounds how long a batch handed over when a request returns
// (linger 0) waits for the callers that answer just released. Without it
// closed-loop senders split into cohorts: the callers of one batch come
// back a moment after the next batch left and always miss it, so batches
// (and the broker's Raft entries) stay half as big as they could be. The
// same trick as the broker's batcher (docs/adr/0009-batcher-wait-target.md).
const adaptiveWait = time.Millisecond

// accumulator holds the sends waiting for a slot, per topic.
type accumulator struct {
	cfg autoBatchConfig
	// refusedWarned: a batch refused as a batch was logged (once per
	// producer: a broker that refuses one refuses them all).
	refusedWarned atomic.Bool

	mu     sync.Mutex
	topics map[string]*topicQueue // guarded by mu
}

// topicQueue is one topic's slots and waiting sends (guarded by
// accumulator.mu).
type topicQueue struct {
	inflight  int           // slots in use, a lingering holder's included
	lingering bool          // a slot holder waits for its batch to fill
	target    int           // the batch size it waits for
	full      chan struct{} // signalled when the lingering batch is full
	pending   []*autoSend
	pendBytes int
	lastSize  int       // messages of the last batch that finished
	lastDone  time.Time // when it finished
}

// autoSend is one caller's message in the accumulator. Its fields are
// guarded by accumulator.mu; wake (capacity 1) tells the caller to look.
type autoSend struct {
	ctx  context.Context // the caller's
	req  *sendRequest
	size int
	wake chan struct{}
	dl   time.Time // the caller's deadline

	taken  bool          // in a batch that is being sent
	lead   []*autoSend   // a batch this caller must send (it is lead[0])
	linger time.Duration // > 0: this caller holds a slot and lingers, then sends
	done   bool          // outcome known
	res    *SendResult   // on success
	err    error         // on a failure without retry
	retry  *batchRetry   // on a failure the message retries alone
}

// batchRetry is the state a message continues from after its batch
// failed.
type batchRetry struct {
	info *TopicPublishInfo
	st   attemptState
	err  error
	// alone: the batch was refused as a whole and stored nothing; the
	// message starts its own attempts rather than continuing the batch's.
	alone bool
}

// refusedAsBatch reports whether err, a batch request's failure, refused
// the request before storing anything, possibly for a reason none of its
// messages has alone: MESSAGE_ILLEGAL (RocketMQ's brokers and raftmq's
// answer it for a batch above maxMessageSize or maxBatchMessages, or
// holding a message a batch may not carry), or a batch this producer could
// not encode.
func refusedAsBatch(err error) bool {
	var be *BrokerError
	if errors.As(err, &be) {
		return be.Code == remoting.ResponseMessageIllegal
	}
	return errors.Is(err, ErrInvalidMessage)
}

func newAccumulator(cfg autoBatchConfig) *accumulator {
	return &accumulator{cfg: cfg, topics: map[string]*topicQueue{}}
}

// batchable reports whether r may share a request with other messages
// (MessageBatch rules: no delay or timer, not a retry topic; never compressed, as
// batch bodies are not; not ordered, not oneway, within maxBytes).
func (a *accumulator) batchable(r *sendRequest) bool {
	return r.msg != nil && !r.oneway && r.selector == nil && r.sysFlag == 0 && !isReply(r.msg) &&
		!r.msg.delayed() && !r.msg.timer() && !strings.HasPrefix(r.topic, wire.RetryGroupTopicPrefix) &&
		batchEntrySize(r.msg) <= a.cfg.maxBytes
}

// wirePropertiesSlack covers the properties the producer adds to a
// message (UNIQ_KEY, the idempotence pair, WAIT) and the separators.
const wirePropertiesSlack = 160

// batchEntrySize bounds the bytes m takes in a batch body: brokers check
// the whole body, properties included, against their maxMessageSize.
func batchEntrySize(m *Message) int {
	n := wire.BatchEntryOverhead + len(m.Body) + wirePropertiesSlack + len(m.Tags) + len(m.ShardingKey)
	for _, k := range m.Keys {
		n += len(k) + 1
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 2
	}
	return n
}

// enqueue adds s to its topic's queue. When a slot is free s takes it
// and must send: the batch to send is returned at once, or, with a
// linger, linger > 0 and lingerAndTake returns it later. Otherwise s
// waits for a running request to hand it a batch.
func (a *accumulator) enqueue(s *autoSend) (batch []*autoSend, linger time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tq := a.topics[s.req.topic]
	if tq == nil {
		tq = &topicQueue{full: make(chan struct{}, 1)}
		a.topics[s.req.topic] = tq
	}
	tq.pending = append(tq.pending, s)
	tq.pendBytes += s.size
	if tq.lingering || tq.inflight >= a.cfg.inflight {
		if tq.lingering && a.fullLocked(tq, tq.target) {
			signal(tq.full)
		}
		return nil, 0
	}
	tq.inflight++
	if a.cfg.linger > 0 && !a.fullLocked(tq, a.cfg.maxMessages) {
		a.startLingerLocked(tq, a.cfg.maxMessages)
		return nil, a.cfg.linger
	}
	if tq.lastSize > 1 && !a.fullLocked(tq, tq.lastSize) {
		// A batch answered a moment ago: its callers are probably coming
		// back. Going alone now would leave them to the next batch and
		// split the senders into two cohorts of half the size for good.
		if since := time.Since(tq.lastDone); since < adaptiveWait {
			a.startLingerLocked(tq, tq.lastSize)
			return nil, adaptiveWait - since
		}
	}
	batch = a.takeLocked(tq)
	if len(batch) == 0 {
		a.releaseLocked(tq)
	}
	return batch, 0
}

// fullLocked reports whether the waiting sends fill a batch of target
// messages (or maxBytes).
func (a *accumulator) fullLocked(tq *topicQueue, target int) bool {
	return len(tq.pending) >= min(target, a.cfg.maxMessages) || tq.pendBytes >= a.cfg.maxBytes
}

func (a *accumulator) startLingerLocked(tq *topicQueue, target int) {
	tq.lingering, tq.target = true, target
	select {
	case <-tq.full: // a stale signal of an earlier batch
	default:
	}
}

// lingerAndTake waits up to d for the batch of slot holder s to fill,
// then takes it. Requests that return meanwhile leave the queue to it.
func (a *accumulator) lingerAndTake(ctx context.Context, s *autoSend, d time.Duration) []*autoSend {
	a.mu.Lock()
	tq := a.topics[s.req.topic]
	a.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-tq.full:
	case <-ctx.Done():
	}
	t.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	tq.lingering = false
	if len(tq.pending) == 0 {
		// Every waiting send gave up (s itself does not while it lingers).
		a.releaseLocked(tq)
		return nil
	}
	batch := a.takeLocked(tq)
	if len(batch) == 0 {
		a.releaseLocked(tq)
		return nil
	}
	// Sends this batch could not hold go now if a slot is free; otherwise
	// the next request to return takes them.
	for len(tq.pending) > 0 && tq.inflight < a.cfg.inflight {
		next := a.takeLocked(tq)
		if len(next) == 0 {
			break
		}
		tq.inflight++
		next[0].lead = next
		signal(next[0].wake)
	}
	return batch
}

// takeLocked removes the next batch from tq: the oldest sends within
// maxMessages and maxBytes (at least one, unless none waits whose caller
// is still waiting). A send whose caller's context has ended is failed
// and dropped instead: its caller may not have noticed yet, and once it
// does it reports the send failed, while a batch would store it.
func (a *accumulator) takeLocked(tq *topicQueue) []*autoSend {
	now := time.Now()
	batch := make([]*autoSend, 0, min(len(tq.pending), a.cfg.maxMessages))
	i, bytes := 0, 0
	for ; i < len(tq.pending) && len(batch) < a.cfg.maxMessages; i++ {
		s := tq.pending[i]
		if err := s.ended(now); err != nil {
			s.err = &SendError{Topic: s.req.topic, Attempts: []SendAttempt{{Err: err}}}
			s.done = true
			tq.pendBytes -= s.size
			signal(s.wake)
			continue
		}
		if len(batch) > 0 && bytes+s.size > a.cfg.maxBytes {
			break
		}
		bytes += s.size
		s.taken = true
		batch = append(batch, s)
	}
	rest := copy(tq.pending, tq.pending[i:])
	clear(tq.pending[rest:])
	tq.pending = tq.pending[:rest]
	tq.pendBytes -= bytes
	return batch
}

// ended is the error of s's caller's context when it has ended (its
// deadline counts from now, before the context's timer fires), else nil.
func (s *autoSend) ended(now time.Time) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if !s.dl.IsZero() && !now.Before(s.dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// releaseLocked frees a slot. The topic's entry stays (like its route):
// lastSize and lastDone matter for the next send.
func (a *accumulator) releaseLocked(tq *topicQueue) { tq.inflight-- }

// finish records the outcome of batch, wakes its callers and passes the
// slot on to the sends waiting for one, if any: to the first of them,
// which lingers (linger, or adaptiveWait for as many messages as this
// batch and the waiting sends make) and sends.
func (a *accumulator) finish(batch []*autoSend, outcome func(i int, s *autoSend)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range batch {
		outcome(i, s)
		s.done = true
		signal(s.wake)
	}
	tq := a.topics[batch[0].req.topic]
	tq.lastSize, tq.lastDone = len(batch), time.Now()
	if len(tq.pending) == 0 || tq.lingering {
		// A lingering slot holder takes what waits.
		a.releaseLocked(tq)
		return
	}
	target, wait := len(batch)+len(tq.pending), adaptiveWait
	if a.cfg.linger > 0 {
		target, wait = a.cfg.maxMessages, a.cfg.linger
	}
	if !a.fullLocked(tq, target) {
		a.startLingerLocked(tq, target)
		tq.pending[0].linger = wait
		signal(tq.pending[0].wake)
		return
	}
	next := a.takeLocked(tq)
	if len(next) == 0 {
		a.releaseLocked(tq)
		return
	}
	next[0].lead = next
	signal(next[0].wake)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// work returns (and clears) what the caller of s must do before it may
// stop waiting: send a batch, or linger and send one.
func (a *accumulator) work(s *autoSend) (lead []*autoSend, linger time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	lead, linger = s.lead, s.linger
	s.lead, s.linger = nil, 0
	return lead, linger
}

// isDone reports whether the outcome of s is known.
func (a *accumulator) isDone(s *autoSend) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return s.done
}

// abandon is called when the caller's context has ended. It returns the
// work handed to s meanwhile, which the caller must still do (others wait
// for it); otherwise, unless the outcome is known, it takes s out of its
// queue (if it is still there) and gone says the caller may return.
func (a *accumulator) abandon(s *autoSend) (lead []*autoSend, linger time.Duration, gone bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.lead != nil || s.linger > 0 {
		lead, linger = s.lead, s.linger
		s.lead, s.linger = nil, 0
		return lead, linger, false
	}
	if s.done {
		return nil, 0, false
	}
	if tq := a.topics[s.req.topic]; !s.taken && tq != nil {
		for i, q := range tq.pending {
			if q == s {
				tq.pending = append(tq.pending[:i], tq.pending[i+1:]...)
				tq.pendBytes -= s.size
				break
			}
		}
	}
	return nil, 0, true
}

// sendAuto sends r through the accumulator and returns its own result.
func (p *Producer) sendAuto(ctx context.Context, r *sendRequest) (*SendResult, error) {
	routes, err := p.running()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// The batch runs under the producer's context, not the caller's:
		// queued, a caller that has given up would have its message stored.
		return nil, &SendError{Topic: r.topic, Attempts: []SendAttempt{{Err: err}}}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.sendTimeout)
		defer cancel()
	}
	a := p.acc
	s := &autoSend{ctx: ctx, req: r, size: batchEntrySize(r.msg), wake: make(chan struct{}, 1)}
	s.dl, _ = ctx.Deadline()
	batch, linger := a.enqueue(s)
	for {
		if linger > 0 {
			batch = a.lingerAndTake(ctx, s, linger)
		}
		if len(batch) > 0 {
			p.runBatch(routes, batch)
		}
		// Work handed to s is done even when its own context has ended:
		// other callers wait for it.
		if batch, linger = a.work(s); batch != nil || linger > 0 {
			continue
		}
		if a.isDone(s) {
			break
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			var gone bool
			if batch, linger, gone = a.abandon(s); gone {
				// Never sent, or sent in a batch whose answer has not come
				// (the outcome is unknown, as for a plain send that times out).
				return nil, &SendError{Topic: r.topic, Attempts: []SendAttempt{{Err: ctx.Err()}}}
			}
		}
	}
	// s is done: its fields no longer change.
	if s.retry == nil {
		return s.res, s.err
	}
	rt := s.retry
	sd := p.newSendDeadline(ctx) // ctx has a deadline: nothing to release
	if rt.alone {
		if p.closed() {
			return nil, &SendError{Topic: r.topic, Attempts: []SendAttempt{{Err: ErrClosed}}}
		}
		return p.runAttempts(&sd, routes, rt.info, r, &rt.st)
	}
	more, fresh := p.retryAfter(&sd, routes, r, rt.err)
	if !more || rt.st.done >= p.maxAttempts(r) || p.closed() {
		return nil, rt.st.errs()
	}
	if fresh != nil {
		rt.info = fresh
	}
	return p.runAttempts(&sd, routes, rt.info, r, &rt.st)
}

// runBatch sends batch as one request (alone when it holds one message),
// the first attempt of each of its messages, then hands the topic's slot
// on. Its context ends at the latest of its callers' deadlines, or when
// the producer closes: a caller whose own deadline passes stops waiting,
// but the others still get their answer.
func (p *Producer) runBatch(routes *routeManager, batch []*autoSend) {
	dl := batch[0].dl
	for _, s := range batch[1:] {
		if s.dl.After(dl) {
			dl = s.dl
		}
	}
	ctx, cancel := context.WithDeadline(p.baseContext(), dl)
	defer cancel()
	r := batch[0].req
	if len(batch) > 1 {
		r = &sendRequest{topic: r.topic, batch: make([]*Message, len(batch)), uniqIDs: make([]string, len(batch))}
		for i, s := range batch {
			r.batch[i] = s.req.msg
			r.uniqIDs[i] = s.req.uniqIDs[0]
		}
	}
	info, err := routes.publishInfo(ctx, r.topic, p.cfg.autoCreate, p.cfg.defaultTopicQueueNums)
	if err != nil {
		p.acc.finish(batch, func(_ int, s *autoSend) { s.err = err })
		return
	}
	st := attemptState{topic: r.topic}
	sd := p.newSendDeadline(ctx) // ctx has a deadline: nothing to release
	res, err := p.runBatchAttempt(&sd, routes, info, r, &st)
	var be *BrokerError
	if len(batch) > 1 && errors.As(err, &be) && refusedAsBatch(be) && !p.acc.refusedWarned.Swap(true) {
		p.log.Warn("a broker refused a batch AutoBatch made; its messages go alone (warned once). "+
			"If it refuses every batch, keep AutoBatch's maxMessages and maxBytes within the brokers' maxBatchMessages and maxMessageSize",
			zap.String("topic", r.topic), zap.Int("messages", len(batch)), zap.Error(err))
	}
	p.acc.finish(batch, func(i int, s *autoSend) {
		switch {
		case err == nil && len(batch) == 1:
			s.res = res
		case err == nil:
			s.res = splitBatchResult(res, r, i)
		case st.done == 0:
			s.err = err // no attempt was made (no queue)
		case len(batch) > 1 && refusedAsBatch(err):
			// Nothing was stored, and the refusal may be the batch's
			// alone (a broker's maxBatchMessages or maxMessageSize below
			// it, a neighbour's DELAY or overlong properties): every
			// message goes alone with all its attempts, its caller having
			// asked for no batch. An idempotent one keeps its queue and
			// sequence number, which nothing took.
			s.retry = &batchRetry{info: info, err: err, alone: true, st: attemptState{topic: r.topic}}
			if st.extra != nil {
				s.retry.st.mq, s.retry.st.chosen, s.retry.st.extra = st.mq, true, [][]string{st.extra[i]}
			}
		default:
			s.retry = &batchRetry{info: info, err: err, st: attemptState{
				done: st.done, mq: st.mq, chosen: true, lastBroker: st.mq.BrokerName,
				topic: r.topic, sendErr: &SendError{Topic: r.topic, Attempts: append([]SendAttempt(nil), st.errs().Attempts...)},
			}}
			if st.extra != nil {
				s.retry.st.extra = [][]string{st.extra[i]}
			}
		}
	})
}

// runBatchAttempt makes the one attempt of a batch request.
func (p *Producer) runBatchAttempt(sd *sendDeadline, routes *routeManager, info *TopicPublishInfo, r *sendRequest, st *attemptState) (*SendResult, error) {
	mq, ok := p.chooseQueue(info, r, "")
	if !ok {
		return nil, fmt.Errorf("%w: topic %q", ErrNoQueue, r.topic)
	}
	st.mq, st.chosen = mq, true
	if p.seq != nil {
		st.extra = make([][]string, max(1, len(r.batch)))
		for j := range st.extra {
			st.extra[j] = p.seq.assign(mq)
		}
	}
	st.done = 1
	waitOK := p.sticky(r) || info.singleGroup()
	return p.attempt(sd, routes, r, mq, st.extra, st, p.maxAttempts(r) == 1, waitOK)
}

// splitBatchResult is message i's share of a batch's result: its
// UNIQ_KEY, its entry of the comma-joined offset msgIds (RocketMQ and
// raftmq brokers answer a batch so), and the queue offset first+i, since
// a batch is stored consecutively in one queue.
func splitBatchResult(res *SendResult, r *sendRequest, i int) *SendResult {
	out := *res
	out.MsgID = r.uniqIDs[i]
	out.QueueOffset = res.QueueOffset + int64(i)
	out.OffsetMsgID = ""
	ids := res.OffsetMsgID
	for j := 0; ; j++ {
		k := strings.IndexByte(ids, ',')
		if j == i {
			if k >= 0 {
				ids = ids[:k]
			}
			out.OffsetMsgID = ids
			break
		}
		if k < 0 {
			break
		}
		ids = ids[k+1:]
	}
	return &out
}
