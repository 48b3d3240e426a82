package remoting

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestClientLanes checks ConnsPerAddr: lanes map (modulo the count, any
// int) onto distinct connections, the plain calls use lane 0, requests on
// one lane reach the server in call order, and CloseConn and Close close
// every lane.
func TestClientLanes(t *testing.T) {
	var mu sync.Mutex
	peerOf := map[string]string{}  // body → server-side peer address
	order := map[string][]string{} // peer → bodies in arrival order
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		h := func(_ context.Context, conn *Conn, req *RemotingCommand) (*RemotingCommand, error) {
			mu.Lock()
			peerOf[string(req.Body)] = conn.RemoteAddr()
			order[conn.RemoteAddr()] = append(order[conn.RemoteAddr()], string(req.Body))
			mu.Unlock()
			return echo(context.Background(), conn, req)
		}
		s.Register(RequestHeartBeat, h, 1, 1024)
		s.Register(RequestUnregisterClient, h, 1, 1024)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{ConnsPerAddr: 3})
	if c.Lanes() != 3 {
		t.Fatalf("Lanes = %d, want 3", c.Lanes())
	}
	ctx := context.Background()
	lanes := []int{0, 1, 2, 3, 4, 5, -1, math.MinInt}
	for _, lane := range lanes {
		body := []byte{byte('a' + lane%26)}
		if lane < 0 {
			body = []byte{byte('A' + uint(lane)%3)}
		}
		if _, err := c.InvokeSyncLane(ctx, addr, lane, NewRequest(RequestHeartBeat, nil, body)); err != nil {
			t.Fatalf("lane %d: %v", lane, err)
		}
	}
	if _, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, []byte("plain"))); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	distinct := map[string]bool{}
	for _, p := range peerOf {
		distinct[p] = true
	}
	if len(distinct) != 3 {
		t.Fatalf("%d server-side connections, want 3: %v", len(distinct), peerOf)
	}
	for i := range 3 {
		if a, b := peerOf[string(rune('a'+i))], peerOf[string(rune('a'+i+3))]; a != b {
			t.Fatalf("lanes %d and %d on different connections %s, %s", i, i+3, a, b)
		}
	}
	if peerOf["plain"] != peerOf["a"] {
		t.Fatalf("InvokeSync not on lane 0: %s vs %s", peerOf["plain"], peerOf["a"])
	}
	mu.Unlock()

	// Order on one lane: oneway requests are written in call order.
	const n = 300
	for i := range n {
		if err := c.InvokeOnewayLane(ctx, addr, 1, NewRequest(RequestUnregisterClient, nil, []byte{'o', byte(i >> 8), byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "oneways arrive", func() bool {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, b := range order[peerOf["b"]] {
			if b[0] == 'o' {
				k++
			}
		}
		return k == n
	})
	mu.Lock()
	next := 0
	for _, b := range order[peerOf["b"]] {
		if b[0] != 'o' {
			continue
		}
		if got := int(b[1])<<8 | int(b[2]); got != next {
			t.Fatalf("lane 1 request %d arrived at position %d", got, next)
		}
		next++
	}
	mu.Unlock()

	conns := c.liveConns()
	if len(conns) != 3 {
		t.Fatalf("%d live connections, want 3", len(conns))
	}
	c.CloseConn(addr)
	for _, conn := range conns {
		if !conn.Closed() {
			t.Fatalf("CloseConn left connection %d open", conn.ID())
		}
	}
	if _, err := c.InvokeSyncLane(ctx, addr, 2, NewRequest(RequestHeartBeat, nil, []byte("again"))); err != nil {
		t.Fatalf("redial: %v", err)
	}
	conns = c.liveConns()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, conn := range conns {
		if !conn.Closed() {
			t.Fatalf("Close left connection %d open", conn.ID())
		}
	}
}

func TestConnsPerAddrDefaults(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{0, 1}, {-3, 1}, {1, 1}, {4, 4}, {MaxConnsPerAddr + 10, MaxConnsPerAddr}} {
		if got := (ClientConfig{ConnsPerAddr: tc.in}).withDefaults().ConnsPerAddr; got != tc.want {
			t.Fatalf("ConnsPerAddr %d → %d, want %d", tc.in, got, tc.want)
		}
	}
}
