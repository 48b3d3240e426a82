package remoting

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// manyExtFrame is a request frame (code, opaque 7) whose header holds n
// extFields, with distinct keys or all the same empty key, in st.
func manyExtFrame(st SerializeType, code int16, n int, distinct bool) []byte {
	var h []byte
	if st == SerializeJSON {
		// fastjson's alphabetical order: extFields before opaque.
		h = fmt.Appendf(h, `{"code":%d,"extFields":{`, code)
		for i := range n {
			if i > 0 {
				h = append(h, ',')
			}
			if distinct {
				h = fmt.Appendf(h, `"%x":""`, i)
			} else {
				h = append(h, `"":""`...)
			}
		}
		h = append(h, `},"flag":0,"language":"JAVA","opaque":7,"version":399}`...)
	} else {
		h = binary.BigEndian.AppendUint16(h, uint16(code))
		h = append(h, byte(LanguageGo))
		h = binary.BigEndian.AppendUint16(h, 317)
		h = binary.BigEndian.AppendUint32(h, 7) // opaque
		h = binary.BigEndian.AppendUint32(h, 0) // flag
		h = binary.BigEndian.AppendUint32(h, 0) // remark
		var ext []byte
		for i := range n {
			k := ""
			if distinct {
				k = fmt.Sprintf("%x", i)
			}
			ext = binary.BigEndian.AppendUint16(ext, uint16(len(k)))
			ext = append(ext, k...)
			ext = binary.BigEndian.AppendUint32(ext, 0)
		}
		h = binary.BigEndian.AppendUint32(h, uint32(len(ext)))
		h = append(h, ext...)
	}
	f := binary.BigEndian.AppendUint32(nil, uint32(4+len(h)))
	f = binary.BigEndian.AppendUint32(f, uint32(st)<<24|uint32(len(h)))
	return append(f, h...)
}

// TestTooManyExtFieldsRefusedCheaply: a header of millions of extFields
// (a 16 MiB frame holds 2.8 million empty ones) is refused after
// maxExtFields, in both serializations, without building them: decoding
// one cost 100–600 MiB of allocation and seconds of the reader's CPU.
func TestTooManyExtFieldsRefusedCheaply(t *testing.T) {
	for _, st := range []SerializeType{SerializeRocketMQ, SerializeJSON} {
		for _, distinct := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/distinct=%v", st, distinct), func(t *testing.T) {
				frame := manyExtFrame(st, RequestHeartBeat, 400_000, distinct)
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				c, err := DecodeFrame(frame[lengthFieldSize:])
				runtime.ReadMemStats(&after)
				if !errors.Is(err, ErrInvalidHeader) || !strings.Contains(err.Error(), "extFields") {
					t.Fatalf("DecodeFrame = %v, %v; want an invalid header naming the extFields", c, err)
				}
				if got := after.TotalAlloc - before.TotalAlloc; got > uint64(2*len(frame))+1<<20 {
					t.Fatalf("refusing a %d-byte header allocated %d bytes", len(frame), got)
				}
				ok := manyExtFrame(st, RequestHeartBeat, maxExtFields, distinct)
				if c, err := DecodeFrame(ok[lengthFieldSize:]); err != nil || distinct && len(c.ExtFields) != maxExtFields {
					t.Fatalf("a header of maxExtFields fields: %v", err)
				}
			})
		}
	}
}

// TestTooManyExtFieldsAnswered: a request with too many extFields is
// answered SYSTEM_ERROR naming the bound, with its opaque and in its
// serialization, and the connection keeps serving.
func TestTooManyExtFieldsAnswered(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) { s.Register(RequestHeartBeat, echo, 1, 64) })
	for _, st := range []SerializeType{SerializeRocketMQ, SerializeJSON} {
		t.Run(st.String(), func(t *testing.T) {
			nc, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(manyExtFrame(st, RequestHeartBeat, maxExtFields+1, true)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(nc)
			resp := readTestFrame(t, br)
			if !resp.IsResponse() || resp.Opaque != 7 || resp.SerializeType != st || resp.Code != ResponseSystemError ||
				!strings.Contains(resp.Remark, "extFields") {
				t.Fatalf("answer %+v; want SYSTEM_ERROR to opaque 7 naming the extFields", resp)
			}
			ping := NewRequest(RequestHeartBeat, nil, []byte("ping"))
			ping.Opaque, ping.SerializeType = 8, st
			f, err := EncodeFrame(ping)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nc.Write(f); err != nil {
				t.Fatal(err)
			}
			if resp := readTestFrame(t, br); resp.Opaque != 8 || string(resp.Body) != "ping" {
				t.Fatalf("next request on the connection: %+v", resp)
			}
		})
	}
}

func readTestFrame(t *testing.T, r io.Reader) *RemotingCommand {
	t.Helper()
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(l[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	c, err := DecodeFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
