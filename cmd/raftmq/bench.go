package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
)

// benchFlags configure `raftmq bench produce|consume`, in the spirit of
// RocketMQ's benchmark tools.
type benchFlags struct {
	namesrv  string
	topic    string
	group    string
	workers  int
	size     int
	duration time.Duration
	count    int64
	interval time.Duration
	async    bool
	window   int
	keys     bool
	tags     string
	jsonOut  bool
	fromLast bool
	cpuProf  string
	autoB    int
}

func newBenchCmd(g *globalFlags) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load generator: produce or consume with the raftmq SDK and report TPS and HDR latency percentiles",
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&f.namesrv, "namesrv", "n", "127.0.0.1:9876", "name server addresses, host:port;host:port")
	pf.StringVarP(&f.topic, "topic", "t", "BenchmarkTest", "topic")
	pf.DurationVarP(&f.duration, "duration", "d", 0, "run for this long (default 30s unless -m is given)")
	pf.Int64VarP(&f.count, "count", "m", 0, "stop after this many messages")
	pf.DurationVar(&f.interval, "interval", time.Second, "report interval")
	pf.BoolVar(&f.jsonOut, "json", false, "print a machine-readable JSON summary at the end")
	pf.StringVar(&f.cpuProf, "cpuprofile", "", "write a CPU profile of this bench process to this file (the client's share of the CPU)")
	produce := &cobra.Command{
		Use:   "produce",
		Short: "Send messages as fast as the workers can (sync, or async with a window)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), g, f, cmd.OutOrStdout(), true)
		},
	}
	produce.Flags().IntVarP(&f.workers, "workers", "w", 64, "concurrent senders")
	produce.Flags().IntVarP(&f.workers, "concurrency", "c", 64, "alias of --workers")
	produce.Flags().IntVarP(&f.size, "size", "s", 1024, "message body size in bytes")
	produce.Flags().BoolVar(&f.async, "async", false, "send asynchronously, --window messages in flight per worker")
	produce.Flags().IntVar(&f.window, "window", 16, "async in-flight messages per worker")
	produce.Flags().BoolVar(&f.keys, "keys", false, "give every message a unique key (indexed)")
	produce.Flags().StringVar(&f.tags, "tags", "", "tag of every message")
	produce.Flags().IntVar(&f.autoB, "auto-batch", 0, "client.AutoBatch: concurrent sends share batch requests of up to N messages (0 = off)")
	consume := &cobra.Command{
		Use:   "consume",
		Short: "Consume with a push consumer and report TPS and end-to-end (store→deliver) latency",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), g, f, cmd.OutOrStdout(), false)
		},
	}
	consume.Flags().StringVarP(&f.group, "group", "g", "benchmark_consumer", "consumer group")
	consume.Flags().StringVar(&f.tags, "tags", "*", "tag expression")
	consume.Flags().BoolVar(&f.fromLast, "from-last", false, "a new group starts at the queues' end instead of the oldest message")
	cmd.AddCommand(produce, consume)
	return cmd
}

// benchStats is shared by the workers; the histogram is guarded by mu.
type benchStats struct {
	ok, failed, bytes atomic.Int64
	mu                sync.Mutex
	hist              *hdrhistogram.Histogram // microseconds
	window            *hdrhistogram.Histogram // current interval
}

func newBenchStats() *benchStats {
	return &benchStats{hist: hdrhistogram.New(1, 60_000_000, 3), window: hdrhistogram.New(1, 60_000_000, 3)}
}

func (s *benchStats) record(d time.Duration, n int) {
	s.ok.Add(1)
	s.bytes.Add(int64(n))
	us := max(d.Microseconds(), 1)
	s.mu.Lock()
	_ = s.hist.RecordValue(us)
	_ = s.window.RecordValue(us)
	s.mu.Unlock()
}

// benchSummary is the --json output.
type benchSummary struct {
	Mode     string  `json:"mode"`
	Messages int64   `json:"messages"`
	Failed   int64   `json:"failed"`
	Seconds  float64 `json:"seconds"`
	TPS      float64 `json:"tps"`
	MBps     float64 `json:"mbPerSec"`
	P50us    int64   `json:"p50us"`
	P90us    int64   `json:"p90us"`
	P99us    int64   `json:"p99us"`
	P999us   int64   `json:"p999us"`
	MaxUs    int64   `json:"maxUs"`
	// CPUus is this process's CPU time (user+system) per message: the
	// client's cost, which shares the cores with a local broker.
	CPUus float64 `json:"clientCpuUsPerMsg"`
}

func runBench(ctx context.Context, g *globalFlags, f *benchFlags, out io.Writer, produce bool) error {
	if f.duration == 0 && f.count == 0 {
		f.duration = 30 * time.Second
	}
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	log, err := g.logger()
	if err != nil {
		return err
	}
	if f.cpuProf != "" {
		pf, err := os.Create(f.cpuProf)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer func() { _ = pf.Close() }()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	st := newBenchStats()
	cpu0 := processCPU()
	start := time.Now()
	done := make(chan struct{})
	go func() { // reporter
		defer close(done)
		t := time.NewTicker(f.interval)
		defer t.Stop()
		var lastOK int64
		last := start
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				ok := st.ok.Load()
				st.mu.Lock()
				w := st.window
				st.window = hdrhistogram.New(1, 60_000_000, 3)
				st.mu.Unlock()
				tps := float64(ok-lastOK) / now.Sub(last).Seconds()
				line := fmt.Sprintf("%s tps=%.0f MB/s=%.1f failed=%d p50=%s p90=%s p99=%s p999=%s max=%s",
					now.Format("15:04:05"), tps, tps*float64(max(f.size, 0))/(1<<20), st.failed.Load(),
					us(w.ValueAtQuantile(50)), us(w.ValueAtQuantile(90)), us(w.ValueAtQuantile(99)),
					us(w.ValueAtQuantile(99.9)), us(w.Max()))
				if f.count > 0 {
					line += " " + progressBar(ok, f.count)
				}
				fmt.Fprintln(out, line)
				lastOK, last = ok, now
			}
		}
	}()
	if produce {
		err = benchProduce(ctx, stop, f, st, log)
	} else {
		err = benchConsume(ctx, stop, f, st, log)
	}
	stop()
	<-done
	el := time.Since(start).Seconds()
	st.mu.Lock()
	h := st.hist
	sum := benchSummary{Mode: map[bool]string{true: "produce", false: "consume"}[produce], Messages: st.ok.Load(),
		Failed: st.failed.Load(), Seconds: el, TPS: float64(st.ok.Load()) / el, MBps: float64(st.bytes.Load()) / el / (1 << 20),
		P50us: h.ValueAtQuantile(50), P90us: h.ValueAtQuantile(90), P99us: h.ValueAtQuantile(99),
		P999us: h.ValueAtQuantile(99.9), MaxUs: h.Max()}
	st.mu.Unlock()
	if n := st.ok.Load(); n > 0 {
		sum.CPUus = float64((processCPU() - cpu0).Microseconds()) / float64(n)
	}
	if f.jsonOut {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(out, string(b))
	} else {
		fmt.Fprintf(out, "total %s: %d ok, %d failed in %.1fs: %.0f msg/s, %.1f MB/s, latency p50 %s p90 %s p99 %s p999 %s max %s, client CPU %.1f µs/msg\n",
			sum.Mode, sum.Messages, sum.Failed, el, sum.TPS, sum.MBps, us(sum.P50us), us(sum.P90us), us(sum.P99us), us(sum.P999us), us(sum.MaxUs), sum.CPUus)
	}
	return err
}

// processCPU is the user+system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func us(v int64) string { return (time.Duration(v) * time.Microsecond).String() }

func progressBar(done, total int64) string {
	const width = 20
	n := int(min(done, total) * width / max(total, 1))
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + fmt.Sprintf("] %d/%d", done, total)
}

func benchProduce(ctx context.Context, stop context.CancelFunc, f *benchFlags, st *benchStats, log *zap.Logger) error {
	p, err := client.NewProducer(client.NameServers(strings.Split(f.namesrv, ";")...), client.WithLogger(log),
		client.ProducerGroup("benchmark_producer"), client.AutoBatch(f.autoB, 256<<10, 0))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Close()
	body := make([]byte, f.size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var issued atomic.Int64
	take := func() bool { // claims one message of a -m budget
		return f.count == 0 || issued.Add(1) <= f.count
	}
	finished := func() {
		if f.count > 0 && st.ok.Load()+st.failed.Load() >= f.count {
			stop()
		}
	}
	newMsg := func() *client.Message {
		m := client.NewMessage(f.topic, body)
		m.Tags = f.tags
		if f.keys {
			m.Keys = []string{fmt.Sprintf("k%d", issued.Load())}
		}
		return m
	}
	var wg sync.WaitGroup
	for w := 0; w < max(f.workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := make(chan struct{}, max(f.window, 1))
			for ctx.Err() == nil && take() {
				if f.async {
					sem <- struct{}{}
					t0 := time.Now()
					err := p.SendAsync(ctx, newMsg(), func(_ *client.SendResult, err error) {
						if err != nil {
							st.failed.Add(1)
						} else {
							st.record(time.Since(t0), f.size)
						}
						<-sem
						finished()
					})
					if err != nil {
						<-sem
						st.failed.Add(1)
					}
					continue
				}
				t0 := time.Now()
				if _, err := p.SendSync(ctx, newMsg()); err != nil {
					if ctx.Err() == nil {
						st.failed.Add(1)
					}
				} else {
					st.record(time.Since(t0), f.size)
				}
				finished()
			}
			for i := 0; i < cap(sem); i++ { // drain async sends
				sem <- struct{}{}
			}
		}()
	}
	wg.Wait()
	return nil
}

func benchConsume(ctx context.Context, stop context.CancelFunc, f *benchFlags, st *benchStats, log *zap.Logger) error {
	from := client.ConsumeFromFirstOffset
	if f.fromLast {
		from = client.ConsumeFromLastOffset
	}
	c, err := client.NewPushConsumer(client.NameServers(strings.Split(f.namesrv, ";")...), client.WithLogger(log),
		client.ConsumerGroup(f.group), client.ConsumeFrom(from))
	if err != nil {
		return err
	}
	if err := c.Subscribe(f.topic, f.tags); err != nil {
		return err
	}
	err = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		now := time.Now()
		for _, m := range msgs {
			st.record(now.Sub(time.UnixMilli(m.StoreTimestamp)), len(m.Body))
		}
		if f.count > 0 && st.ok.Load() >= f.count {
			stop()
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Close(cctx)
}
