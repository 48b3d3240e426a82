package remoting

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testExt is an ExtAppender writing every kind of value, in a fixed
// non-sorted order.
type testExt struct{ long bool }

func (e testExt) AppendExt(w *ExtWriter) {
	w.String("zeta", "plain")
	w.Bytes("props", []byte("UNIQ_KEY\x01ABC\x02<&>\x02"))
	w.Int("neg", -42)
	w.Int("big", 1700000000123)
	w.Bool("yes", true)
	w.Bool("no", false)
	w.String("quote", `a"b\c é`)
	if e.long {
		w.String(strings.Repeat("k", 1<<15), "v")
	}
}

var testExtWant = map[string]string{
	"zeta": "plain", "props": "UNIQ_KEY\x01ABC\x02<&>\x02", "neg": "-42", "big": "1700000000123",
	"yes": "true", "no": "false", "quote": `a"b\c é`, "extra": "from the map",
}

// TestExtAppenderRoundTrip: fields written by an ExtAppender decode to the
// same ExtFields as if they had been in the map, in the appender's order
// followed by the map's keys, in both serializations.
func TestExtAppenderRoundTrip(t *testing.T) {
	for _, st := range []SerializeType{SerializeRocketMQ, SerializeJSON} {
		c := &RemotingCommand{Code: RequestSendMessageV2, Language: LanguageGo, Version: DefaultVersion, Opaque: 7,
			SerializeType: st, ExtAppender: testExt{}, ExtFields: map[string]string{"extra": "from the map"}, Body: []byte("body")}
		frame, err := EncodeFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeFrame(frame[4:])
		if err != nil {
			t.Fatalf("%v: %v", st, err)
		}
		if !reflect.DeepEqual(got.ExtFields, testExtWant) || string(got.Body) != "body" || got.Opaque != 7 {
			t.Fatalf("%v: decoded %v", st, got)
		}
		order := got.extKeys(nil)
		wantOrder := []string{"zeta", "props", "neg", "big", "yes", "no", "quote", "extra"}
		if !reflect.DeepEqual(order, wantOrder) {
			t.Fatalf("%v: wire order %v, want %v", st, order, wantOrder)
		}
		// Re-encoding the decoded command (ExtFields only) gives the same bytes.
		again, err := EncodeFrame(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, frame) {
			t.Fatalf("%v: re-encoded frame differs\n got %q\nwant %q", st, again, frame)
		}
	}
}

// TestExtAppenderOnlyJSON: an appender without ExtFields still gives an
// extFields object, not null.
func TestExtAppenderOnlyJSON(t *testing.T) {
	c := &RemotingCommand{Code: 1, SerializeType: SerializeJSON, ExtAppender: testExt{}}
	frame, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFrame(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ExtFields) != len(testExtWant)-1 || got.ExtFields["neg"] != "-42" {
		t.Fatalf("decoded %v", got.ExtFields)
	}
}

// TestAppendFrame: AppendFrame appends exactly EncodeFrame's bytes after
// what the buffer holds, and appends nothing on error.
func TestAppendFrame(t *testing.T) {
	c := NewRequest(RequestHeartBeat, &struct {
		G string `ext:"group"`
	}{"g"}, []byte("x"))
	want, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("queued")
	got, err := AppendFrame(prefix, c)
	if err != nil || !bytes.Equal(got, append([]byte("queued"), want...)) {
		t.Fatalf("AppendFrame = %q, %v", got, err)
	}
	bad := &RemotingCommand{SerializeType: SerializeRocketMQ, ExtAppender: testExt{long: true}}
	got, err = AppendFrame([]byte("queued"), bad)
	if !errors.Is(err, ErrInvalidHeader) || string(got) != "queued" {
		t.Fatalf("over-long key: %q, %v", got, err)
	}
	// The same through an ExtFields map (the path without an appender).
	badMap := &RemotingCommand{SerializeType: SerializeRocketMQ, ExtFields: map[string]string{strings.Repeat("k", 1<<15): "v"}}
	got, err = AppendFrame([]byte("queued"), badMap)
	if !errors.Is(err, ErrInvalidHeader) || string(got) != "queued" {
		t.Fatalf("over-long map key: %q, %v", got, err)
	}
	if _, err := EncodeFrame(&RemotingCommand{SerializeType: 9}); !errors.Is(err, ErrInvalidFrame) {
		t.Fatalf("unknown serialize type: %v", err)
	}
}

// TestInvokeSyncUntil: the explicit deadline bounds a call whose ctx
// has none (no context built), the earlier of ctx and deadline wins, and
// a timed-out call leaves nothing in the response table.
func TestInvokeSyncUntil(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.Register(RequestSendMessage, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
			<-release
			return nil, nil
		}, 1, 64)
		s.Register(RequestHeartBeat, echo, 1, 16)
	})
	addr := s.Addr().String()
	c := newTestClient(t, ClientConfig{DefaultTimeout: time.Minute})
	for i := 0; i < 3; i++ { // the pooled timer is reused
		start := time.Now()
		_, err := c.InvokeSyncUntil(context.Background(), addr, NewRequest(RequestSendMessage, nil, nil), start.Add(50*time.Millisecond))
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("got %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
			t.Fatalf("timed out after %v", d)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.InvokeSyncUntil(ctx, addr, NewRequest(RequestSendMessage, nil, nil), start.Add(time.Minute)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("ctx deadline: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("ctx deadline ignored: %v", d)
	}
	// A deadline ctx already enforces is left to ctx: when the call
	// returns, ctx reports its end too (callers tell "my context ended"
	// from a failure by ctx.Err()).
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		dl, _ := ctx.Deadline()
		_, err := c.InvokeSyncUntil(ctx, addr, NewRequest(RequestSendMessage, nil, nil), dl)
		if !errors.Is(err, ErrTimeout) || ctx.Err() == nil {
			t.Fatalf("ctx's own deadline: %v, ctx.Err() %v", err, ctx.Err())
		}
		cancel()
	}
	// A later call on the same connection is answered normally.
	resp, err := c.InvokeSyncUntil(context.Background(), addr, NewRequest(RequestHeartBeat, nil, []byte("b")), time.Now().Add(5*time.Second))
	if err != nil || string(resp.Body) != "b" {
		t.Fatalf("after timeouts: %v %v", resp, err)
	}
	for _, conn := range c.liveConns() {
		conn.mu.Lock()
		n := len(conn.pending)
		conn.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d calls left in the response table", n)
		}
	}
}

// TestServerLazyExt: an asynchronous processor registered with LazyExt
// gets ROCKETMQ requests with ExtFields nil and the fields through
// ExtValue/RangeExt; JSON requests and other codes keep the map.
func TestServerLazyExt(t *testing.T) {
	type seen struct {
		code  int16
		isMap bool
		group string
		n     int
	}
	got := make(chan seen, 8)
	h := func(_ context.Context, _ *Conn, req *RemotingCommand, _ *Responder) (*RemotingCommand, error) {
		g, _ := req.ExtValue("group")
		n := 0
		req.RangeExt(func(string, string) bool { n++; return true })
		got <- seen{req.Code, req.ExtFields != nil, g, n}
		return NewResponse(ResponseSuccess, ""), nil
	}
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessageV2, h, AsyncOptions{Workers: 1, QueueSize: 8, MaxPending: 8, LazyExt: true})
		s.RegisterAsync(RequestSendMessage, h, AsyncOptions{Workers: 1, QueueSize: 8, MaxPending: 8})
	})
	c := newTestClient(t, ClientConfig{})
	for _, tc := range []struct {
		code    int16
		st      SerializeType
		wantMap bool
	}{
		{RequestSendMessageV2, SerializeRocketMQ, false},
		{RequestSendMessageV2, SerializeJSON, true},
		{RequestSendMessage, SerializeRocketMQ, true},
	} {
		req := NewRequest(tc.code, &struct {
			Group string `ext:"group"`
			Topic string `ext:"topic"`
		}{"g1", "T"}, nil)
		req.SerializeType = tc.st
		if resp, err := c.InvokeSync(context.Background(), s.Addr().String(), req); err != nil || resp.Code != ResponseSuccess {
			t.Fatalf("%d/%v: %v %v", tc.code, tc.st, resp, err)
		}
		g := <-got
		if g.code != tc.code || g.isMap != tc.wantMap || g.group != "g1" || g.n != 2 {
			t.Fatalf("%d/%v: handler saw %+v, want map=%v", tc.code, tc.st, g, tc.wantMap)
		}
	}
}

// TestReRegisterDropsLazyExt: a code registered with LazyExt and then
// re-registered with a synchronous handler (which reads ExtFields) is
// decoded into a map again.
func TestReRegisterDropsLazyExt(t *testing.T) {
	h := func(context.Context, *Conn, *RemotingCommand, *Responder) (*RemotingCommand, error) { return nil, nil }
	s := startServer(t, ServerConfig{}, nil, func(s *Server) {
		s.RegisterAsync(RequestSendMessageV2, h, AsyncOptions{Workers: 1, QueueSize: 1, MaxPending: 1, LazyExt: true})
		if !s.lazyRequest(RequestSendMessageV2) {
			t.Error("LazyExt registration not recorded")
		}
		s.Register(RequestSendMessageV2, echo, 1, 1)
	})
	if s.lazyRequest(RequestSendMessageV2) {
		t.Fatal("a synchronous handler registered over a LazyExt one still gets raw extFields")
	}
}
