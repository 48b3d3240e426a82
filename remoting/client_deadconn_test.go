package remoting

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// frozenFirstServer accepts loopback connections. The first it never
// reads from nor answers, as a socket that a partition froze looks to the
// client: the connection stays open and nothing comes back. Every later
// connection is answered: SUCCESS with the request's body.
type frozenFirstServer struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn // guarded by mu
}

func startFrozenFirstServer(t *testing.T) *frozenFirstServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &frozenFirstServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, nc)
			s.mu.Unlock()
			if s.accepted.Add(1) == 1 {
				continue // frozen: held open, never read
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); answerAll(nc) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, nc := range s.conns {
			_ = nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// answerAll answers every request read from nc until it fails.
func answerAll(nc net.Conn) {
	br := bufio.NewReader(nc)
	var lb [lengthFieldSize]byte
	for {
		if _, err := io.ReadFull(br, lb[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(lb[:]))
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		req, err := DecodeFrame(frame)
		if err != nil || req.IsOneway() {
			continue
		}
		resp := NewResponse(ResponseSuccess, "")
		resp.Opaque, resp.Flag, resp.Body = req.Opaque, FlagResponse, req.Body
		out, err := EncodeFrame(resp)
		if err != nil {
			return
		}
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

// waitErr returns the error delivered on ch, failing the test if none
// comes within d.
func waitErr(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: no outcome within %v", what, d)
		return nil
	}
}

// TestClientRedialsAfterSilentTimeout: a call that times out on a
// connection from which nothing at all arrived since it was written
// (a socket a partition froze) closes that connection, failing its other
// calls with ErrConnClosed at once, and the next call dials a new
// connection and succeeds, whichever way the timed-out call was made.
func TestClientRedialsAfterSilentTimeout(t *testing.T) {
	const short = 300 * time.Millisecond
	for _, kind := range []string{"sync", "syncctx", "async", "startcall"} {
		t.Run(kind, func(t *testing.T) {
			srv := startFrozenFirstServer(t)
			addr := srv.ln.Addr().String()
			c := newTestClient(t, ClientConfig{ScanInterval: 10 * time.Millisecond})
			ctx := context.Background()

			// A call with a long deadline waits on the frozen connection
			// (and dials it).
			longCtx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			other := make(chan error, 1)
			if err := c.InvokeAsync(longCtx, addr, NewRequest(RequestHeartBeat, nil, nil), func(_ *RemotingCommand, err error) { other <- err }); err != nil {
				t.Fatal(err)
			}

			timedOut := make(chan error, 1)
			req := NewRequest(RequestSendMessage, nil, []byte("lost"))
			switch kind {
			case "sync":
				_, err := c.InvokeSyncUntil(ctx, addr, req, time.Now().Add(short))
				timedOut <- err
			case "syncctx":
				sctx, scancel := context.WithTimeout(ctx, short)
				defer scancel()
				_, err := c.InvokeSync(sctx, addr, req)
				timedOut <- err
			case "async":
				sctx, scancel := context.WithTimeout(ctx, short)
				defer scancel()
				if err := c.InvokeAsync(sctx, addr, req, func(_ *RemotingCommand, err error) { timedOut <- err }); err != nil {
					t.Fatal(err)
				}
			case "startcall":
				sent, err := c.StartCall(addr, req, time.Now().Add(short), func(_ *RemotingCommand, err error) { timedOut <- err })
				if !sent || err != nil {
					t.Fatalf("StartCall on the open connection: sent %v, %v", sent, err)
				}
			}
			if err := waitErr(t, timedOut, 5*time.Second, "short call"); !errors.Is(err, ErrTimeout) {
				t.Fatalf("short call: %v, want ErrTimeout", err)
			}
			if err := waitErr(t, other, 5*time.Second, "long call on the dead connection"); !errors.Is(err, ErrConnClosed) {
				t.Fatalf("long call on the dead connection: %v, want ErrConnClosed", err)
			}

			start := time.Now()
			resp, err := c.InvokeSyncUntil(ctx, addr, NewRequest(RequestSendMessage, nil, []byte("next")), time.Now().Add(3*time.Second))
			if err != nil {
				t.Fatalf("next call: %v (connections accepted: %d)", err, srv.accepted.Load())
			}
			if string(resp.Body) != "next" {
				t.Fatalf("next call answered %q", resp.Body)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("next call took %v", d)
			}
			if n := srv.accepted.Load(); n != 2 {
				t.Fatalf("%d connections accepted, want 2 (the frozen one and a new one)", n)
			}

			// The client reset the frozen connection instead of closing it
			// after its queued bytes: what the peer never got is dropped,
			// not delivered behind the calls sent since on the new one.
			srv.mu.Lock()
			frozen := srv.conns[0]
			srv.mu.Unlock()
			_ = frozen.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, frozen); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reading the frozen connection to its end: %v, want a reset (ECONNRESET)", err)
			}
		})
	}
}

// TestClientKeepsAnsweringConnOnTimeout: a call that times out while other
// answers keep arriving on its connection (a slow handler behind a live
// broker) fails alone; the connection stays, with its other calls.
func TestClientKeepsAnsweringConnOnTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	peers := map[string]bool{}
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(_ context.Context, conn *Conn, _ *RemotingCommand) (*RemotingCommand, error) {
			<-release // never answered while the test runs
			return nil, nil
		}, 2, 16)
		s.Register(RequestHeartBeat, func(ctx context.Context, conn *Conn, req *RemotingCommand) (*RemotingCommand, error) {
			mu.Lock()
			peers[conn.RemoteAddr()] = true
			mu.Unlock()
			return echo(ctx, conn, req)
		}, 1, 64)
	})
	addr := s.Addr().String()
	for _, kind := range []string{"sync", "async"} {
		t.Run(kind, func(t *testing.T) {
			c := newTestClient(t, ClientConfig{ScanInterval: 10 * time.Millisecond})
			ctx := context.Background()
			if _, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
				t.Fatal(err)
			}
			conn := c.liveConns()[0]

			// A long call that must survive the short one's timeout.
			longCtx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			other := make(chan error, 1)
			if err := c.InvokeAsync(longCtx, addr, NewRequest(RequestSendMessage, nil, nil), func(_ *RemotingCommand, err error) { other <- err }); err != nil {
				t.Fatal(err)
			}

			timedOut := make(chan error, 1)
			req := NewRequest(RequestSendMessage, nil, nil)
			if kind == "sync" {
				go func() {
					_, err := c.InvokeSyncUntil(ctx, addr, req, time.Now().Add(300*time.Millisecond))
					timedOut <- err
				}()
			} else {
				sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer scancel()
				if err := c.InvokeAsync(sctx, addr, req, func(_ *RemotingCommand, err error) { timedOut <- err }); err != nil {
					t.Fatal(err)
				}
			}
			// Answers to other calls keep arriving until it times out.
			var err error
			for done := false; !done; {
				if _, herr := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, nil)); herr != nil {
					t.Fatalf("call answered beside the slow one: %v", herr)
				}
				select {
				case err = <-timedOut:
					done = true
				default:
				}
			}
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("slow call: %v, want ErrTimeout", err)
			}
			if conn.Closed() {
				t.Fatal("a connection receiving answers was closed after one call timed out")
			}
			select {
			case err := <-other:
				t.Fatalf("long call ended early: %v", err)
			default:
			}
			if _, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
				t.Fatal(err)
			}
			if now := c.liveConns(); len(now) != 1 || now[0] != conn {
				t.Fatal("the call after the timeout went over another connection")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(peers) != 2 {
		t.Fatalf("server saw %d client connections, want one per client", len(peers))
	}
}

// TestClientLongPollSilenceKeepsConn: a call held by the server (a long
// poll) far longer than the silence that condemns a timed-out call, but
// within its own deadline, is answered on its connection.
func TestClientLongPollSilenceKeepsConn(t *testing.T) {
	const hold = 400 * time.Millisecond
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, echo, 1, 4)
		s.Register(RequestPullMessage, func(ctx context.Context, conn *Conn, req *RemotingCommand) (*RemotingCommand, error) {
			select { // the broker holds the poll until it has something
			case <-time.After(hold):
			case <-ctx.Done():
			}
			return echo(ctx, conn, req)
		}, 1, 4)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{ScanInterval: 10 * time.Millisecond})
	ctx := context.Background()
	if _, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	conn := c.liveConns()[0]
	start := time.Now()
	resp, err := c.InvokeSyncUntil(ctx, addr, NewRequest(RequestPullMessage, nil, []byte("poll")), time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatalf("long poll: %v", err)
	}
	if string(resp.Body) != "poll" || time.Since(start) < hold {
		t.Fatalf("long poll answered %q after %v", resp.Body, time.Since(start))
	}
	if now := c.liveConns(); conn.Closed() || len(now) != 1 || now[0] != conn {
		t.Fatal("the long poll's connection was replaced")
	}
}

// TestClientOnConnCloseNamesTheAddress: a connection the client gives up
// for silence is reported to OnConnClose listeners with the address it was
// dialed for, after its calls failed, so that what the peer tied to that
// connection (a name server's broker registration) can be made again.
func TestClientOnConnCloseNamesTheAddress(t *testing.T) {
	srv := startFrozenFirstServer(t)
	addr := srv.ln.Addr().String()
	c := newTestClient(t, ClientConfig{ScanInterval: 10 * time.Millisecond})
	closed := make(chan string, 4)
	c.OnConnClose(func(a string) { closed <- a })
	_, err := c.InvokeSyncUntil(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil), time.Now().Add(300*time.Millisecond))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("call on the frozen connection: %v, want ErrTimeout", err)
	}
	select {
	case got := <-closed:
		if got != addr {
			t.Fatalf("listener told of %q, want %q", got, addr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("listener not told of the closed connection")
	}
}
