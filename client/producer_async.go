package client

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
)

// SendAsync's callback path. A goroutine per send that blocks on its
// answer costs a stack, its growth through the attempt loop, a context
// and a park and wake-up per message. Here the first attempt's request
// is sent from the caller's goroutine and its answer handled where it is
// read: a success (the usual case) is turned into the result there and
// the user's callback queued to the producer's callbackQueue, whose
// goroutine runs the callbacks a burst of answers brings in one go.
// Anything else (an error, a refusal, no route or connection yet, tracing,
// idempotence, AutoBatch) takes the goroutine path with the attempt loop,
// which continues from the first answer instead of sending again; its
// outcome is queued to the same callbackQueue.

// firstAnswer is the outcome of a first attempt sent by the callback path.
type firstAnswer struct {
	addr  string
	start time.Time
	resp  *remoting.RemotingCommand
	err   error
}

// asyncSend is one SendAsync on the callback path.
type asyncSend struct {
	p      *Producer
	pctx   context.Context // the producer's: a fallback's sends end with it
	r      *sendRequest
	cb     func(*SendResult, error)
	routes *routeManager
	info   *TopicPublishInfo
	mq     MessageQueue
	addr   string
	start  time.Time
	dl     time.Time // the send's deadline
	own    bool      // dl is SendTimeout's, not the caller's
}

// wallClock is the real time of start: a call's deadline is real time
// even under an injected clock.
func (p *Producer) wallClock(start time.Time) time.Time {
	if !p.cfg.common.realClock {
		return time.Now()
	}
	return start
}

// startAsync sends r's first attempt with its answer handled in a
// callback and reports whether it did; false leaves r untouched for the
// goroutine path. The caller holds an asyncS token and a wg count, both
// released when cb has run.
func (p *Producer) startAsync(ctx, pctx context.Context, routes *routeManager, r *sendRequest, cb func(*SendResult, error)) bool {
	if p.tracer != nil || p.seq != nil || r.oneway || r.selector != nil || (p.acc != nil && p.acc.batchable(r)) {
		return false
	}
	info := routes.cachedPublishInfo(r.topic)
	if info == nil {
		return false
	}
	mq, ok := p.chooseQueue(info, r, "")
	if !ok {
		return false
	}
	addr := routes.brokerAddr(mq.BrokerName)
	if addr == "" {
		return false
	}
	sd := p.newSendDeadline(ctx)
	if sd.err() != nil {
		return false // the attempt loop fails it without sending
	}
	start := p.cfg.common.now()
	req, err := p.encode(r, mq, nil, start)
	if err != nil {
		return false
	}
	a := &asyncSend{p: p, pctx: pctx, r: r, cb: cb, routes: routes, info: info, mq: mq, addr: addr,
		start: start, dl: sd.dl, own: sd.own}
	sent, err := p.rc.StartCall(addr, req, sd.attempt(p.wallClock(start), p.cfg.attemptTimeout, p.maxAttempts(r) == 1), a.answered)
	if !sent || err != nil {
		return false
	}
	if pctx.Err() != nil {
		// Close ran between SendAsync's state check and the call's start,
		// and its failAsyncCalls may have missed the call.
		p.failAsyncCalls()
	}
	if p.callbackStarts != nil {
		p.callbackStarts.Add(1)
	}
	return true
}

// answered handles the first attempt's answer on the goroutine that read
// it: it must not block.
func (a *asyncSend) answered(resp *remoting.RemotingCommand, err error) {
	p := a.p
	if err == nil {
		switch resp.Code {
		case remoting.ResponseSuccess, remoting.ResponseFlushDiskTimeout, remoting.ResponseFlushSlaveTimeout, remoting.ResponseSlaveNotAvailable:
			if res, rerr := p.result(a.r, a.mq, a.addr, resp); rerr == nil {
				a.routes.markUp(a.mq.BrokerName, a.addr)
				p.fault.update(a.mq.BrokerName, p.cfg.common.now().Sub(a.start), false)
				a.r.recycle()
				p.asyncDone(a.cb, res, nil)
				return
			}
		}
	}
	go a.continueAttempts(resp, err)
}

// continueAttempts runs the attempt loop from the first answer, as
// SendAsync's goroutine path would have.
func (a *asyncSend) continueAttempts(resp *remoting.RemotingCommand, err error) {
	p := a.p
	var sctx context.Context
	var cancel context.CancelFunc
	if a.own {
		sctx, cancel = context.WithCancel(a.pctx)
	} else {
		sctx, cancel = context.WithDeadline(a.pctx, a.dl)
	}
	defer cancel()
	sd := sendDeadline{caller: sctx, dl: a.dl, own: a.own}
	st := &attemptState{topic: a.r.topic, mq: a.mq, chosen: true,
		first: &firstAnswer{addr: a.addr, start: a.start, resp: resp, err: err}}
	res, serr := p.runAttempts(&sd, a.routes, a.info, a.r, st)
	sd.release()
	a.r.recycle()
	p.asyncDone(a.cb, res, serr)
}

// asyncDone ends a SendAsync on either path: cb is queued to run, and the
// send's in-flight token goes back once it has run (or once it has
// blocked, see callbackQueue), so slow callbacks hold sends back instead
// of letting the queue grow.
func (p *Producer) asyncDone(cb func(*SendResult, error), res *SendResult, err error) {
	p.callbacks.push(asyncResult{cb: cb, res: res, err: err})
}

// asyncResult is a callback waiting to run.
type asyncResult struct {
	cb  func(*SendResult, error)
	res *SendResult
	err error
}

// callbackQueue runs queued callbacks in order on a goroutine started
// when the queue fills and ended when it empties, so a burst of answers
// costs one goroutine start and no hand-off per callback. Each callback
// holds its send's in-flight token (tokens) until it returns. A callback
// that blocks is caught by a stall check, armed while callbacks wait or
// while a SendAsync waits for a token: when no callback was taken since
// the previous check, every running callback gives its token back early
// (a callback that itself calls SendAsync then gets a slot) and, if
// callbacks wait, another runner starts, up to maxRunners. Callbacks thus
// start in order, but with more than one runner they may overlap.
type callbackQueue struct {
	wg     *sync.WaitGroup // the producer's: one count per queued callback
	tokens chan struct{}   // the producer's asyncS: one token per queued or running callback
	log    *zap.Logger     // the producer's: a callback's panic is logged here

	mu       sync.Mutex
	items    []asyncResult // guarded by mu; items[head:] wait
	head     int           // guarded by mu
	runners  int           // guarded by mu
	holding  []*cbRunner   // guarded by mu; runners inside a callback that still hold its token
	taken    uint64        // guarded by mu; callbacks taken so far
	seen     uint64        // guarded by mu; taken at the last check
	checking bool          // guarded by mu; a stall check is armed
	waiters  int           // guarded by mu; SendAsync calls waiting for a token
}

// cbRunner is one runner goroutine of a callbackQueue.
type cbRunner struct {
	holds bool // guarded by the queue's mu: its callback's token is still held
}

// stallCheck is how often waiting callbacks are checked for progress.
const stallCheck = 5 * time.Millisecond

// maxRunners bounds the goroutines running callbacks: blocked callbacks
// get company only this far, not one goroutine per check.
const maxRunners = 4

func (q *callbackQueue) push(it asyncResult) {
	q.mu.Lock()
	q.items = append(q.items, it)
	if q.runners == 0 {
		q.runners++
		go q.run()
	} else {
		q.armLocked()
	}
	q.mu.Unlock()
}

// watch arms the stall check for a SendAsync about to wait for a token,
// until the returned func is called: the tokens may be held by blocked
// callbacks, perhaps its own caller, or by sends in flight whose
// callbacks block only once they run, so the check runs for as long as
// the wait lasts.
func (q *callbackQueue) watch() (unwatch func()) {
	q.mu.Lock()
	q.waiters++
	q.armLocked()
	q.mu.Unlock()
	return func() {
		q.mu.Lock()
		q.waiters--
		q.mu.Unlock()
	}
}

func (q *callbackQueue) armLocked() {
	if !q.checking {
		q.checking, q.seen = true, q.taken
		time.AfterFunc(stallCheck, q.check)
	}
}

// check runs stallCheck after it was armed: with no callback taken since,
// every runner is inside a callback, so their tokens go back and, when
// callbacks wait, another runner starts. It re-arms itself while
// callbacks wait or run holding a token, or a SendAsync waits for one.
func (q *callbackQueue) check() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.taken == q.seen {
		for _, r := range q.holding {
			r.holds = false
			<-q.tokens
		}
		q.holding = q.holding[:0]
		if q.head < len(q.items) && q.runners < maxRunners {
			q.runners++
			go q.run()
		}
	}
	if q.head == len(q.items) && len(q.holding) == 0 && q.waiters == 0 {
		q.checking = false
		return
	}
	q.seen = q.taken
	time.AfterFunc(stallCheck, q.check)
}

func (q *callbackQueue) run() {
	me := &cbRunner{}
	for {
		q.mu.Lock()
		if q.head == len(q.items) {
			q.items, q.head = q.items[:0], 0
			q.runners--
			q.mu.Unlock()
			return
		}
		it := q.items[q.head]
		q.items[q.head] = asyncResult{}
		q.head++
		q.taken++
		if q.head >= 256 && q.head*2 >= len(q.items) {
			// A queue that never empties still reuses its storage.
			n := copy(q.items, q.items[q.head:])
			clear(q.items[n:])
			q.items, q.head = q.items[:n], 0
		}
		me.holds = true
		q.holding = append(q.holding, me)
		q.mu.Unlock()
		q.call(it)
		q.mu.Lock()
		if me.holds {
			me.holds = false
			q.holding = slices.DeleteFunc(q.holding, func(r *cbRunner) bool { return r == me })
			<-q.tokens
		}
		q.mu.Unlock()
		q.wg.Done()
	}
}

// call runs one callback. A panic in it is logged and goes no further, as
// RocketMQ's clients catch what a SendCallback throws: it would otherwise
// end the whole program from a goroutine the application does not own,
// and the runner would never give back the send's token and wait count,
// so every later SendAsync and Close would wait for good.
func (q *callbackQueue) call(it asyncResult) {
	defer func() {
		if v := recover(); v != nil {
			q.log.Error("SendAsync callback panicked; the panic is logged and dropped", zap.Any("panic", v), zap.Stack("stack"))
		}
	}()
	it.cb(it.res, it.err)
}
