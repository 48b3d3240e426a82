package remoting

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// BenchmarkRoundTrip measures empty sync requests over loopback through
// our Client and Server with 1 and 64 concurrent callers, reporting ops/s
// and the p99 latency of single calls.
func BenchmarkRoundTrip(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s := startServer(b, ServerConfig{}, nil, func(s *Server) {
				s.Register(RequestHeartBeat, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
					return NewResponse(ResponseSuccess, ""), nil
				}, 8, 4096)
			})
			addr := s.Addr().String()
			c := newTestClient(b, ClientConfig{})
			if _, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, nil)); err != nil {
				b.Fatal(err)
			}
			hists := make([]*hdrhistogram.Histogram, callers)
			for i := range hists {
				hists[i] = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			}
			per := b.N / callers
			if per == 0 {
				per = 1
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < callers; w++ {
				wg.Add(1)
				go func(h *hdrhistogram.Histogram) {
					defer wg.Done()
					ctx := context.Background()
					for i := 0; i < per; i++ {
						t0 := time.Now()
						resp, err := c.InvokeSync(ctx, addr, NewRequest(RequestHeartBeat, nil, nil))
						if err != nil || resp.Code != ResponseSuccess {
							b.Errorf("call: %v %v", resp, err)
							return
						}
						_ = h.RecordValue(time.Since(t0).Microseconds())
					}
				}(hists[w])
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			for _, h := range hists {
				all.Merge(h)
			}
			b.ReportMetric(float64(per*callers)/elapsed.Seconds(), "ops/s")
			b.ReportMetric(float64(all.ValueAtQuantile(50)), "p50-µs")
			b.ReportMetric(float64(all.ValueAtQuantile(99)), "p99-µs")
		})
	}
}

// BenchmarkLargeFrame measures sync requests whose bodies exceed the
// reused read buffer (a 4 MiB batch, a 256 KiB send) and arrive in several
// reads: the server's buffer grows as the bytes arrive.
func BenchmarkLargeFrame(b *testing.B) {
	for _, size := range []int{256 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			s := startServer(b, ServerConfig{}, nil, func(s *Server) {
				s.Register(RequestHeartBeat, func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) {
					return NewResponse(ResponseSuccess, ""), nil
				}, 2, 64)
			})
			addr := s.Addr().String()
			c := newTestClient(b, ClientConfig{})
			body := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				resp, err := c.InvokeSync(context.Background(), addr, NewRequest(RequestHeartBeat, nil, body))
				if err != nil || resp.Code != ResponseSuccess {
					b.Fatalf("call: %v %v", resp, err)
				}
			}
		})
	}
}

// benchSendHeader is a SEND_MESSAGE_V2 header as the project's producer writes
// it (fields a..n), for the codec benchmarks.
type benchSendHeader struct{}

func (benchSendHeader) AppendExt(w *ExtWriter) {
	w.String("a", "benchmark_producer")
	w.String("b", "BenchTopic")
	w.String("c", "TBW102")
	w.Int("d", 4)
	w.Int("e", 3)
	w.Int("f", 0)
	w.Int("g", 1764400000123)
	w.Int("h", 0)
	w.String("i", "UNIQ_KEY\x017F0000010001B4A3C5F10000000000000001\x02WAIT\x01true\x02")
	w.Int("j", 0)
	w.Bool("k", false)
	w.Bool("m", false)
	w.String("n", "broker-a")
}

func sendHeaderMap() map[string]string {
	return map[string]string{"a": "benchmark_producer", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "3", "f": "0",
		"g": "1764400000123", "h": "0", "i": "UNIQ_KEY\x017F0000010001B4A3C5F10000000000000001\x02WAIT\x01true\x02",
		"j": "0", "k": "false", "m": "false", "n": "broker-a"}
}

// BenchmarkEncodeSendRequest: a 1 KiB send request appended to a reused
// buffer, header from an ExtAppender (the producer's path) or from the
// ExtFields map (sorted keys).
func BenchmarkEncodeSendRequest(b *testing.B) {
	body := make([]byte, 1024)
	for _, v := range []string{"appender", "map"} {
		b.Run(v, func(b *testing.B) {
			c := &RemotingCommand{Code: RequestSendMessageV2, Language: LanguageGo, Version: DefaultVersion,
				SerializeType: SerializeRocketMQ, Body: body}
			if v == "appender" {
				c.ExtAppender = benchSendHeader{}
			} else {
				c.ExtFields = sendHeaderMap()
			}
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var err error
				if buf, err = AppendFrame(buf[:0], c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeSendRequest: decoding that request as the broker's
// reader does (extFields into a map) and with the fields left raw
// (DecodeFrameRawExt, what a LazyResponseExt answer gets).
func BenchmarkDecodeSendRequest(b *testing.B) {
	frame, err := EncodeFrame(&RemotingCommand{Code: RequestSendMessageV2, SerializeType: SerializeRocketMQ,
		ExtAppender: benchSendHeader{}, Body: make([]byte, 1024)})
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []string{"map", "raw"} {
		b.Run(v, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var c *RemotingCommand
				if v == "map" {
					c, err = DecodeFrame(frame[4:])
				} else {
					c, err = DecodeFrameRawExt(frame[4:])
				}
				if err != nil {
					b.Fatal(err)
				}
				if q, _ := c.ExtValue("e"); q != "3" {
					b.Fatal(q)
				}
			}
		})
	}
}

// BenchmarkRoute: every request's routing look-up, from readers on every
// core at once (each connection's reader routes its own requests).
func BenchmarkRoute(b *testing.B) {
	s := NewServer(ServerConfig{}, nil)
	s.RegisterAsync(RequestSendMessageV2, func(context.Context, *Conn, *RemotingCommand, *Responder) (*RemotingCommand, error) {
		return nil, nil
	}, AsyncOptions{Workers: 1, QueueSize: 1})
	s.RegisterDefault(func(context.Context, *Conn, *RemotingCommand) (*RemotingCommand, error) { return nil, nil }, 1, 1)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok, _ := s.route(RequestSendMessageV2); !ok {
				b.Fatal("no route")
			}
		}
	})
}
