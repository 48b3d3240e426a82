package remoting

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestInvokeWithEndedContextSendsNothing: a call whose context has already
// ended fails without sending its request; one that was sent anyway would
// be applied by the server while its caller reports a failure.
func TestInvokeWithEndedContextSendsNothing(t *testing.T) {
	var handled atomic.Int32
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		// One worker: requests are handled in the order they arrive.
		s.Register(RequestHeartBeat, func(ctx context.Context, c *Conn, req *RemotingCommand) (*RemotingCommand, error) {
			handled.Add(1)
			return echo(ctx, c, req)
		}, 1, 16)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{})
	if _, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
		t.Fatal(err) // the connection now exists
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.InvokeSync(ended, addr, NewRequest(RequestHeartBeat, nil, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("InvokeSync with an ended context: %v, want context.Canceled", err)
	}
	if err := c.InvokeAsync(ended, addr, NewRequest(RequestHeartBeat, nil, nil), func(*RemotingCommand, error) {
		t.Error("callback of a call that was never started")
	}); err == nil {
		t.Fatal("InvokeAsync with an ended context started")
	}
	if _, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if n := handled.Load(); n != 2 {
		t.Fatalf("server handled %d requests, want 2 (the calls with an ended context were sent)", n)
	}
}
