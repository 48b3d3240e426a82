package remoting

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

func TestInvokeSyncAsyncOneway(t *testing.T) {
	var oneways atomic.Int32
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, echo, 2, 16)
		s.Register(RequestUnregisterClient, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			oneways.Add(1)
			return nil, nil
		}, 1, 16)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{})
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		req := NewRequest(RequestHeartBeat, &struct {
			Group string `ext:"group"`
		}{"g1"}, []byte("body"))
		req.SerializeType = st
		resp, err := c.InvokeSync(context.Background(), addr, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.SerializeType != st || string(resp.Body) != "body" || resp.ExtFields["group"] != "g1" {
			t.Fatalf("%v: got %v", st, resp)
		}
	}
	done := make(chan *RemotingCommand, 1)
	if err := c.InvokeAsync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, []byte("a")), func(r *RemotingCommand, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- r
	}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r == nil || string(r.Body) != "a" {
		t.Fatalf("async got %v", r)
	}
	if err := c.InvokeOneway(context.Background(), addr, NewRequest(RequestUnregisterClient, nil, nil)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "oneway handled", func() bool { return oneways.Load() == 1 })
}

func TestSyncTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			<-release
			return nil, nil
		}, 1, 4)
	})
	c := newTestClient(t, ClientConfig{DefaultTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestSendMessage, nil, nil))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestAsyncSemaphoreBoundsInflight(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			<-release
			return NewResponse(ResponseSuccess, ""), nil
		}, 4, 16)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{MaxAsyncInflight: 2, DefaultTimeout: 10 * time.Second})
	var ok atomic.Int32
	cb := func(r *RemotingCommand, err error) {
		if err == nil && r.Code == ResponseSuccess {
			ok.Add(1)
		}
	}
	for i := 0; i < 2; i++ {
		if err := c.InvokeAsync(context.Background(), addr, NewRequest(RequestSendMessage, nil, nil), cb); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.InvokeAsync(ctx, addr, NewRequest(RequestSendMessage, nil, nil), cb)
	if !errors.Is(err, ErrTooManyRequests) {
		t.Fatalf("third async: %v, want ErrTooManyRequests", err)
	}
	close(release)
	testutil.WaitFor(t, 5*time.Second, "two callbacks", func() bool { return ok.Load() == 2 })
	// Slots are back once callbacks ran.
	if err := c.InvokeAsync(context.Background(), addr, NewRequest(RequestSendMessage, nil, nil), cb); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "third callback", func() bool { return ok.Load() == 3 })
}

func TestResponseTableSweepTimesOutAsync(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			<-release
			return nil, nil // never answers
		}, 1, 4)
	})
	// The server answers nothing at all, which would condemn the
	// connection (TestClientRedialsAfterSilentTimeout); negative keeps it.
	c := newTestClient(t, ClientConfig{ScanInterval: 20 * time.Millisecond, CloseSilentAfter: -1})
	errc := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.InvokeAsync(ctx, s.Addr().String(), NewRequest(RequestSendMessage, nil, nil), func(_ *RemotingCommand, err error) {
		errc <- err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("callback got %v, want ErrTimeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("expired future never swept")
	}
	// The connection itself is still fine.
	if conns := c.liveConns(); len(conns) != 1 || conns[0].Closed() {
		t.Fatal("sweep closed the connection")
	}
}

func TestConnCloseFailsPendingAtOnce(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			close(started)
			<-release
			return nil, nil
		}, 1, 4)
	})
	c := newTestClient(t, ClientConfig{DefaultTimeout: 30 * time.Second})
	errc := make(chan error, 1)
	asyncErr := make(chan error, 1)
	go func() {
		_, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestSendMessage, nil, nil))
		errc <- err
	}()
	<-started
	if err := c.InvokeAsync(context.Background(), s.Addr().String(), NewRequest(RequestSendMessage, nil, nil),
		func(_ *RemotingCommand, err error) { asyncErr <- err }); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, sc := range s.Conns() {
		_ = sc.Close()
	}
	for _, ch := range []chan error{errc, asyncErr} {
		select {
		case err := <-ch:
			if !errors.Is(err, ErrConnClosed) {
				t.Fatalf("got %v, want ErrConnClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("pending call not failed by connection close")
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	s1 := NewServer(ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	s1.Register(RequestHeartBeat, echo, 1, 4)
	if err := s1.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s1.Addr().String()
	c := newTestClient(t, ClientConfig{})
	if _, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := s1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Server down: calls fail fast instead of hanging.
	if _, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil)); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("call to a stopped server: %v", err)
	}
	startServer(t, ServerConfig{ListenAddr: addr}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, echo, 1, 4)
	})
	resp, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, []byte("again")))
	if err != nil || string(resp.Body) != "again" {
		t.Fatalf("after restart: %v %v", resp, err)
	}
}

// TestServerToClientRequest: the broker calls a client on the client's
// own connection (NOTIFY_CONSUMER_IDS_CHANGED), as RocketMQ does.
func TestServerToClientRequest(t *testing.T) {
	conns := make(chan *Conn, 1)
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, func(_ context.Context, c *Conn, _ *RemotingCommand) (*RemotingCommand, error) {
			conns <- c
			return NewResponse(ResponseSuccess, ""), nil
		}, 1, 4)
	})
	c := newTestClient(t, ClientConfig{})
	type notify struct {
		Group string `ext:"consumerGroup,required"`
	}
	got := make(chan string, 1)
	c.RegisterProcessor(RequestNotifyConsumerIDsChanged, func(_ context.Context, _ *Conn, req *RemotingCommand) (*RemotingCommand, error) {
		var h notify
		if err := req.DecodeHeader(&h); err != nil {
			return nil, err
		}
		got <- h.Group
		return NewResponse(ResponseSuccess, "noted"), nil
	})
	if _, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestHeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	sc := <-conns
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := sc.InvokeSync(ctx, NewRequest(RequestNotifyConsumerIDsChanged, &notify{Group: "cg"}, nil))
	if err != nil || resp.Code != ResponseSuccess || resp.Remark != "noted" {
		t.Fatalf("server→client call: %v %v", resp, err)
	}
	if g := <-got; g != "cg" {
		t.Fatalf("client processor saw group %q", g)
	}
	// A code the client does not handle is answered, not ignored.
	resp, err = sc.InvokeSync(ctx, NewRequest(RequestGetConsumerRunningInfo, nil, nil))
	if err != nil || resp.Code != ResponseRequestCodeNotSupported {
		t.Fatalf("unhandled code: %v %v", resp, err)
	}
	if err := sc.InvokeOneway(ctx, NewRequest(RequestNotifyConsumerIDsChanged, &notify{Group: "ow"}, nil)); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != "ow" {
		t.Fatalf("oneway notify saw %q", g)
	}
}

func TestClientClosed(t *testing.T) {
	c := NewClient(ClientConfig{}, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InvokeSync(context.Background(), "127.0.0.1:1", NewRequest(RequestHeartBeat, nil, nil)); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("got %v", err)
	}
}
