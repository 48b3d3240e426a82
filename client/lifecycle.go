package client

import (
	"bytes"
	"context"
	"reflect"
	"runtime"
	"strconv"
	"sync"
)

// waitGroup waits for wg, or until ctx ends and then returns ctx's error.
// Close uses it so that a listener or request that ignores cancellation
// cannot hold Close past the caller's deadline: the goroutines still
// running have been cancelled and end on their own, as does the one this
// starts to wait for them.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	if ctx.Done() == nil {
		wg.Wait()
		return nil
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done: // finished as ctx ended: nothing was given up
			return nil
		default:
			return ctx.Err()
		}
	}
}

// sendCallbackFrame is the function name of the frame every SendAsync
// callback runs under.
var sendCallbackFrame = runtime.FuncForPC(reflect.ValueOf((*callbackQueue).call).Pointer()).Name()

// inSendCallback reports whether the caller runs inside a SendAsync
// callback, of any producer: a Close made there cannot wait for the
// callbacks to have run, for its own is one of them. Only Close asks, so
// the stack walk costs the sends nothing.
func inSendCallback() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function == sendCallbackFrame {
			return true
		}
		if !more {
			return false
		}
	}
}

// goroutineID is the calling goroutine's id, read from the header of its
// stack trace ("goroutine 42 [running]:"). It costs a stack trace, so
// only long-lived goroutines (once, as they start), a listener call on a
// message to consume directly (rare) and Close take it.
func goroutineID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// selfWaits records the goroutines a Close waits for that run application
// code which may call that very Close (a consumer's listener, a
// transaction check-back listener): such a Close takes its own goroutine
// out of the wait (leave) instead of waiting for itself for good.
type selfWaits struct {
	mu sync.Mutex
	gs map[uint64]*selfWait // guarded by mu; by goroutine id
}

// selfWait is one goroutine of a selfWaits.
type selfWait struct {
	wg   *sync.WaitGroup
	done bool // guarded by selfWaits.mu: wg.Done was called for it
}

// run runs f on the calling goroutine as the count of wg that the caller
// added for it; wg.Done is called when f returns unless leave called it.
// A nil wg counts nothing: the goroutine is only recorded (mine).
func (s *selfWaits) run(wg *sync.WaitGroup, f func()) {
	id := goroutineID()
	w := &selfWait{wg: wg}
	s.mu.Lock()
	if s.gs == nil {
		s.gs = map[uint64]*selfWait{}
	}
	s.gs[id] = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.gs, id)
		done := w.done
		w.done = true
		s.mu.Unlock()
		if !done && wg != nil {
			wg.Done()
		}
	}()
	f()
}

// mine reports whether run runs the calling goroutine.
func (s *selfWaits) mine() bool {
	id := goroutineID()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gs[id] != nil
}

// leave takes the calling goroutine, if run runs it, out of its
// WaitGroup's count at once, and reports whether it did.
func (s *selfWaits) leave() bool {
	id := goroutineID()
	s.mu.Lock()
	w := s.gs[id]
	ok := w != nil && !w.done
	if ok {
		w.done = true
	}
	s.mu.Unlock()
	if ok && w.wg != nil {
		w.wg.Done()
	}
	return ok
}
