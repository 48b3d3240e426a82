package client

import (
	"context"
	"sync"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// SendAsync's callback path. A goroutine per send that blocks on its
// answer costs a stack, its growth through the attempt loop, a context
// and a park and wake-up per message. Here the first attempt's request
// is sent from the caller's goroutine and its answer handled where it is
// read: a success (the usual case) is turned into the result there and
// the user's callback queued to asyncCallbacks, whose goroutine runs the
// callbacks a burst of answers brings in one go. Anything else (an error,
// a refusal, no route or connection yet, tracing, idempotence, AutoBatch)
// takes the goroutine path with the attempt loop, which continues from
// the first answer instead of sending again.

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
	start := p.cfg.common.now()
	req, err := p.encode(r, mq, nil, start)
	if err != nil {
		return false
	}
	a := &asyncSend{p: p, pctx: pctx, r: r, cb: cb, routes: routes, info: info, mq: mq, addr: addr,
		start: start, dl: sd.dl, own: sd.own}
	sent, err := p.rc.StartCall(addr, req, sd.attempt(p.wallClock(start), p.cfg.attemptTimeout, p.maxAttempts(r) == 1), a.answered)
	return sent && err == nil
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

// asyncDone ends a callback-path send: its in-flight token is given back
// at once (a slow callback does not hold sends back, and a callback may
// itself call SendAsync without waiting on other callbacks), and cb is
// queued to run.
func (p *Producer) asyncDone(cb func(*SendResult, error), res *SendResult, err error) {
	<-p.asyncS
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
// costs one goroutine start and no hand-off per callback. A callback
// that blocks gets company: a check armed while callbacks wait starts
// another goroutine when none was taken since the previous check.
type callbackQueue struct {
	wg *sync.WaitGroup // the producer's: one count per queued callback

	mu       sync.Mutex
	items    []asyncResult // guarded by mu; items[head:] wait
	head     int           // guarded by mu
	runners  int           // guarded by mu
	taken    uint64        // guarded by mu; callbacks taken so far
	seen     uint64        // guarded by mu; taken at the last check
	checking bool          // guarded by mu; a stall check is armed
}

// stallCheck is how often waiting callbacks are checked for progress.
const stallCheck = 5 * time.Millisecond

func (q *callbackQueue) push(it asyncResult) {
	q.mu.Lock()
	q.items = append(q.items, it)
	if q.runners == 0 {
		q.runners++
		go q.run()
	} else if !q.checking {
		q.checking, q.seen = true, q.taken
		time.AfterFunc(stallCheck, q.check)
	}
	q.mu.Unlock()
}

// check starts a runner when callbacks wait and none was taken since the
// last check (every runner is inside a callback), and re-arms itself
// while any wait.
func (q *callbackQueue) check() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		q.checking = false
		return
	}
	if q.taken == q.seen {
		q.runners++
		go q.run()
	}
	q.seen = q.taken
	time.AfterFunc(stallCheck, q.check)
}

func (q *callbackQueue) run() {
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
		q.mu.Unlock()
		it.cb(it.res, it.err)
		q.wg.Done()
	}
}
