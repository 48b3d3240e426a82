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
