package remoting

import (
	"context"
	"sync/atomic"
	"testing"
)

// A guard over a signing client: requests signed with the right secret
// reach the handler, others get the guard's answer and the handler never
// runs; a refused oneway request gets no answer.
func TestGuardWithSigningClient(t *testing.T) {
	var handled atomic.Int32
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestPullMessage, func(ctx context.Context, c *Conn, req *RemotingCommand) (*RemotingCommand, error) {
			handled.Add(1)
			return echo(ctx, c, req)
		}, 1, 8)
		s.SetGuard(func(_ *Conn, req *RemotingCommand) *RemotingCommand {
			if VerifySignature(req, ExtPairs(req), "sk12345") {
				return nil
			}
			return NewResponse(ResponseNoPermission, "bad signature")
		})
	})
	addr := s.Addr().String()
	call := func(c *Client) *RemotingCommand {
		req := NewRequest(RequestPullMessage, nil, []byte("b"))
		req.ExtFields["topic"] = "T"
		resp, err := c.InvokeSync(context.Background(), addr, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	good := newTestClient(t, DefaultClientConfig())
	good.AddHook(SigningHook(Credentials{AccessKey: "ak12345", SecretKey: "sk12345"}))
	if r := call(good); r.Code != ResponseSuccess || r.ExtFields[ExtAccessKey] != "ak12345" {
		t.Fatalf("signed request: %d %q", r.Code, r.Remark)
	}
	bad := newTestClient(t, DefaultClientConfig())
	bad.AddHook(SigningHook(Credentials{AccessKey: "ak12345", SecretKey: "other-secret"}))
	if r := call(bad); r.Code != ResponseNoPermission || r.Remark != "bad signature" {
		t.Fatalf("wrongly signed request: %d %q", r.Code, r.Remark)
	}
	if err := bad.InvokeOneway(context.Background(), addr, NewRequest(RequestPullMessage, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if r := call(good); r.Code != ResponseSuccess {
		t.Fatalf("signed request after a refused oneway: %d %q", r.Code, r.Remark)
	}
	if n := handled.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (refused requests must not reach it)", n)
	}
}
