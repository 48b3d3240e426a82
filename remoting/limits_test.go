package remoting

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestLimitConnsPerIPAndListener: connections beyond MaxConnsPerIP (and
// MaxConns) are closed at accept and counted; closing one makes room.
func TestLimitConnsPerIPAndListener(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ServerConfig
		get  func(LimitCounts) int64
	}{
		{"per IP", ServerConfig{MaxConnsPerIP: 3}, func(l LimitCounts) int64 { return l.ConnsRefusedPerIP }},
		{"per listener", ServerConfig{MaxConns: 3}, func(l LimitCounts) int64 { return l.ConnsRefused }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.cfg, nil, func(s *Server) { s.Register(RequestHeartBeat, echo, 2, 64) })
			var open []net.Conn
			defer func() {
				for _, nc := range open {
					_ = nc.Close()
				}
			}()
			for range 3 {
				nc, err := net.Dial("tcp", s.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, nc)
			}
			testutil.WaitFor(t, 10*time.Second, "three connections accepted", func() bool { return len(s.Conns()) == 3 })
			nc, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Read(make([]byte, 1)); err == nil {
				t.Fatal("the fourth connection was not closed")
			}
			if got := tc.get(s.LimitCounts()); got != 1 {
				t.Fatalf("refusals = %d, want 1", got)
			}
			_ = open[0].Close()
			testutil.WaitFor(t, 10*time.Second, "room after a close", func() bool { return len(s.Conns()) == 2 })
			c := newTestClient(t, ClientConfig{DefaultTimeout: 5 * time.Second})
			resp, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestHeartBeat, nil, []byte("ping")))
			if err != nil || string(resp.Body) != "ping" {
				t.Fatalf("request after room was made: %v %v", resp, err)
			}
		})
	}
}

// TestLimitPeerThatNeverReads: a client that sends requests for large
// answers and never reads them is disconnected within about a write
// timeout, and its queued answers stay within WriteQueueBytes plus one
// frame and the buffer being flushed.
func TestLimitPeerThatNeverReads(t *testing.T) {
	const answer = 256 << 10
	const queueBytes = 1 << 20
	s := startServer(t, ServerConfig{WriteQueueBytes: queueBytes, WriteTimeout: 500 * time.Millisecond}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, func(_ context.Context, _ *Conn, _ *RemotingCommand) (*RemotingCommand, error) {
			r := NewResponse(ResponseSuccess, "")
			r.Body = make([]byte, answer)
			return r, nil
		}, 4, 1024)
	})
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10) // a small window: the server's writes block soon
	}
	frame, err := EncodeFrame(NewRequest(RequestHeartBeat, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	// Requests until the server closes us; never read.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 4096 {
			if _, err := nc.Write(frame); err != nil {
				return
			}
		}
	}()
	maxQueued := 0
	testutil.WaitFor(t, 30*time.Second, "the non-reading connection closed", func() bool {
		for _, c := range s.Conns() {
			c.wmu.Lock()
			maxQueued = max(maxQueued, len(c.wbuf))
			c.wmu.Unlock()
		}
		return s.LimitCounts().WriteStalls == 1 && len(s.Conns()) == 0
	})
	<-done
	if maxQueued > queueBytes+answer+1024 {
		t.Fatalf("%d bytes queued, bound %d", maxQueued, queueBytes+answer+1024)
	}
	t.Logf("max queued %d bytes", maxQueued)
}

// TestLimitQueuedRequestBytes: requests waiting for a busy processor hold
// at most QueuedRequestBudget bytes of frames between them; past it the
// server answers SYSTEM_BUSY at once, instead of holding every frame its
// queue has a slot for (a processor queue of thousands × 16 MiB frames).
// Once the queued requests ran, requests are admitted again.
func TestLimitQueuedRequestBytes(t *testing.T) {
	const body = 1 << 20
	const budget = 4 << 20
	release := make(chan struct{})
	var handled atomic.Int32
	s := startServer(t, ServerConfig{QueuedRequestBudget: budget}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, func(_ context.Context, _ *Conn, _ *RemotingCommand) (*RemotingCommand, error) {
			<-release
			handled.Add(1)
			return NewResponse(ResponseSuccess, ""), nil
		}, 1, 1000)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{DefaultTimeout: 20 * time.Second})
	const n = 20
	type answer struct {
		code   int16
		remark string
	}
	answers := make(chan answer, n)
	for range n {
		err := c.InvokeAsync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, make([]byte, body)), func(resp *RemotingCommand, err error) {
			if err != nil {
				t.Error(err)
				answers <- answer{code: -1}
				return
			}
			answers <- answer{resp.Code, resp.Remark}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	busy := 0
	testutil.WaitFor(t, 20*time.Second, "every request past the budget answered", func() bool {
		for {
			select {
			case a := <-answers:
				if a.code != ResponseSystemBusy || !strings.Contains(a.remark, "OVERLOAD") || !strings.Contains(a.remark, "maxQueuedRequestBytes") {
					t.Fatalf("a request answered %d %q while the processor was blocked", a.code, a.remark)
				}
				busy++
			default:
				return busy >= n-budget/body
			}
		}
	})
	if got := s.QueuedRequestBytes(); got > budget {
		t.Fatalf("%d bytes of requests held, budget %d", got, budget)
	}
	close(release)
	for got := busy; got < n; got++ {
		select {
		case a := <-answers:
			if a.code != ResponseSuccess && a.code != ResponseSystemBusy {
				t.Fatalf("answered %d %q", a.code, a.remark)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d requests answered", got, n)
		}
	}
	if h := handled.Load(); h > budget/body {
		t.Fatalf("%d requests of %d bytes were held for a budget of %d", h, body, budget)
	}
	testutil.WaitFor(t, 10*time.Second, "budget released", func() bool { return s.QueuedRequestBytes() == 0 })
	resp, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, make([]byte, body)))
	if err != nil || resp.Code != ResponseSuccess {
		t.Fatalf("request after the queue drained: %v %v", resp, err)
	}
}

// TestIdleConnectionKeepsNoLargeWriteBuffer: a connection that was sent
// large answers and then waits keeps no buffer of their size. The writer
// reused its buffers up to 4 MiB each, two per connection, for as long as
// the connection stayed open: a client that asked each of its thousands
// of connections once for a large message (VIEW_MESSAGE_BY_ID) made the
// broker hold gigabytes while they idled.
func TestIdleConnectionKeepsNoLargeWriteBuffer(t *testing.T) {
	const answer = 3 << 20
	const conns = 8
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, func(_ context.Context, _ *Conn, _ *RemotingCommand) (*RemotingCommand, error) {
			r := NewResponse(ResponseSuccess, "")
			r.Body = make([]byte, answer)
			return r, nil
		}, 4, 1024)
	})
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	clients := make([]*Client, conns)
	for i := range clients {
		clients[i] = newTestClient(t, ClientConfig{DefaultTimeout: 10 * time.Second})
		for range 2 {
			resp, err := clients[i].InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestHeartBeat, nil, nil))
			if err != nil || len(resp.Body) != answer {
				t.Fatalf("call: %v", err)
			}
		}
	}
	// Every answer was read; a writer may still be returning from the
	// write that sent the last one.
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d idle connections holding under 8 MiB after answers of %d MiB", conns, answer>>20), func() bool {
		return int64(heap())-int64(before) <= 8<<20
	})
}

// TestLimitQueuedRequestBytesAsync: requests of an asynchronous processor
// count against QueuedRequestBudget until they are answered, inline ones
// too: a send waiting for replication holds its body, and thousands
// admitted (MaxPending) while the Raft group stalled held as many bodies.
// They hold at most asyncBudgetShare of it: a heartbeat is still admitted
// while they wait.
func TestLimitQueuedRequestBytesAsync(t *testing.T) {
	const body = 1 << 20
	const budget = 4 << 20
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			held := make(chan *Responder, 64)
			s := startServer(t, ServerConfig{QueuedRequestBudget: budget}, nil, func(s *Server) {
				s.RegisterAsync(RequestSendMessage, holdingHandler(held), AsyncOptions{Workers: 2, QueueSize: 1000, MaxPending: 1000,
					Inline: func(*RemotingCommand) bool { return inline }})
				s.Register(RequestHeartBeat, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
					return NewResponse(ResponseSuccess, ""), nil
				}, 1, 100)
			})
			addr := s.Addr().String()
			c := newTestClient(t, ClientConfig{DefaultTimeout: 20 * time.Second})
			const n = 20
			answers := make(chan *RemotingCommand, n)
			for range n {
				err := c.InvokeAsync(context.Background(), addr, NewRequest(RequestSendMessage, nil, make([]byte, body)), func(resp *RemotingCommand, err error) {
					if err != nil {
						t.Error(err)
					}
					answers <- resp
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			busy := 0
			for busy < n-budget/body {
				select {
				case a := <-answers:
					if a == nil || a.Code != ResponseSystemBusy || !strings.Contains(a.Remark, "maxQueuedRequestBytes") {
						t.Fatalf("answered %v while the admitted requests waited for their answers", a)
					}
					busy++
				case <-time.After(20 * time.Second):
					t.Fatalf("%d requests refused, want at least %d", busy, n-budget/body)
				}
			}
			if got := s.QueuedRequestBytes(); got > int64(budget*asyncBudgetShare) {
				t.Fatalf("%d bytes of sends held, budget %d, their share %v", got, budget, asyncBudgetShare)
			}
			testutil.WaitFor(t, 10*time.Second, "every request held or refused", func() bool { return len(held)+busy+len(answers) == n })
			sends := s.QueuedRequestBytes()
			hb, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, make([]byte, body+body/2)))
			if err != nil || hb.Code != ResponseSuccess {
				t.Fatalf("heartbeat while sends hold their share of the budget: %v %v", hb, err)
			}
			// A synchronous request's bytes go back once its handler returned.
			testutil.WaitFor(t, 10*time.Second, "the heartbeat's bytes released", func() bool { return s.QueuedRequestBytes() == sends })
			// Answer the held requests: their bytes go back.
			for len(held) > 0 {
				(<-held).Respond(NewResponse(ResponseSuccess, ""))
			}
			if got := s.QueuedRequestBytes(); got != 0 {
				t.Fatalf("%d bytes still counted after every request was answered", got)
			}
			now := NewRequest(RequestSendMessage, nil, make([]byte, body))
			now.ExtFields["now"] = "true"
			resp, err := c.InvokeSync(context.Background(), addr, now)
			if err != nil || resp.Code != ResponseSuccess {
				t.Fatalf("request after the answers: %v %v", resp, err)
			}
		})
	}
}

// TestLimitStalledPeerCountedOnce: a peer found not reading by both the
// write loop's blocked flush and an answer that found no room is one
// stalled connection: WriteStalls counted it twice, and a test waiting for
// exactly one never saw it.
func TestLimitStalledPeerCountedOnce(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, nil)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var c *Conn
	testutil.WaitFor(t, 5*time.Second, "the server's connection", func() bool {
		if cs := s.Conns(); len(cs) == 1 {
			c = cs[0]
		}
		return c != nil
	})
	c.stalled("flush blocked", 0)
	c.stalled("answer found no room in the write queue", 0)
	if n := s.LimitCounts().WriteStalls; n != 1 {
		t.Fatalf("WriteStalls %d after one connection was found stalled twice, want 1", n)
	}
}
