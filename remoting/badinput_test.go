package remoting

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestBadInputClosesOnlyThatConnection sends each kind of malformed input
// to a live server while a well-behaved client keeps calling it. Each bad
// connection must be closed with exactly one Warn naming the remote
// address and the reason; the good client must never fail.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := startServer(t, ServerConfig{FrameReadTimeout: 200 * time.Millisecond}, zap.New(core), func(s *Server) {
		s.Register(RequestHeartBeat, echo, 2, 64)
	})
	addr := s.Addr().String()

	good := newTestClient(t, ClientConfig{DefaultTimeout: 5 * time.Second})
	stop := make(chan struct{})
	var goodCalls atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := good.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, []byte("ping")))
			if err != nil || string(resp.Body) != "ping" {
				t.Errorf("good client failed during bad input: %v %v", resp, err)
				return
			}
			goodCalls.Add(1)
		}
	}()

	frame := func(length uint32, rest ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, length), rest...)
	}
	jsonBad := []byte("{not json")
	cases := []struct {
		name   string
		input  []byte
		reason string
	}{
		{"garbage bytes", []byte("GARBAGE!\x00\x01\x02\x03"), "frame too large"},
		{"garbage serialize type", frame(8, 0xde, 0, 0, 2, 1, 2, 3, 4), "unknown serialize type"},
		{"2 GB length", frame(0x7fffffff), "frame too large"},
		{"negative length", frame(0xffffffff), "below minimum"},
		{"header length beyond frame", frame(8, 0, 0, 0, 100, '{', '}', ' ', ' '), "beyond frame"},
		{"invalid JSON", frame(uint32(4+len(jsonBad)), append([]byte{0, 0, 0, byte(len(jsonBad))}, jsonBad...)...), "invalid header"},
		{"half-sent frame then silence", frame(100, 0, 0, 0, 10, '{'), "incomplete frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			local := nc.LocalAddr().String()
			if _, err := nc.Write(tc.input); err != nil {
				t.Fatal(err)
			}
			// The server must close the connection: we read EOF (or a
			// reset), not our own deadline.
			_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.ReadAll(nc)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("server did not close the connection")
			}
			var mine []observer.LoggedEntry
			for _, e := range logs.All() {
				if e.ContextMap()["remote"] == local {
					mine = append(mine, e)
				}
			}
			if len(mine) != 1 {
				t.Fatalf("want exactly one log line for %s, got %d: %v", local, len(mine), mine)
			}
			e := mine[0]
			line := e.Message + " " + strings.Join(fieldStrings(e), " ")
			if e.Level != zapcore.WarnLevel || !strings.Contains(line, tc.reason) {
				t.Fatalf("log line %q (level %s) does not say %q", line, e.Level, tc.reason)
			}
		})
	}
	close(stop)
	wg.Wait()
	if goodCalls.Load() == 0 {
		t.Fatal("good client made no calls")
	}
	// Only the half-sent frame ran into the frame read timeout.
	if n := s.LimitCounts().FrameTimeouts; n != 1 {
		t.Fatalf("FrameTimeouts = %d, want 1", n)
	}
}

func fieldStrings(e observer.LoggedEntry) []string {
	var out []string
	for k, v := range e.ContextMap() {
		if s, ok := v.(string); ok {
			out = append(out, k+"="+s)
		}
	}
	return out
}

func TestIdleConnectionClosed(t *testing.T) {
	s := startServer(t, ServerConfig{IdleTimeout: 100 * time.Millisecond}, nil, nil)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(nc); err != nil {
		t.Fatalf("idle connection not closed by the server: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}
	if n := s.LimitCounts().FrameTimeouts; n != 0 {
		t.Fatalf("an idle close counted as a frame timeout (%d)", n)
	}
}

// TestBadConnectionFloodWarnsSampled: a flood of garbage connections
// leaves a bounded number of warnings (connWarnBurst a second, then one in
// connWarnThereafter), not one per connection; the server keeps serving.
func TestBadConnectionFloodWarnsSampled(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	s := startServer(t, ServerConfig{}, zap.New(core), func(s *Server) {
		s.Register(RequestHeartBeat, echo, 2, 64)
	})
	addr := s.Addr().String()
	const flood = 300
	start := time.Now()
	for range flood {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write([]byte("GARBAGE!\x00\x01\x02\x03")); err != nil {
			t.Fatal(err)
		}
		// The server closes it: reading to EOF waits for that.
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, nc); err != nil {
			t.Fatalf("garbage connection not closed by the server: %v", err)
		}
		nc.Close()
	}
	warned := logs.FilterMessage("closing connection: bad frame").Len()
	// Each sampling second the flood spans lets connWarnBurst through.
	allowed := connWarnBurst * (int(time.Since(start)/time.Second) + 2)
	if warned == 0 || warned > allowed || warned >= flood {
		t.Fatalf("%d garbage connections logged %d warnings; want between 1 and %d", flood, warned, min(allowed, flood-1))
	}
	c := newTestClient(t, ClientConfig{DefaultTimeout: 5 * time.Second})
	if resp, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, []byte("ping"))); err != nil || string(resp.Body) != "ping" {
		t.Fatalf("server after the flood: %v %v", resp, err)
	}
}
