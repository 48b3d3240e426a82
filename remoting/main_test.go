package remoting

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startServer starts a server on a free loopback port with the given
// registrations and shuts it down at the end of the test.
func startServer(t testing.TB, cfg ServerConfig, log *zap.Logger, setup func(s *Server)) *Server {
	t.Helper()
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	s := NewServer(cfg, log)
	if setup != nil {
		setup(s)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

func newTestClient(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	c := NewClient(cfg, zap.NewNop())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echo answers SUCCESS with the request's body and extFields.
func echo(_ context.Context, _ *Conn, req *RemotingCommand) (*RemotingCommand, error) {
	resp := NewResponse(ResponseSuccess, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	return resp, nil
}
