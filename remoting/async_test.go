package remoting

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// holdingHandler parks every request's responder on a channel and answers
// later, as the broker's send processor does with the batcher.
func holdingHandler(held chan<- *Responder) AsyncHandlerFunc {
	return func(_ context.Context, _ *Conn, req *RemotingCommand, r *Responder) (*RemotingCommand, error) {
		if req.ExtFields["now"] == "true" {
			return NewResponse(ResponseSuccess, "at once"), nil
		}
		held <- r
		return nil, nil
	}
}

// answerWithID answers r with the request's "id" ext field as remark.
func answerWithID(r *Responder) bool {
	return r.Respond(NewResponse(ResponseSuccess, r.Request().ExtFields["id"]))
}

func TestAsyncAnswersMatchOpaqueOutOfOrder(t *testing.T) {
	held := make(chan *Responder, 64)
	hook := &asyncCountingHook{}
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessage, holdingHandler(held), AsyncOptions{Workers: 4, QueueSize: 64, MaxPending: 64})
		s.AddHook(hook)
	})
	const n = 32
	r := dialRaw(t, s.Addr().String())
	opaques := map[int32]string{}
	for i := 0; i < n; i++ {
		req := NewRequest(RequestSendMessage, nil, nil)
		req.ExtFields = map[string]string{"id": strconv.Itoa(i)}
		opaques[req.Opaque] = strconv.Itoa(i)
		r.send(req)
	}
	// Answer in reverse arrival order from one goroutine, like one Raft
	// entry's completion answering its requests.
	var rs []*Responder
	for i := 0; i < n; i++ {
		rs = append(rs, <-held)
	}
	for i := len(rs) - 1; i >= 0; i-- {
		if !answerWithID(rs[i]) {
			t.Fatal("first Respond reported not answered")
		}
		if answerWithID(rs[i]) {
			t.Fatal("second Respond answered again")
		}
	}
	for i := 0; i < n; i++ {
		resp := r.read()
		want, ok := opaques[resp.Opaque]
		if !ok || resp.Remark != want || !resp.IsResponse() || resp.Code != ResponseSuccess {
			t.Fatalf("response %v: opaque unknown or remark %q, want %q", resp, resp.Remark, want)
		}
		delete(opaques, resp.Opaque)
	}
	// An immediate answer goes out from the worker, with the same opaque.
	req := NewRequest(RequestSendMessage, nil, nil)
	req.ExtFields = map[string]string{"now": "true"}
	r.send(req)
	if resp := r.read(); resp.Opaque != req.Opaque || resp.Remark != "at once" {
		t.Fatalf("immediate answer %v", resp)
	}
	if b, a := hook.before.Load(), hook.after.Load(); b != n+1 || a != n+1 {
		t.Fatalf("hooks ran %d before / %d after, want %d each", b, a, n+1)
	}
	if p := s.routes.Load().processors[RequestSendMessage].async.pending.Load(); p != 0 {
		t.Fatalf("pending count %d after every answer", p)
	}
}

type asyncCountingHook struct{ before, after atomic.Int32 }

func (h *asyncCountingHook) BeforeRequest(string, *RemotingCommand) { h.before.Add(1) }
func (h *asyncCountingHook) AfterResponse(_ string, _, resp *RemotingCommand) {
	if resp != nil {
		h.after.Add(1)
	}
}

func TestAsyncPendingBoundAnswersSystemBusy(t *testing.T) {
	held := make(chan *Responder, 8)
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessage, holdingHandler(held), AsyncOptions{Workers: 2, QueueSize: 8, MaxPending: 2})
	})
	r := dialRaw(t, s.Addr().String())
	send := func(id string) *RemotingCommand {
		req := NewRequest(RequestSendMessage, nil, nil)
		req.ExtFields = map[string]string{"id": id}
		r.send(req)
		return req
	}
	send("a")
	send("b")
	first, second := <-held, <-held // both admitted and now pending
	busy := send("c")
	if resp := r.read(); resp.Code != ResponseSystemBusy || resp.Opaque != busy.Opaque {
		t.Fatalf("third request over a bound of 2: %v, want SYSTEM_BUSY for opaque %d", resp, busy.Opaque)
	}
	answerWithID(first)
	if resp := r.read(); resp.Remark != first.Request().ExtFields["id"] {
		t.Fatalf("got %v", resp)
	}
	send("d") // one slot free again
	answerWithID(<-held)
	answerWithID(second)
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		got[r.read().Remark] = true
	}
	if !got["d"] || !got[second.Request().ExtFields["id"]] {
		t.Fatalf("answers after the bound freed: %v", got)
	}
}

func TestAsyncOnewayIsNotAnswered(t *testing.T) {
	held := make(chan *Responder, 4)
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessage, holdingHandler(held), AsyncOptions{Workers: 1, QueueSize: 4, MaxPending: 4})
	})
	r := dialRaw(t, s.Addr().String())
	ow := NewRequest(RequestSendMessage, nil, nil)
	ow.ExtFields = map[string]string{"id": "oneway"}
	ow.Flag |= FlagOneway
	r.send(ow)
	if !answerWithID(<-held) {
		t.Fatal("oneway responder not answerable")
	}
	// The next answer on the wire is the normal request's: nothing was
	// written for the oneway one.
	req := NewRequest(RequestSendMessage, nil, nil)
	req.ExtFields = map[string]string{"id": "normal"}
	r.send(req)
	answerWithID(<-held)
	if resp := r.read(); resp.Opaque != req.Opaque || resp.Remark != "normal" {
		t.Fatalf("got %v", resp)
	}
}

func TestAsyncHandlerPanicAndError(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessage, func(_ context.Context, _ *Conn, req *RemotingCommand, _ *Responder) (*RemotingCommand, error) {
			if req.ExtFields["panic"] == "true" {
				panic("bug")
			}
			return nil, errors.New("disk on fire")
		}, AsyncOptions{Workers: 1, QueueSize: 4, MaxPending: 4})
	})
	c := newTestClient(t, ClientConfig{})
	req := NewRequest(RequestSendMessage, nil, nil)
	req.ExtFields = map[string]string{"panic": "true"}
	resp, err := c.InvokeSync(context.Background(), s.Addr().String(), req)
	if err != nil || resp.Code != ResponseSystemError || !strings.Contains(resp.Remark, "bug") {
		t.Fatalf("panic: got %v, %v", resp, err)
	}
	resp, err = c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestSendMessage, nil, nil))
	if err != nil || resp.Code != ResponseSystemError || resp.Remark != "disk on fire" {
		t.Fatalf("error: got %v, %v", resp, err)
	}
}

// shutdownStarted waits until s no longer accepts connections.
func shutdownStarted(t *testing.T, addr string) {
	testutil.WaitFor(t, 5*time.Second, "listener closed", func() bool {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return true
		}
		_ = nc.Close()
		return false
	})
}

func TestAsyncShutdownWaitsForPendingAnswers(t *testing.T) {
	held := make(chan *Responder, 4)
	s := NewServer(ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	s.RegisterAsync(RequestSendMessage, holdingHandler(held), AsyncOptions{Workers: 1, QueueSize: 4, MaxPending: 4})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	r := dialRaw(t, addr)
	req := NewRequest(RequestSendMessage, nil, nil)
	req.ExtFields = map[string]string{"id": "late"}
	r.send(req)
	pending := <-held

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	shutdownStarted(t, addr)
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request pending", err)
	default:
	}
	answerWithID(pending) // answered after Shutdown began: still delivered
	if resp := r.read(); resp.Opaque != req.Opaque || resp.Remark != "late" {
		t.Fatalf("got %v", resp)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestAsyncShutdownFailsUnansweredAtDeadline(t *testing.T) {
	held := make(chan *Responder, 4)
	s := NewServer(ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	s.RegisterAsync(RequestSendMessage, holdingHandler(held), AsyncOptions{Workers: 1, QueueSize: 4, MaxPending: 4})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, s.Addr().String())
	var reqs []*RemotingCommand
	for i := 0; i < 2; i++ {
		req := NewRequest(RequestSendMessage, nil, nil)
		req.ExtFields = map[string]string{"id": strconv.Itoa(i)}
		r.send(req)
		reqs = append(reqs, req)
	}
	never := []*Responder{<-held, <-held} // this handler never answers
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := s.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with unanswered requests: %v, want deadline exceeded", err)
	}
	got := map[int32]bool{}
	for range reqs {
		resp := r.read()
		if resp.Code != ResponseSystemError || !strings.Contains(resp.Remark, "shut down") {
			t.Fatalf("unanswered request got %v", resp)
		}
		got[resp.Opaque] = true
	}
	for _, req := range reqs {
		if !got[req.Opaque] {
			t.Fatalf("no answer for opaque %d", req.Opaque)
		}
	}
	for _, p := range never {
		if answerWithID(p) {
			t.Fatal("a late Respond after the shutdown's answer counted")
		}
	}
}

func TestAsyncConcurrentRespondersAndClient(t *testing.T) {
	// Many goroutines answer concurrently while the official-style client
	// waits on each call: every call gets its own answer (race detector).
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessage, func(_ context.Context, _ *Conn, _ *RemotingCommand, r *Responder) (*RemotingCommand, error) {
			go answerWithID(r)
			return nil, nil
		}, AsyncOptions{Workers: 2, QueueSize: 256, MaxPending: 256})
	})
	c := newTestClient(t, ClientConfig{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id := strconv.Itoa(w*1000 + i)
				req := NewRequest(RequestSendMessage, nil, nil)
				req.ExtFields = map[string]string{"id": id}
				resp, err := c.InvokeSync(context.Background(), s.Addr().String(), req)
				if err != nil || resp.Remark != id {
					t.Errorf("call %s: %v, %v", id, resp, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
}

func TestAsyncInlineBypassesBusyPool(t *testing.T) {
	// The only worker is stuck in a handler; a request that Inline picks
	// still runs (on the reader) and is answered.
	release := make(chan struct{})
	defer close(release)
	var inlineRuns atomic.Int32
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessage, func(_ context.Context, _ *Conn, req *RemotingCommand, _ *Responder) (*RemotingCommand, error) {
			if req.ExtFields["inline"] != "true" {
				<-release
				return NewResponse(ResponseSuccess, "pooled"), nil
			}
			inlineRuns.Add(1)
			return NewResponse(ResponseSuccess, "inline"), nil
		}, AsyncOptions{Workers: 1, QueueSize: 4, MaxPending: 8, Inline: func(req *RemotingCommand) bool {
			return req.ExtFields["inline"] == "true"
		}})
	})
	r := dialRaw(t, s.Addr().String())
	r.send(NewRequest(RequestSendMessage, nil, nil)) // occupies the worker
	for i := 0; i < 3; i++ {
		req := NewRequest(RequestSendMessage, nil, nil)
		req.ExtFields = map[string]string{"inline": "true"}
		r.send(req)
		if resp := r.read(); resp.Opaque != req.Opaque || resp.Remark != "inline" {
			t.Fatalf("inline request answered %v", resp)
		}
	}
	if inlineRuns.Load() != 3 {
		t.Fatalf("inline handler ran %d times", inlineRuns.Load())
	}
}
