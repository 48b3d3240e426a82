package remoting

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// HandlerFunc processes one request. A non-nil error becomes a
// SYSTEM_ERROR response with the error text as remark. Returning (nil, nil)
// sends nothing now: the handler keeps req and answers later with
// conn.WriteResponse (long polling). For oneway requests the response is
// dropped.
type HandlerFunc func(ctx context.Context, conn *Conn, req *RemotingCommand) (*RemotingCommand, error)

// RPCHook observes every request handled or sent (RocketMQ's RPCHook).
// Hooks run on the calling goroutine and must be quick.
type RPCHook interface {
	// BeforeRequest runs before a request is handled (server) or sent
	// (client).
	BeforeRequest(remoteAddr string, req *RemotingCommand)
	// AfterResponse runs after the handler returned (server) or the
	// response arrived (client); resp is nil for oneway calls and failures.
	AfterResponse(remoteAddr string, req, resp *RemotingCommand)
}

// hookList is a copy-on-write list of hooks, read without locks.
type hookList struct {
	mu    sync.Mutex
	hooks atomic.Pointer[[]RPCHook]
}

func (l *hookList) add(h RPCHook) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var next []RPCHook
	if cur := l.hooks.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, h)
	l.hooks.Store(&next)
}

func (l *hookList) before(addr string, req *RemotingCommand) {
	if hs := l.hooks.Load(); hs != nil {
		for _, h := range *hs {
			h.BeforeRequest(addr, req)
		}
	}
}

func (l *hookList) after(addr string, req, resp *RemotingCommand) {
	if hs := l.hooks.Load(); hs != nil {
		for _, h := range *hs {
			h.AfterResponse(addr, req, resp)
		}
	}
}

// task is one request waiting for a worker.
type task struct {
	h     HandlerFunc
	async *asyncReg // set for asynchronous processors instead of h
	conn  *Conn
	req   *RemotingCommand
	size  int64 // the request's frame bytes, charged to the server's queued-request budget
}

// workerPool is a fixed set of workers behind a bounded queue (RocketMQ's
// per-processor ExecutorService). submit never blocks: a full queue is the
// caller's cue to answer SYSTEM_BUSY.
type workerPool struct {
	name    string
	workers int
	queue   *taskQueue
	wg      sync.WaitGroup
	started bool // guarded by the owner's lock
	// overloaded is set while the queue rejects work, so that an overload
	// episode logs one warning instead of one per request.
	overloaded atomic.Bool
}

func newWorkerPool(name string, workers, queueSize int) *workerPool {
	if workers < 1 {
		workers = 1
	}
	return &workerPool{name: name, workers: workers, queue: newTaskQueue(max(queueSize, 1))}
}

func (p *workerPool) start(run func(task)) {
	p.started = true
	p.wg.Add(p.workers)
	for i := 0; i < p.workers; i++ {
		go func() {
			defer p.wg.Done()
			for {
				t, ok := p.queue.pop()
				if !ok {
					return
				}
				run(t)
			}
		}()
	}
}

// submit queues t; false means the queue is full (or stopped).
func (p *workerPool) submit(t task, log *zap.Logger) bool {
	if p.queue.push(t) {
		p.overloaded.Store(false)
		return true
	}
	p.warnOverload(log, "processor queue full")
	return false
}

// warnOverload logs the first SYSTEM_BUSY answer of an overload episode.
func (p *workerPool) warnOverload(log *zap.Logger, why string) {
	if !p.overloaded.Swap(true) {
		log.Warn(why+", answering SYSTEM_BUSY", zap.String("processor", p.name), zap.Int("queue", p.queue.limit))
	}
}

// stop closes the queue: workers finish what is queued, then exit.
func (p *workerPool) stop() { p.queue.close() }

// wait blocks until the workers exited or ctx ends.
func (p *workerPool) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// busyResponse is RocketMQ's flow-control answer (NettyRemotingAbstract,
// RejectedExecutionException path).
func busyResponse() *RemotingCommand {
	return NewResponse(ResponseSystemBusy, "[OVERLOAD]system busy, start flow control for a while")
}

func notSupportedResponse(code int32) *RemotingCommand {
	return NewResponse(ResponseRequestCodeNotSupported, fmt.Sprintf("request type %d not supported", code))
}

// runTask runs one handler with hooks and panic containment and writes the
// response. Shared by Server and Client (server-initiated requests).
func runTask(t task, hooks *hookList, log *zap.Logger) {
	addr := t.conn.RemoteAddr()
	hooks.before(addr, t.req)
	resp, err := callHandler(t, log)
	if err != nil {
		resp = NewResponse(ResponseSystemError, err.Error())
	}
	hooks.after(addr, t.req, resp)
	if resp == nil || t.req.IsOneway() {
		return
	}
	if err := t.conn.WriteResponse(t.req, resp); err != nil {
		log.Debug("response not written", zap.String("remote", addr), zap.Int16("code", t.req.Code), zap.Error(err))
	}
}

func callHandler(t task, log *zap.Logger) (resp *RemotingCommand, err error) {
	defer func() {
		if r := recover(); r != nil {
			// A handler bug must not take the whole broker down; the caller
			// gets SYSTEM_ERROR like RocketMQ's catch(Throwable).
			log.Error("request handler panicked", zap.Int16("code", t.req.Code), zap.Any("panic", r), zap.Stack("stack"))
			resp, err = nil, fmt.Errorf("handler panic: %v", r)
		}
	}()
	return t.h(t.conn.Context(), t.conn, t.req)
}

// taskQueue is a worker pool's bounded FIFO. Its ring grows with what it
// holds, up to the bound: a channel of the configured capacity (RocketMQ's
// defaults run to 100,000 requests) would allocate and zero all of it for
// every pool of every server, though a queue is nearly always empty.
//
// The bound is a channel's: limit tasks waiting besides those an idle
// worker is about to take (a channel hands a value straight to a waiting
// receiver), so a pool of one worker and a queue of one holds one request
// running and one waiting however fast they come.
type taskQueue struct {
	limit int
	mu    sync.Mutex
	ready sync.Cond // signalled when a task is queued or the queue closes
	// Guarded by mu. The tasks are ring[head], ring[head+1], ... n of
	// them, wrapping around; n never exceeds limit+idle.
	ring   []task
	head   int
	n      int
	idle   int // workers waiting in pop
	closed bool
}

func newTaskQueue(limit int) *taskQueue {
	q := &taskQueue{limit: limit}
	q.ready.L = &q.mu
	return q
}

// push queues t unless the queue is full or closed.
func (q *taskQueue) push(t task) bool {
	q.mu.Lock()
	if q.closed || q.n >= q.limit+q.idle {
		q.mu.Unlock()
		return false
	}
	if q.n == len(q.ring) {
		ring := make([]task, min(max(16, 2*len(q.ring)), q.limit+q.idle))
		for i := range q.n {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = t
	q.n++
	q.mu.Unlock()
	q.ready.Signal()
	return true
}

// pop takes the oldest task, waiting for one; false once the queue is
// closed and empty.
func (q *taskQueue) pop() (task, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n == 0 && !q.closed {
		q.idle++
		q.ready.Wait()
		q.idle--
	}
	if q.n == 0 {
		return task{}, false
	}
	t := q.ring[q.head]
	q.ring[q.head] = task{} // the request is the worker's now; drop the queue's reference
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return t, true
}

// len is the number of tasks queued.
func (q *taskQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// close refuses later pushes; the tasks queued are still popped.
func (q *taskQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.ready.Broadcast()
}
