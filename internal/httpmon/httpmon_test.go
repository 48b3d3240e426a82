package httpmon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// startShort builds a server with short connection lifetimes.
func startShort(t *testing.T) *Server {
	t.Helper()
	oldR, oldW, oldI := readTimeout, writeTimeout, idleTimeout
	readTimeout, writeTimeout, idleTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	defer func() { readTimeout, writeTimeout, idleTimeout = oldR, oldW, oldI }()
	s := New("127.0.0.1:0", prometheus.NewRegistry(), func() (bool, any) { return true, map[string]string{"state": "serving"} }, nil)
	return s
}

func shutdown(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// startAndRequest starts s, connects and sends a keep-alive GET of path
// without reading the answer.
func startAndRequest(t *testing.T, s *Server, path string) net.Conn {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		shutdown(t, s)
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		conn.Close()
		shutdown(t, s)
		t.Fatal(err)
	}
	return conn
}

// A connection kept open after its request was kept for good: a client
// opening many held as many descriptors and goroutines. It is closed once
// idle for the idle timeout.
func TestIdleConnectionClosed(t *testing.T) {
	s := startShort(t)
	conn := startAndRequest(t, s, "/healthz")
	defer shutdown(t, s)
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := r.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("an idle keep-alive connection was still open after 5 s (read: %v)", err)
	}
}

// A client that stops reading a large answer held the handler's goroutine
// and the answer's buffers for good. The write gives up at the write
// timeout.
func TestStalledReaderReleased(t *testing.T) {
	s := startShort(t)
	done := make(chan error, 1)
	s.Handle("/big", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 256 {
			if _, err := w.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}))
	conn := startAndRequest(t, s, "/big")
	defer shutdown(t, s)
	defer conn.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("256 MiB written to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still blocked writing to a client that stopped reading after 10 s")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
