package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
)

// Producer sends messages to RocketMQ-protocol brokers found through the
// name servers. Build it with NewProducer, call Start, then send from any
// number of goroutines; Close stops everything it started. It owns a
// remoting client (one connection per broker), the route cache, one
// refresh goroutine and two heartbeat goroutines (producer_heartbeat.go),
// plus one goroutine per SendAsync that needs more than its first request
// answered well (producer_async.go).
type Producer struct {
	cfg      producerConfig
	log      *zap.Logger
	clientID string // in heartbeats and REPLY_TO_CLIENT (producer_heartbeat.go)
	ids      *UniqIDGenerator
	seq      *sequencer // nil unless Idempotent
	fault    *latencyFault
	acc      *accumulator  // nil unless AutoBatch
	asyncS   chan struct{} // one token per SendAsync in flight
	// callbacks runs SendAsync's callbacks (producer_async.go).
	callbacks callbackQueue
	// callbackStarts, set by tests only, counts the sends that took
	// SendAsync's callback path.
	callbackStarts *atomic.Int64

	mu        sync.Mutex
	state     producerState    // guarded by mu
	rc        *remoting.Client // set by Start
	routes    *routeManager    // set by Start
	ctx       context.Context  // cancelled by Close; parent of async sends
	cancel    context.CancelFunc
	refreshCh chan string         // topics to refresh now
	req       *requester          // guarded by mu; set by the first Request
	hb        *producerHeartbeats // guarded by mu; set by Start
	tracer    *tracer             // set by Start; nil unless WithTrace
	wg        sync.WaitGroup
	// closeDone is closed once a Close finished: every goroutine the
	// producer started ended and the connections are closed. A later
	// Close waits for it (set by Start).
	closeDone chan struct{}
}

type producerState int

const (
	stateNew producerState = iota
	stateStarted
	stateClosed
)

// NewProducer validates the options and builds a producer; nothing
// connects until Start. NameServers is required.
func NewProducer(opts ...ProducerOpt) (*Producer, error) {
	cfg := defaultProducerConfig()
	for _, o := range opts {
		if o != nil {
			o.applyProducer(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Producer{
		cfg:      cfg,
		log:      cfg.common.log.Named("producer").With(zap.String("group", cfg.group)),
		clientID: newClientID(cfg.common.clientIP, cfg.common.instanceName),
		ids:      NewUniqIDGenerator(cfg.common.clientIP, cfg.common.now),
		fault:    newLatencyFault(cfg.common.now, cfg.latencyMax, cfg.notAvailable),
		asyncS:   make(chan struct{}, cfg.maxAsyncInflight),
	}
	p.callbacks.wg, p.callbacks.tokens, p.callbacks.log = &p.wg, p.asyncS, p.log
	if cfg.idempotent {
		p.seq = newSequencer(cfg.producerID)
	}
	if cfg.autoBatch.maxMessages > 1 {
		p.acc = newAccumulator(cfg.autoBatch)
	}
	return p, nil
}

// ProducerID is the idempotent producer id ("" unless Idempotent).
func (p *Producer) ProducerID() string {
	if p.seq == nil {
		return ""
	}
	return p.seq.producerID
}

// Start connects the producer's machinery: the remoting client, the
// route refresh loop and the heartbeats. Routes are fetched lazily, per topic, on first send,
// so ctx (which bounds only Start's own work, not the producer's life)
// is only checked. Calling Start again is a no-op; after Close it returns
// ErrClosed.
func (p *Producer) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case stateStarted:
		return nil
	case stateClosed:
		return ErrClosed
	}
	tr, err := startTracer(ctx, p.cfg.common, p.cfg.group)
	if err != nil {
		return err
	}
	p.tracer = tr
	p.rc = remoting.NewClient(remoting.ClientConfig{DefaultTimeout: p.cfg.sendTimeout, TLS: p.cfg.common.tls.cfg}, p.cfg.common.log)
	p.cfg.common.sign(p.rc)
	p.routes = newRouteManager(p.rc, p.log.Named("route"), p.cfg.common.nameServers, p.cfg.common.requestTimeout, p.cfg.common.now)
	p.routes.onLeaderChange = p.fault.remove
	// A route with other members than before (one joined) starts a
	// heartbeat round at once, not at the next tick: a member that missed
	// the last round could neither check a transaction back nor push a
	// reply to this producer until then. Members marked down do not: a
	// send failing on every attempt would start round after round.
	p.routes.onMembersChange = func(string) { p.heartbeatSoon() }
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.closeDone = make(chan struct{})
	p.refreshCh = make(chan string, 64)
	p.state = stateStarted
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.refreshLoop() }()
	p.startHeartbeatsLocked()
	return nil
}

// Close cancels SendAsync calls in flight (their callbacks get the
// context error), stops the refresh loop, waits for every goroutine the
// producer started and closes its connections. ctx bounds the wait: when
// it ends first, Close still closes the connections (which fails the
// requests the remaining goroutines wait on) and returns ctx's error.
// Called from a SendAsync callback, Close does not wait, as RocketMQ's
// shutdown does not: the callbacks, the caller's own among them, run on
// the goroutines it would wait for. It returns at once; the callbacks of
// the sends it cancelled still run, once each, after the caller's
// returns, and the connections close once they all ran. It is safe to
// call twice: a Close after the first, but from a callback, waits within
// ctx for the first to have finished, so a program that closes its
// producer from a callback and again before it exits loses no callback.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.state != stateStarted {
		p.state = stateClosed
		closeDone := p.closeDone
		p.mu.Unlock()
		if closeDone == nil || inSendCallback() {
			return nil
		}
		select {
		case <-closeDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.state = stateClosed
	p.cancel()
	p.mu.Unlock()
	p.failAsyncCalls()
	if inSendCallback() {
		// The connections close once the callbacks ran: closed now, a
		// send Close cancelled could fail with the closed connection
		// instead of the cancellation its callback is promised.
		go func() {
			p.wg.Wait()
			_ = p.tracer.close(context.WithoutCancel(ctx))
			_ = p.rc.Close()
			close(p.closeDone)
		}()
		return nil
	}
	if err := waitGroup(ctx, &p.wg); err != nil {
		_ = p.tracer.close(ctx)
		_ = p.rc.Close()
		go func() { p.wg.Wait(); close(p.closeDone) }()
		return err
	}
	err := errors.Join(p.tracer.close(ctx), p.rc.Close())
	close(p.closeDone)
	return err
}

// failAsyncCalls fails the calls of SendAsync's callback path: they wait
// on no context, so Close ends them here, with the error a cancelled
// context gives the goroutine path's. Not a closed connection: the
// request may have reached the broker and been stored.
func (p *Producer) failAsyncCalls() {
	p.rc.FailAsyncCalls(fmt.Errorf("client: producer closed: %w", context.Canceled))
}

// running returns the started machinery or ErrNotStarted / ErrClosed.
func (p *Producer) running() (*routeManager, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.runningLocked(); err != nil {
		return nil, err
	}
	return p.routes, nil
}

// runningLocked is ErrNotStarted or ErrClosed unless the producer runs.
// p.mu is held.
func (p *Producer) runningLocked() error {
	switch p.state {
	case stateNew:
		return ErrNotStarted
	case stateClosed:
		return ErrClosed
	}
	return nil
}

// baseContext is the producer's context (cancelled by Close), or a
// cancelled one when the producer is not running.
func (p *Producer) baseContext() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == stateStarted {
		return p.ctx
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// closed reports whether Close was called.
func (p *Producer) closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == stateClosed
}

// sendOne sends one prepared message, through the accumulator when
// AutoBatch is on and the message may share a request.
func (p *Producer) sendOne(ctx context.Context, r *sendRequest) (res *SendResult, err error) {
	if p.tracer != nil {
		defer p.tracer.pub(p.cfg.group, r.msg, time.Now(), &res, &err)
	}
	if p.acc != nil && p.acc.batchable(r) {
		return p.sendAuto(ctx, r)
	}
	res, err = p.send(ctx, r)
	r.recycle() // a plain send keeps no reference to its request
	return res, err
}

// leaderRepollMin is the first pause before a route whose group has no
// usable leader is fetched again; the pause doubles up to
// RouteRefreshInterval. A raftmq group elects and registers its new
// leader within a second or so of losing the old one.
const leaderRepollMin = 200 * time.Millisecond

// refreshLoop refreshes every cached route each RouteRefreshInterval,
// then forgets the broker groups none names any more, and refreshes
// single topics at once when a send asks for it (a not-leader answer, a
// failed connection). A refreshed route with a group whose leader is
// unknown (the name server has not heard of the new one yet) is fetched
// again soon, with a growing pause, until it names one: a oneway send
// gets no not-leader answer to follow, and would go to a follower that
// drops it until the next RouteRefreshInterval.
func (p *Producer) refreshLoop() {
	t := time.NewTicker(p.cfg.common.routeRefreshInterval)
	defer t.Stop()
	unsure := map[string]bool{} // topics to fetch again when repoll fires
	var repoll *time.Timer
	var repollC <-chan time.Time
	pause := leaderRepollMin
	refresh := func(topic string) {
		p.refreshTopic(topic)
		if !p.routes.leaderUnsure(topic) {
			delete(unsure, topic)
			return
		}
		unsure[topic] = true
		if repollC == nil {
			repoll = time.NewTimer(pause)
			repollC = repoll.C
		}
	}
	defer func() {
		if repoll != nil {
			repoll.Stop()
		}
	}()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			for _, topic := range p.routes.cachedTopics() {
				refresh(topic)
			}
			p.routes.forgetOffline()
		case topic := <-p.refreshCh:
			refresh(topic)
		case <-repollC:
			repollC = nil
			pause = min(2*pause, p.cfg.common.routeRefreshInterval)
			for _, topic := range slices.Sorted(maps.Keys(unsure)) {
				refresh(topic)
			}
			if len(unsure) == 0 {
				pause = leaderRepollMin
			}
		}
	}
}

func (p *Producer) refreshTopic(topic string) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.common.requestTimeout)
	defer cancel()
	if _, err := p.routes.refresh(ctx, topic, p.cfg.autoCreate, p.cfg.defaultTopicQueueNums); err != nil && p.ctx.Err() == nil {
		p.log.Warn("route refresh failed", zap.String("topic", topic), zap.Error(err))
	}
}

// requestRefresh asks the refresh loop to refresh topic soon; when a
// refresh is already queued the request is dropped, it would be the same.
func (p *Producer) requestRefresh(topic string) {
	select {
	case p.refreshCh <- topic:
	default:
	}
}

// PublishQueues returns the writable queues of topic, fetching its route
// if needed (fetchPublishMessageQueues); useful with ManualSelector.
func (p *Producer) PublishQueues(ctx context.Context, topic string) ([]MessageQueue, error) {
	routes, err := p.running()
	if err != nil {
		return nil, err
	}
	info, err := routes.publishInfo(ctx, topic, p.cfg.autoCreate, p.cfg.defaultTopicQueueNums)
	if err != nil {
		return nil, err
	}
	return append([]MessageQueue(nil), info.Queues...), nil
}

// SendSync sends msg and waits for the broker's answer. Failed attempts
// are retried up to RetryTimesWhenSendFailed times on another broker
// group when one exists; a "not leader" answer is followed to the leader
// it names without using up a retry, and the last attempt waits out an
// election in its group (a raftmq group answering that it has no leader)
// rather than fail at once. The whole call is bounded by ctx's deadline,
// or by SendTimeout when ctx has none. On failure the error is a *SendError
// (errors.Is(err, ErrSendFailed)) listing every attempt.
func (p *Producer) SendSync(ctx context.Context, msg *Message) (*SendResult, error) {
	req, err := p.prepare(msg)
	if err != nil {
		return nil, err
	}
	return p.sendOne(ctx, req)
}

// Resend sends a stored message again to its topic, as RocketMQ's
// producer sends the MessageExt it is given (mqadmin queryMsgById -s
// true): body, flag, tags, keys and properties as stored, and its client
// msgId (UNIQ_KEY) kept when it has one, so consumers and traces see the
// same id. It goes to a queue the producer picks, as a plain send; the
// original producer's idempotence keys are not sent (the broker would
// drop the copy as a duplicate of the original).
func (p *Producer) Resend(ctx context.Context, m *MessageExt) (res *SendResult, err error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil message", ErrInvalidMessage)
	}
	msg := m.Message
	req, err := p.prepare(&msg) // keeps the message's UNIQ_KEY
	if err != nil {
		return nil, err
	}
	if p.tracer != nil {
		defer p.tracer.pub(p.cfg.group, &msg, time.Now(), &res, &err)
	}
	return p.send(ctx, req)
}

// SendWithSelector sends msg to the queue sel picks, for ordered
// messages: all attempts stay on that queue (following its group's
// leader), since moving to another queue would break the order.
func (p *Producer) SendWithSelector(ctx context.Context, msg *Message, sel MessageQueueSelector) (res *SendResult, err error) {
	if sel == nil {
		return nil, fmt.Errorf("%w: nil MessageQueueSelector", ErrInvalidMessage)
	}
	req, err := p.prepare(msg)
	if err != nil {
		return nil, err
	}
	req.selector = sel
	if p.tracer != nil {
		defer p.tracer.pub(p.cfg.group, msg, time.Now(), &res, &err)
	}
	return p.send(ctx, req)
}

// SendAsync sends msg in the background and returns once it is accepted
// for sending; cb then gets the result or the error, exactly once, on a
// goroutine the producer owns (it may block only briefly; a panic in it
// is logged and recovered, as RocketMQ's clients catch a callback's
// exception, so the producer goes on). At most
// MaxAsyncInflight sends are in flight: beyond that SendAsync waits for a
// slot until ctx ends. Retries and leader following work as in SendSync.
// A ctx that has already ended sends nothing: SendAsync returns its
// error. Close cancels sends still in flight.
func (p *Producer) SendAsync(ctx context.Context, msg *Message, cb func(*SendResult, error)) error {
	if cb == nil {
		return fmt.Errorf("%w: SendAsync needs a callback", ErrInvalidMessage)
	}
	req, err := p.prepare(msg)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// The send would outlive a cancellation that came before it (only
		// ctx's deadline reaches it), and a caller that has given up must
		// not have its message stored, as SendSync stores none.
		return fmt.Errorf("client: SendAsync: %w", err)
	}
	select {
	case p.asyncS <- struct{}{}:
	default:
		unwatch := p.callbacks.watch()
		select {
		case p.asyncS <- struct{}{}:
			unwatch()
		case <-ctx.Done():
			unwatch()
			return fmt.Errorf("client: SendAsync: %d sends in flight: %w", cap(p.asyncS), ctx.Err())
		}
	}
	p.mu.Lock()
	if st := p.state; st != stateStarted {
		p.mu.Unlock()
		<-p.asyncS
		if st == stateNew {
			return ErrNotStarted
		}
		return ErrClosed
	}
	p.wg.Add(1)
	pctx, routes := p.ctx, p.routes
	p.mu.Unlock()
	if p.startAsync(ctx, pctx, routes, req, cb) {
		return nil
	}
	// The send outlives the caller's ctx only through its deadline; Close
	// cancels it through the producer's context.
	var sctx context.Context
	var cancel context.CancelFunc
	if dl, ok := ctx.Deadline(); ok {
		sctx, cancel = context.WithDeadline(pctx, dl)
	} else {
		sctx, cancel = context.WithCancel(pctx)
	}
	go func() {
		res, err := p.sendOne(sctx, req)
		cancel()
		// The callback queue runs cb and then gives the token and the wg
		// count back; its stall check frees the token of a callback that
		// blocks (one that calls SendAsync while every slot is taken).
		p.asyncDone(cb, res, err)
	}()
	return nil
}

// SendOneway sends msg once without waiting for an answer: no retries, no
// result; the fastest and least safe way to send.
//
// With no answer there is no not-leader answer to follow: a member that
// lost its group's leadership while its process lives on (a leadership
// transfer, a disk-full hand-off, a healed partition) drops the message
// unseen, and every later oneway send to it, until the producer learns
// the new leader: from its next route refresh (RouteRefreshInterval, 30 s
// by default), or sooner from a SendSync or SendAsync to the group, whose
// not-leader answer it follows. A leader whose process died is noticed
// once its connection has closed: that send fails, the following ones go
// to another member, which drops them unless it won the election, and the
// producer asks the name servers again until they name the new leader
// (within a second or so). RocketMQ's clients drop oneway sends to a
// deposed master the same way, until their route refresh; send with an
// answer where a message must not be lost.
func (p *Producer) SendOneway(ctx context.Context, msg *Message) error {
	req, err := p.prepare(msg)
	if err != nil {
		return err
	}
	req.oneway = true
	_, err = p.send(ctx, req)
	return err
}

// SendBatch sends msgs as one SEND_BATCH_MESSAGE: all to the same topic,
// none delayed, stored together on one queue. Batch bodies are never
// compressed. The result's MsgID joins every message's UNIQ_KEY with ','.
func (p *Producer) SendBatch(ctx context.Context, msgs []*Message) (*SendResult, error) {
	req, err := p.prepareBatch(msgs)
	if err != nil {
		return nil, err
	}
	return p.send(ctx, req)
}

// errIsConnFailure reports whether err means the request never reached a
// live broker (dial failure or a closed connection), as opposed to a
// timeout whose outcome is unknown.
func errIsConnFailure(err error) bool {
	return errors.Is(err, remoting.ErrConnClosed)
}
