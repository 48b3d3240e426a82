package remoting

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// StartCall sends req to addr over its open connection and returns once
// the frame is queued; cb then gets the response, ErrTimeout once deadline
// passes (timed exactly, not by the periodic sweep), or ErrConnClosed when
// the connection fails. It neither dials nor takes one of InvokeAsync's
// in-flight slots: a caller that bounds its own calls waits on no
// goroutine per call. sent is false, with nothing sent and cb never
// called, when addr has no open connection (the caller takes its blocking
// path, which dials) or the frame could not be queued (err says why); a
// call that the connection's close failed while its frame waited counts
// as sent.
// cb runs on the connection's reader, the timer or the closer (or, for a
// close that came while the frame was being queued, on StartCall's
// goroutine before it returns), never while req is still being encoded:
// it must not block.
func (c *Client) StartCall(addr string, req *RemotingCommand, deadline time.Time, cb func(*RemotingCommand, error)) (sent bool, err error) {
	c.mu.Lock()
	e := c.entries[addr]
	closed := c.closed
	c.mu.Unlock()
	if closed || e == nil {
		return false, nil
	}
	conn := e.current()
	if conn == nil || conn.Closed() {
		return false, nil
	}
	call := &timedCall{c: c, conn: conn, addr: addr, req: req, cb: cb}
	c.hooks.before(addr, req)
	f, err := conn.startCall(context.Background(), req, deadline, call.done)
	if err != nil {
		return false, err
	}
	call.f = f
	t := time.AfterFunc(time.Until(deadline), call.expire)
	call.timer.Store(t)
	if call.finished.Load() {
		t.Stop()
	}
	return true, nil
}

// timedCall is one StartCall: its future and the timer that fails it at
// its deadline.
type timedCall struct {
	c        *Client
	conn     *Conn
	addr     string
	req      *RemotingCommand
	cb       func(*RemotingCommand, error)
	f        *future // set before the timer starts
	timer    atomic.Pointer[time.Timer]
	finished atomic.Bool
}

func (t *timedCall) done(resp *RemotingCommand, err error) {
	t.finished.Store(true)
	if tm := t.timer.Load(); tm != nil {
		tm.Stop()
	}
	t.c.hooks.after(t.addr, t.req, resp)
	t.cb(resp, err)
}

// expire fails the call at its deadline unless it completed first.
func (t *timedCall) expire() {
	f := t.f
	if t.conn.dropPending(f) {
		t.conn.timedOut(f)
	}
	f.complete(nil, fmt.Errorf("%w: code %d to %s", ErrTimeout, f.code, t.conn.remote))
}

// FailAsyncCalls completes every call still waiting in a callback
// (StartCall, InvokeAsync) with err at once, without closing the
// connections: an owner shutting down ends its sends now instead of at
// their deadlines. Sync calls are left to their contexts.
func (c *Client) FailAsyncCalls(err error) {
	for _, conn := range c.liveConns() {
		var failed []*future
		conn.mu.Lock()
		for op, f := range conn.pending {
			if f.cb != nil {
				failed = append(failed, f)
				delete(conn.pending, op)
			}
		}
		conn.mu.Unlock()
		for _, f := range failed {
			f.complete(nil, err)
		}
	}
}
