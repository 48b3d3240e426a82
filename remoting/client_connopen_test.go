package remoting

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
)

// TestClientOnConnOpenOncePerDial: OnConnOpen listeners are told the
// address of every connection the client dials, once per connection,
// with the connection already in place, no client lock held (the
// listener reads the client's connections) and the dialing call's
// context; calls on an open connection and a dial that fails tell them
// nothing.
func TestClientOnConnOpenOncePerDial(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) { s.Register(RequestHeartBeat, echo, 1, 16) })
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{})
	type callKey struct{}
	var opened, calls []string
	var sawLive []bool
	c.OnConnOpen(func(ctx context.Context, a string) {
		opened = append(opened, a)
		name, _ := ctx.Value(callKey{}).(string)
		calls = append(calls, name)
		live := c.liveConns()
		sawLive = append(sawLive, len(live) == 1 && !live[0].Closed())
	})
	n := 0
	call := func() {
		t.Helper()
		n++
		ctx := context.WithValue(context.Background(), callKey{}, fmt.Sprint("call ", n))
		if _, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	want := func(dialers ...string) {
		t.Helper()
		if !slices.Equal(calls, dialers) {
			t.Fatalf("listener told of connections %v dialed by %q, want by %q", opened, calls, dialers)
		}
		for i, a := range opened {
			if a != addr || !sawLive[i] {
				t.Fatalf("open %d: address %q (want %q), connection in place %v", i, a, addr, sawLive[i])
			}
		}
	}
	call()
	call()
	if err := c.InvokeOneway(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	want("call 1")
	c.CloseConn(addr)
	call()
	want("call 1", "call 3")

	// Nothing listens on a port just freed: the dial fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	if _, err := c.InvokeSync(context.Background(), dead, NewRequest(RequestHeartBeat, nil, nil)); err == nil {
		t.Fatal("call to a closed port succeeded")
	}
	want("call 1", "call 3")
}
