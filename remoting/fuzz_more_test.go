package remoting

import (
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"sync"
	"testing"

	"go.uber.org/zap"
)

// fuzzHeader has a field of every kind DecodeHeader supports.
type fuzzHeader struct {
	S   string  `ext:"s"`
	B   bool    `ext:"b"`
	I8  int8    `ext:"i8"`
	I32 int32   `ext:"i32,required"`
	I64 int64   `ext:"i64"`
	U16 uint16  `ext:"u16"`
	U64 uint64  `ext:"u64"`
	F32 float32 `ext:"f32"`
	F64 float64 `ext:"f64"`
}

// FuzzDecodeHeader: extFields values from the wire either fill the header
// or fail with a *HeaderError naming the field; what fills it renders
// back (EncodeHeader) to values that decode to the same header.
func FuzzDecodeHeader(f *testing.F) {
	f.Add("topic", "true", "-128", "2147483647", "-9223372036854775808", "65535", "18446744073709551615", "3.4e38", "NaN", true)
	f.Add("", "TRUE", "128", " 7 ", "x", "-1", "1e3", "-Inf", "0x10", true)
	f.Add("ü", "yes", "", "", "", "", "", "", "", false)
	f.Fuzz(func(t *testing.T, s, b, i8, i32, i64, u16, u64, f32, f64 string, withI32 bool) {
		ext := map[string]string{"s": s, "b": b, "i8": i8, "i64": i64, "u16": u16, "u64": u64, "f32": f32, "f64": f64}
		if withI32 {
			ext["i32"] = i32
		}
		c := &RemotingCommand{ExtFields: ext}
		var h fuzzHeader
		if err := c.DecodeHeader(&h); err != nil {
			var he *HeaderError
			if !errors.As(err, &he) || !errors.Is(err, ErrInvalidHeader) || he.Field == "" {
				t.Fatalf("error %v is not a *HeaderError naming a field", err)
			}
			if _, ok := ext[he.Field]; !ok && he.Field != "i32" {
				t.Fatalf("error names %q, not a field of the header", he.Field)
			}
			return
		}
		if h.S != s {
			t.Fatalf("string field %q read as %q", s, h.S)
		}
		enc := &RemotingCommand{}
		enc.EncodeHeader(&h)
		var back fuzzHeader
		if err := enc.DecodeHeader(&back); err != nil {
			t.Fatalf("rendered header %v does not decode: %v", enc.ExtFields, err)
		}
		again := &RemotingCommand{}
		again.EncodeHeader(&back)
		if !maps.Equal(enc.ExtFields, again.ExtFields) {
			t.Fatalf("header does not round-trip: %v → %v", enc.ExtFields, again.ExtFields)
		}
	})
}

// FuzzConnStream writes arbitrary bytes to a connection's reader, as a
// peer would: it must never panic, must hand on exactly the requests a
// frame-by-frame decode of the same bytes finds before the first bad or
// truncated frame, and must close the connection at the end. A length
// field larger than what follows holds at most what arrived (readLarge),
// never the claimed size.
func FuzzConnStream(f *testing.F) {
	req := func(code int16, body string) []byte {
		b, _ := EncodeFrame(NewRequest(code, map[string]string{"topic": "T"}, []byte(body)))
		return b
	}
	json := NewRequest(RequestHeartBeat, nil, []byte("x"))
	json.SerializeType = SerializeJSON
	jf, _ := EncodeFrame(json)
	f.Add(append(req(10, "a"), req(11, "")...))
	f.Add(append(jf, req(34, "b")...))
	resp, _ := EncodeFrame(NewResponse(ResponseSuccess, "ok"))
	f.Add(append(resp, req(10, "z")...))
	f.Add(binary.BigEndian.AppendUint32(nil, 1<<30))
	f.Add(append(binary.BigEndian.AppendUint32(nil, 200<<10), make([]byte, 100<<10)...))
	f.Add(append(req(10, "a"), 0, 0, 0, 2, 0, 0))
	const maxFrame = 256 << 10
	f.Fuzz(func(t *testing.T, in []byte) {
		want := splitStream(in, maxFrame)
		nc, peer := net.Pipe()
		var mu sync.Mutex
		var got []*RemotingCommand
		closed := make(chan struct{})
		budget := &frameBudget{limit: 1 << 20}
		c := newConn(nc, connOptions{maxFrameSize: maxFrame, writeQueue: 16, budget: budget}, zap.NewNop(),
			func(_ *Conn, r *RemotingCommand, _ int) {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
			}, func(*Conn) { close(closed) })
		var wg sync.WaitGroup
		c.start(&wg)
		drained := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, peer); close(drained) }()
		_, _ = peer.Write(in)
		_ = peer.Close()
		<-closed
		wg.Wait()
		<-drained
		if used := budget.used.Load(); used != 0 {
			t.Fatalf("%d bytes of the frame budget still reserved", used)
		}
		if len(got) != len(want) {
			t.Fatalf("connection handed on %d requests, the frames hold %d", len(got), len(want))
		}
		for i := range want {
			if !sameCommand(got[i], want[i]) {
				t.Fatalf("request %d: got %v, want %v", i, got[i], want[i])
			}
		}
	})
}

// splitStream decodes in frame by frame as a connection reads it and
// returns the requests it would handle: those before the first frame that
// is out of bounds, truncated or undecodable.
func splitStream(in []byte, maxFrame int) []*RemotingCommand {
	var out []*RemotingCommand
	for len(in) >= 4 {
		n := int64(int32(binary.BigEndian.Uint32(in)))
		if n < 4 || n > int64(maxFrame) || n > int64(len(in)-4) {
			break
		}
		cmd, err := DecodeFrame(in[4 : 4+n])
		if err != nil {
			break
		}
		in = in[4+n:]
		if !cmd.IsResponse() && cmd.wideCode == 0 {
			out = append(out, cmd)
		}
	}
	return out
}
