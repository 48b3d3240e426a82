package remoting

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestAbuseHalfFramesHoldLittleMemory opens 500 connections that each
// send a frame length claiming 16 MiB and one byte of it, then stop. The
// server must hold what arrived, not what was claimed (500 × 16 MiB would
// be 8 GiB), and keep serving a well-behaved client.
func TestAbuseHalfFramesHoldLittleMemory(t *testing.T) {
	const conns = 500
	// Each half frame holds its first 4 KiB step and its connection's
	// 32 KiB read buffer: about 18 MiB for 500; the bound leaves room for
	// goroutine bookkeeping and the test's own allocations.
	const heapBound = 96 << 20
	s := startServer(t, ServerConfig{FrameReadTimeout: time.Minute}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, echo, 2, 64)
	})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	hdr := binary.BigEndian.AppendUint32(nil, DefaultMaxFrameSize)
	hdr = append(hdr, 0)
	var open []net.Conn
	defer func() {
		for _, nc := range open {
			_ = nc.Close()
		}
	}()
	for range conns {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		open = append(open, nc)
		if _, err := nc.Write(hdr); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	// Every reader has reserved its first step of a large frame.
	testutil.WaitFor(t, 30*time.Second, "all half frames being read", func() bool {
		return s.IncompleteFrameBytes() == conns*4<<10
	})
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew %d MiB for %d half frames claiming 16 MiB each", grown>>20, conns)
	if grown > heapBound {
		t.Fatalf("heap grew %d bytes with %d half frames, bound %d", grown, conns, heapBound)
	}

	c := newTestClient(t, ClientConfig{DefaultTimeout: 5 * time.Second})
	resp, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestHeartBeat, nil, []byte("ping")))
	if err != nil || string(resp.Body) != "ping" {
		t.Fatalf("well-behaved request during the half frames: %v %v", resp, err)
	}

	for _, nc := range open {
		_ = nc.Close()
	}
	open = nil
	testutil.WaitFor(t, 30*time.Second, "half frames released", func() bool { return s.IncompleteFrameBytes() == 0 })
}

// TestLimitIncompleteFrameBudget: a connection whose incomplete frame
// outgrows the server's budget is closed and counted; a frame within the
// budget still arrives whole.
func TestLimitIncompleteFrameBudget(t *testing.T) {
	const budget = 1 << 20
	s := startServer(t, ServerConfig{IncompleteFrameBudget: budget}, nil, func(s *Server) {
		s.Register(RequestHeartBeat, echo, 2, 64)
	})
	c := newTestClient(t, ClientConfig{DefaultTimeout: 5 * time.Second})
	body := make([]byte, 600<<10) // its buffer grows ×4 up to 600 KiB: within 1 MiB
	resp, err := c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestHeartBeat, nil, body))
	if err != nil || len(resp.Body) != len(body) {
		t.Fatalf("frame within the budget: %v %v", resp, err)
	}

	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Claim 4 MiB and send 2 MiB of it: the buffer must grow past 1 MiB.
	if _, err := nc.Write(binary.BigEndian.AppendUint32(nil, 4<<20)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = nc.Write(make([]byte, 2<<20)) }()
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection over the budget was not closed")
	}
	if got := s.IncompleteFrameRefusals(); got != 1 {
		t.Fatalf("refusals = %d, want 1", got)
	}
	testutil.WaitFor(t, 10*time.Second, "budget released", func() bool { return s.IncompleteFrameBytes() == 0 })
	resp, err = c.InvokeSync(context.Background(), s.Addr().String(), NewRequest(RequestHeartBeat, nil, []byte("ping")))
	if err != nil || string(resp.Body) != "ping" {
		t.Fatalf("request after the refusal: %v %v", resp, err)
	}
}
