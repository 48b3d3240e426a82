package remoting

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestClientOneConnPerAddr: sync, async and oneway calls to one address
// share one connection, oneway requests reach the server in call order,
// CloseConn closes the connection and the next call redials, and Close
// closes it too.
func TestClientOneConnPerAddr(t *testing.T) {
	var mu sync.Mutex
	peers := map[string]bool{} // server-side view of the client's connections
	var oneways []int          // oneway sequence numbers in arrival order
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		h := func(_ context.Context, conn *Conn, req *RemotingCommand) (*RemotingCommand, error) {
			mu.Lock()
			peers[conn.RemoteAddr()] = true
			if req.Code == RequestUnregisterClient {
				oneways = append(oneways, int(req.Body[0])<<8|int(req.Body[1]))
			}
			mu.Unlock()
			return echo(context.Background(), conn, req)
		}
		s.Register(RequestHeartBeat, h, 1, 1024)
		s.Register(RequestUnregisterClient, h, 1, 1024)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{})
	ctx := context.Background()
	if _, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, []byte("sync"))); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	if err := c.InvokeAsync(ctx, addr, NewRequest(RequestHeartBeat, nil, []byte("async")), func(_ *RemotingCommand, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		if err := c.InvokeOneway(ctx, addr, NewRequest(RequestUnregisterClient, nil, []byte{byte(i >> 8), byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "oneways arrive", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(oneways) == n
	})
	mu.Lock()
	for i, got := range oneways {
		if got != i {
			t.Fatalf("oneway %d arrived at position %d", got, i)
		}
	}
	if len(peers) != 1 {
		t.Fatalf("calls came on %d connections, want 1", len(peers))
	}
	mu.Unlock()

	conns := c.liveConns()
	if len(conns) != 1 {
		t.Fatalf("%d live connections, want 1", len(conns))
	}
	c.CloseConn(addr)
	if !conns[0].Closed() {
		t.Fatal("CloseConn left the connection open")
	}
	if _, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, []byte("again"))); err != nil {
		t.Fatalf("redial: %v", err)
	}
	conns = c.liveConns()
	if len(conns) != 1 || conns[0].Closed() {
		t.Fatalf("after redial: %d connections", len(conns))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !conns[0].Closed() {
		t.Fatal("Close left the connection open")
	}
}

// A call that looked its address's entry up just before CloseConn took
// the entry out of the table, and dials after that, must not leave a
// connection nothing finds: no sweep would time its calls out, and Close
// would wait for it until its peer or its idle timeout closed it. The
// call fails as CloseConn's pending calls do, and the next one redials.
func TestCloseConnFailsADialIntoTheDroppedEntry(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) { s.Register(1, echo, 1, 8) })
	addr := s.Addr().String()
	c := NewClient(ClientConfig{IdleTimeout: time.Hour}, zap.NewNop())
	if err := call(c, addr); err != nil {
		t.Fatal(err)
	}
	// Where the racing call is: past the table lookup, not yet holding
	// the entry.
	c.mu.Lock()
	e := c.entries[addr]
	c.mu.Unlock()
	c.CloseConn(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if conn, _, err := c.dialInto(ctx, e, addr, time.Time{}); !errors.Is(err, ErrConnClosed) {
		if conn != nil {
			defer conn.close(nil, false)
		}
		t.Fatalf("dial into the entry CloseConn dropped: conn %v err %v; want ErrConnClosed", conn != nil, err)
	}
	if err := call(c, addr); err != nil {
		t.Fatalf("the next call: %v; want a redial", err)
	}
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting for a connection 10 s on")
	}
}
