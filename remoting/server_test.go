package remoting

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// rawConn is a hand-driven client for tests that must see exact frames.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) send(c *RemotingCommand) {
	r.t.Helper()
	frame, err := EncodeFrame(c)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(frame); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) read() *RemotingCommand {
	r.t.Helper()
	_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var lb [4]byte
	if _, err := io.ReadFull(r.br, lb[:]); err != nil {
		r.t.Fatalf("read length: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(lb[:]))
	if _, err := io.ReadFull(r.br, frame); err != nil {
		r.t.Fatalf("read frame: %v", err)
	}
	c, err := DecodeFrame(frame)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func TestUnknownCodeAnswersRequestCodeNotSupported(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) { s.Register(RequestHeartBeat, echo, 1, 1) })
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		r := dialRaw(t, s.Addr().String())
		req := NewRequest(RequestPullMessage, nil, nil)
		req.SerializeType = st
		r.send(req)
		resp := r.read()
		if resp.Code != ResponseRequestCodeNotSupported || resp.Opaque != req.Opaque || !resp.IsResponse() ||
			resp.SerializeType != st || !strings.Contains(resp.Remark, "11") {
			t.Fatalf("%v: got %v", st, resp)
		}
	}
}

func TestDefaultProcessorAndHandlerError(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterDefault(func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			return nil, errors.New("disk on fire")
		}, 1, 4)
	})
	c := newTestClient(t, ClientConfig{})
	resp, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestPullMessage, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != ResponseSystemError || resp.Remark != "disk on fire" {
		t.Fatalf("got %v", resp)
	}
}

func TestHandlerPanicBecomesSystemError(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			panic("bug")
		}, 1, 4)
	})
	c := newTestClient(t, ClientConfig{})
	resp, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestSendMessage, nil, nil))
	if err != nil || resp.Code != ResponseSystemError || !strings.Contains(resp.Remark, "bug") {
		t.Fatalf("got %v, %v", resp, err)
	}
}

func TestWorkerPoolFullAnswersSystemBusy(t *testing.T) {
	release := make(chan struct{})
	var running atomic.Int32
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			running.Add(1)
			<-release
			return NewResponse(ResponseSuccess, ""), nil
		}, 1, 1)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{DefaultTimeout: 10 * time.Second})
	results := make(chan int16, 2)
	call := func() {
		resp, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestSendMessage, nil, nil))
		if err != nil {
			t.Error(err)
			results <- -1
			return
		}
		results <- resp.Code
	}
	go call() // occupies the only worker
	testutil.WaitFor(t, 5*time.Second, "first request running", func() bool { return running.Load() == 1 })
	go call() // fills the queue of 1
	testutil.WaitFor(t, 5*time.Second, "queue full", func() bool {
		return s.routes.Load().processors[RequestSendMessage].pool.queue.len() == 1
	})
	// Third: worker busy and queue full => SYSTEM_BUSY at once.
	testutil.WaitFor(t, 5*time.Second, "SYSTEM_BUSY", func() bool {
		resp, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestSendMessage, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Code == ResponseSystemBusy && strings.Contains(resp.Remark, "OVERLOAD")
	})
	close(release)
	for i := 0; i < 2; i++ {
		if code := <-results; code != ResponseSuccess {
			t.Fatalf("queued request answered %d", code)
		}
	}
}

func TestOnewayGetsNoResponse(t *testing.T) {
	var handled atomic.Int32
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestUpdateConsumerOffset, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			handled.Add(1)
			return NewResponse(ResponseSuccess, "should be dropped"), nil
		}, 1, 8)
	})
	r := dialRaw(t, s.Addr().String())
	ow := NewRequest(RequestUpdateConsumerOffset, nil, nil)
	ow.Flag |= FlagOneway
	r.send(ow)
	unknown := NewRequest(RequestPullMessage, nil, nil) // answered by the reader, after the oneway
	testutil.WaitFor(t, 5*time.Second, "oneway handled", func() bool { return handled.Load() == 1 })
	sync := NewRequest(RequestUpdateConsumerOffset, nil, nil)
	r.send(sync) // same single worker: runs after the oneway
	first := r.read()
	if first.Opaque != sync.Opaque || first.Remark != "should be dropped" {
		t.Fatalf("first frame back is %v, want the answer to opaque %d", first, sync.Opaque)
	}
	r.send(unknown)
	if second := r.read(); second.Opaque != unknown.Opaque {
		t.Fatalf("unexpected extra frame %v", second)
	}
}

type countingHook struct {
	mu            sync.Mutex
	before, after []int16
}

func (h *countingHook) BeforeRequest(_ string, req *RemotingCommand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before = append(h.before, req.Code)
}

func (h *countingHook) AfterResponse(_ string, req, resp *RemotingCommand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if resp != nil {
		h.after = append(h.after, resp.Code)
	} else {
		h.after = append(h.after, -1)
	}
}

func TestHooksOnServerAndClient(t *testing.T) {
	sh := &countingHook{}
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, echo, 1, 4)
		s.AddHook(sh)
	})
	ch := &countingHook{}
	c := newTestClient(t, ClientConfig{})
	c.AddHook(ch)
	if _, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestHeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(sh.before) != 1 || sh.before[0] != RequestHeartBeat || len(sh.after) != 1 || sh.after[0] != ResponseSuccess {
		t.Fatalf("server hook saw %v / %v", sh.before, sh.after)
	}
	if len(ch.before) != 1 || ch.before[0] != RequestHeartBeat || len(ch.after) != 1 || ch.after[0] != ResponseSuccess {
		t.Fatalf("client hook saw %v / %v", ch.before, ch.after)
	}
}

func TestShutdownDrainsInFlightSlowHandler(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	s := NewServer(ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
		close(started)
		<-release
		return NewResponse(ResponseSuccess, "drained"), nil
	}, 1, 4)
	// The listener probes below may get a connection accepted too: never
	// block the closing goroutine on this channel.
	closed := make(chan *Conn, 16)
	s.OnConnClose(func(c *Conn) {
		select {
		case closed <- c:
		default:
		}
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{DefaultTimeout: 10 * time.Second})
	type result struct {
		resp *RemotingCommand
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestSendMessage, nil, nil))
		got <- result{resp, err}
	}()
	<-started
	shutdownErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownErr <- s.Shutdown(ctx)
	}()
	// While draining, the listener is gone: new connections are refused.
	testutil.WaitFor(t, 5*time.Second, "listener closed", func() bool {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			_ = nc.Close()
		}
		return err != nil
	})
	select {
	case <-shutdownErr:
		t.Fatal("Shutdown returned before the in-flight handler finished")
	default:
	}
	close(release)
	if err := <-shutdownErr; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	r := <-got
	if r.err != nil || r.resp.Code != ResponseSuccess || r.resp.Remark != "drained" {
		t.Fatalf("in-flight call got %v, %v", r.resp, r.err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("OnConnClose not called")
	}
}

func TestShutdownTimeoutForcesClose(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	s := NewServer(ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	s.Register(RequestSendMessage, func(ctx context.Context, _ *Conn, _ *RemotingCommand) (*RemotingCommand, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done(): // the connection closed: give up
		}
		return nil, nil
	}, 1, 4)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, ClientConfig{DefaultTimeout: 10 * time.Second})
	errc := make(chan error, 1)
	go func() {
		_, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestSendMessage, nil, nil))
		errc <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrConnClosed) {
		t.Fatalf("caller got %v, want ErrConnClosed", err)
	}
}

// TestConnRemoteAddrPort: a server's connection knows its peer's address
// parsed (a send stores it in each message as BORNHOST), IPv4 and IPv6.
func TestConnRemoteAddrPort(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "[::1]:0"} {
		s := NewServer(ServerConfig{ListenAddr: listen}, nil)
		if err := s.Start(); err != nil {
			if listen == "[::1]:0" {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			}
			t.Fatal(err)
		}
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 5*time.Second, "connection accepted", func() bool { return len(s.Conns()) == 1 })
		got, want := s.Conns()[0].RemoteAddrPort(), netip.MustParseAddrPort(nc.LocalAddr().String())
		if got != want || !got.IsValid() {
			t.Errorf("listening on %s: RemoteAddrPort %v, want %v", listen, got, want)
		}
		_ = nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Shutdown(ctx)
		cancel()
	}
}
