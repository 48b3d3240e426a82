package remoting

import (
	"context"
	"net"
	"testing"
)

// TestClientOnConnOpenOncePerDial: OnConnOpen listeners are told the
// address of every connection the client dials, once per connection,
// with the connection already in place and no client lock held (the
// listener reads the client's connections); calls on an open connection
// and a dial that fails tell them nothing.
func TestClientOnConnOpenOncePerDial(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) { s.Register(RequestHeartBeat, echo, 1, 16) })
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{})
	var opened []string
	var sawLive []bool
	c.OnConnOpen(func(a string) {
		opened = append(opened, a)
		live := c.liveConns()
		sawLive = append(sawLive, len(live) == 1 && !live[0].Closed())
	})
	call := func() {
		t.Helper()
		if _, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	want := func(n int) {
		t.Helper()
		if len(opened) != n {
			t.Fatalf("listener told of %d connections %v, want %d", len(opened), opened, n)
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
	want(1)
	c.CloseConn(addr)
	call()
	want(2)

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
	want(2)
}
