package remoting

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// AsyncHandlerFunc processes one request of an asynchronous processor
// (RocketMQ's AsyncNettyRequestProcessor). It returns a response (or an
// error, answered SYSTEM_ERROR) to answer at once, or (nil, nil) to answer
// later through r.Respond, from any goroutine. The worker goes back to its
// pool as soon as the handler returns, so a request waiting for
// replication holds no goroutine.
//
// Every request handed to the handler is answered exactly once: by its
// return value, by r.Respond, or — if neither happens before the server's
// Shutdown deadline — by the server with SYSTEM_ERROR.
type AsyncHandlerFunc func(ctx context.Context, conn *Conn, req *RemotingCommand, r *Responder) (*RemotingCommand, error)

// Responder answers one request of an asynchronous processor. Only the
// first answer counts; later calls return false.
type Responder struct {
	t     *asyncTracker
	reg   *asyncReg
	hooks *hookList
	log   *zap.Logger
	conn  *Conn
	req   *RemotingCommand
	// queued and size: the request's frame bytes, released from the
	// server's queued-request budget by the answer.
	queued *atomic.Int64
	size   int64
	done   atomic.Bool
	// prev and next link the tracker's open responders (guarded by t.mu).
	prev, next *Responder
}

// Request is the request being answered.
func (r *Responder) Request() *RemotingCommand { return r.req }

// Conn is the connection the request arrived on.
func (r *Responder) Conn() *Conn { return r.conn }

// Respond writes resp as the answer (nothing is written for a oneway
// request) and runs the server's AfterResponse hooks on the calling
// goroutine. It never blocks on the network: the frame goes to the
// connection's writer queue. It reports whether this call was the answer.
func (r *Responder) Respond(resp *RemotingCommand) bool {
	if !r.done.CompareAndSwap(false, true) {
		return false
	}
	// Free the admission slot and bytes before the answer leaves: a
	// client that sends again on receiving it must find them free.
	r.reg.pending.Add(-1)
	r.queued.Add(-r.size)
	r.hooks.after(r.conn.RemoteAddr(), r.req, resp)
	if resp != nil && !r.req.IsOneway() {
		if err := r.conn.WriteResponse(r.req, resp); err != nil {
			r.log.Debug("async response not written", zap.String("remote", r.conn.RemoteAddr()),
				zap.Int16("code", r.req.Code), zap.Error(err))
		}
	}
	r.t.remove(r)
	return true
}

// asyncReg is the per-registration state of an asynchronous processor.
type asyncReg struct {
	h AsyncHandlerFunc
	// maxPending bounds requests admitted and not yet answered (queued,
	// running, or waiting for Respond); above it the server answers
	// SYSTEM_BUSY, like a full queue.
	maxPending int64
	pending    atomic.Int64
	inline     func(*RemotingCommand) bool // see AsyncOptions.Inline
}

// admit counts one more request, false when the bound is reached.
func (a *asyncReg) admit() bool {
	if a.pending.Add(1) > a.maxPending {
		a.pending.Add(-1)
		return false
	}
	return true
}

// asyncTracker is the server's set of responders not yet answered, so
// Shutdown can wait for them and fail the ones left. The set is a list
// linked through the responders: adding and removing one (twice per
// request) hash nothing.
type asyncTracker struct {
	mu   sync.Mutex
	head *Responder // guarded by mu
	n    int        // guarded by mu; responders in the list
	// idle, when set by a waiting Shutdown, is closed once the set is empty.
	idle chan struct{} // guarded by mu
}

func (t *asyncTracker) add(r *Responder) {
	t.mu.Lock()
	r.prev, r.next = nil, t.head
	if t.head != nil {
		t.head.prev = r
	}
	t.head = r
	t.n++
	t.mu.Unlock()
}

// remove takes r out of the set; it runs once per added r (Respond's
// first call).
func (t *asyncTracker) remove(r *Responder) {
	t.mu.Lock()
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		t.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next = nil, nil
	t.n--
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
}

// wait blocks until every responder answered or ctx ends; it then answers
// the ones left with SYSTEM_ERROR and returns how many there were.
func (t *asyncTracker) wait(ctx context.Context) int {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return 0
	}
	idle := make(chan struct{})
	t.idle = idle
	t.mu.Unlock()
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
	}
	t.mu.Lock()
	t.idle = nil
	left := make([]*Responder, 0, t.n)
	for r := t.head; r != nil; r = r.next {
		left = append(left, r)
	}
	t.mu.Unlock()
	n := 0
	for _, r := range left {
		if r.Respond(NewResponse(ResponseSystemError, "server shut down before the request was answered")) {
			n++
		}
	}
	return n
}

// runAsync runs an asynchronous handler with hooks and panic containment.
// An immediate answer is written at once; otherwise the responder stays
// tracked until the handler's Respond (or Shutdown) answers it.
func (s *Server) runAsync(t task) {
	r := &Responder{t: &s.async, reg: t.async, hooks: &s.hooks, log: s.log, conn: t.conn, req: t.req,
		queued: &s.queued, size: t.size}
	s.async.add(r)
	s.hooks.before(t.conn.RemoteAddr(), t.req)
	resp, err := callAsync(t, r, s.log)
	if err != nil {
		resp = NewResponse(ResponseSystemError, err.Error())
	}
	if resp != nil {
		r.Respond(resp)
	}
}

func callAsync(t task, r *Responder, log *zap.Logger) (resp *RemotingCommand, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("request handler panicked", zap.Int16("code", t.req.Code), zap.Any("panic", p), zap.Stack("stack"))
			resp, err = nil, fmt.Errorf("handler panic: %v", p)
		}
	}()
	return t.async.h(t.conn.Context(), t.conn, t.req, r)
}
