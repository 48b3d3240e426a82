package main

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
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
	tags     string // produce: every message's tag
	tagExpr  string // consume: the subscription's tag expression
	jsonOut  bool
	fromLast bool
	cpuProf  string
	autoB    int
	rate     float64
	tls      tlsFlags
	acl      aclFlags // signs every request (brokers with aclEnable)
}

// benchNamesrvDefault is -n's default: the NAMESRV_ADDR environment
// variable, as for admin and RocketMQ's tools, else the local default port.
func benchNamesrvDefault() string {
	if ns := os.Getenv("NAMESRV_ADDR"); ns != "" {
		return ns
	}
	return "127.0.0.1:9876"
}

func newBenchCmd(g *globalFlags) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load generator: produce or consume with the raftmq SDK and report TPS and HDR latency percentiles",
	}
	produce := &cobra.Command{
		Use:   "produce",
		Short: "Send messages as fast as the workers can (sync, or async with a window)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), g, f, cmd.OutOrStdout(), true)
		},
	}
	f.registerRun(produce.Flags())
	produce.Flags().IntVarP(&f.workers, "workers", "w", 64, "concurrent senders")
	produce.Flags().IntVarP(&f.workers, "concurrency", "c", 64, "alias of --workers")
	produce.Flags().IntVarP(&f.size, "size", "s", 1024, "message body size in bytes")
	produce.Flags().BoolVar(&f.async, "async", false, "send asynchronously, --window messages in flight per worker")
	produce.Flags().IntVar(&f.window, "window", 16, "async in-flight messages per worker")
	produce.Flags().BoolVar(&f.keys, "keys", false, "give every message a unique key (indexed)")
	produce.Flags().StringVar(&f.tags, "tags", "", "tag of every message")
	produce.Flags().IntVar(&f.autoB, "auto-batch", 0, "client.AutoBatch: concurrent sends share batch requests of up to N messages (0 = off)")
	produce.Flags().Float64Var(&f.rate, "rate", 0, "send at most this many messages per second in all (0 = as fast as the workers can)")
	consume := &cobra.Command{
		Use:   "consume",
		Short: "Consume with a push consumer and report TPS, MB/s and end-to-end (store→consume) latency",
		Long: `Consume with a push consumer and report TPS, MB/s and end-to-end latency.

The latency is store→consume: from the broker's store timestamp (set when the
leader appended the message) to delivery to the listener, so it includes the
Raft commit, the long poll's wake-up and the pull. It is meaningful for live
traffic (run bench produce at the same time, with --from-last for a new group);
over a backlog it is the messages' age. The broker's clock and this host's must
agree; stored timestamps have millisecond resolution.

Rates are taken from the first to the last delivery; MB/s counts message
bodies, the "as stored" figure whole stored messages (what the pulls carried).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), g, f, cmd.OutOrStdout(), false)
		},
	}
	f.registerRun(consume.Flags())
	consume.Flags().StringVarP(&f.group, "group", "g", "benchmark_consumer", "consumer group")
	consume.Flags().StringVar(&f.tagExpr, "tags", "*", "tag expression")
	consume.Flags().BoolVar(&f.fromLast, "from-last", false, "a new group starts at the queues' end instead of the oldest message")
	cmd.AddCommand(produce, consume, newBenchTimerCmd(), newBenchScaleCmd(), newBenchRestartCmd())
	return cmd
}

// registerRun adds the flags of a produce or consume run against a
// running cluster. timer, scale and restart start their own local group
// and take none of them.
func (f *benchFlags) registerRun(fs *pflag.FlagSet) {
	fs.StringVarP(&f.namesrv, "namesrv", "n", benchNamesrvDefault(), "name server addresses, host:port;host:port (default: $NAMESRV_ADDR, else 127.0.0.1:9876)")
	fs.StringVarP(&f.topic, "topic", "t", "BenchmarkTest", "topic")
	fs.DurationVarP(&f.duration, "duration", "d", 0, "run for this long (default 30s unless -m is given)")
	fs.Int64VarP(&f.count, "count", "m", 0, "stop after this many messages")
	fs.DurationVar(&f.interval, "interval", time.Second, "report interval")
	fs.BoolVar(&f.jsonOut, "json", false, "print a machine-readable JSON summary at the end")
	f.tls.register(fs)
	f.acl.register(fs)
	fs.StringVar(&f.cpuProf, "cpuprofile", "", "write a CPU profile of this bench process to this file (the client's share of the CPU)")
}

// benchStats is shared by the workers; the histograms are guarded by mu.
type benchStats struct {
	ok, failed atomic.Int64
	// bytes counts message bodies as the application sees them (after
	// decompression): the payload rate, comparable between produce and
	// consume. storeBytes counts, for consume, each message's stored size
	// (TOTALSIZE: properties, topic and headers included), which is what the
	// pull responses carried.
	bytes, storeBytes atomic.Int64
	// first and last are the UnixNano times of the first and last record:
	// consume rates are taken over this span, not from process start, so the
	// consumer's start-up and rebalance and the idle tail of a -d run after
	// the backlog is drained do not dilute them.
	first, last atomic.Int64
	mu          sync.Mutex
	firstErr    string // the first failure's error, so the summary says why
	maxUs       int64
	hist        *hdrhistogram.Histogram // microseconds
	window      *hdrhistogram.Histogram // current interval
	clamped     int64                   // values above maxUs, recorded as maxUs
}

// fail counts a failed send and keeps the first one's error, with hint
// (what to check) appended.
func (s *benchStats) fail(err error, hint string) {
	s.failed.Add(1)
	s.mu.Lock()
	if s.firstErr == "" {
		s.firstErr = err.Error() + hint
	}
	s.mu.Unlock()
}

// produceMaxLatency bounds the send latency histogram (a send that takes
// longer has failed at the client's timeout anyway).
const produceMaxLatency = time.Minute

// consumeMaxLatency bounds the store→consume histogram: a backlog read from
// the oldest offset has messages hours old, and a value above the
// histogram's range would otherwise be dropped instead of counted.
const consumeMaxLatency = 24 * time.Hour

func newBenchStats(maxLatency time.Duration) *benchStats {
	maxUs := maxLatency.Microseconds()
	return &benchStats{maxUs: maxUs, hist: hdrhistogram.New(1, maxUs, 3), window: hdrhistogram.New(1, maxUs, 3)}
}

// record counts one message of payload body bytes and storeSize stored
// bytes (0 when unknown), received or acknowledged at time at, with
// latency d.
func (s *benchStats) record(at time.Time, d time.Duration, payload, storeSize int) {
	s.ok.Add(1)
	s.bytes.Add(int64(payload))
	s.storeBytes.Add(int64(storeSize))
	ns := at.UnixNano()
	s.first.CompareAndSwap(0, ns)
	for {
		l := s.last.Load()
		if ns <= l || s.last.CompareAndSwap(l, ns) {
			break
		}
	}
	// Below 1 µs (or negative, when the consumer's clock is behind the
	// broker's) counts as 1 µs, the histogram's lowest value.
	v := max(d.Microseconds(), 1)
	s.mu.Lock()
	if v > s.maxUs {
		v = s.maxUs
		s.clamped++
	}
	_ = s.hist.RecordValue(v)
	_ = s.window.RecordValue(v)
	s.mu.Unlock()
}

// recordConsumed records a batch delivered to the listener at now. The
// latency is store→consume: now minus the broker's STORETIMESTAMP, set when
// the leader appended the message, so it covers Raft commit, dispatch to the
// consume queue, the long poll's wake-up, the pull response and the client's
// decode and hand-off, and not the producer's send (bench produce measures
// that). BORNTIMESTAMP would add the producer's side and its clock; either
// way the broker's and this host's clocks must agree, and the stored
// timestamps have millisecond resolution.
func (s *benchStats) recordConsumed(now time.Time, msgs []*client.MessageExt) {
	for _, m := range msgs {
		s.record(now, now.Sub(time.UnixMilli(m.StoreTimestamp)), len(m.Body), int(m.StoreSize))
	}
}

// benchInterval is the reporter's state between two interval lines.
type benchInterval struct {
	ok, bytes int64
	at        time.Time
}

// tick returns the interval line for [iv.at, now) and advances iv.
func (s *benchStats) tick(now time.Time, iv *benchInterval) string {
	ok, bytes := s.ok.Load(), s.bytes.Load()
	s.mu.Lock()
	w := s.window
	s.window = hdrhistogram.New(1, s.maxUs, 3)
	s.mu.Unlock()
	dt := now.Sub(iv.at).Seconds()
	line := fmt.Sprintf("%s tps=%.0f MB/s=%.1f failed=%d p50=%s p90=%s p99=%s p999=%s max=%s",
		now.Format("15:04:05"), float64(ok-iv.ok)/dt, float64(bytes-iv.bytes)/dt/(1<<20), s.failed.Load(),
		us(w.ValueAtQuantile(50)), us(w.ValueAtQuantile(90)), us(w.ValueAtQuantile(99)),
		us(w.ValueAtQuantile(99.9)), us(w.Max()))
	iv.ok, iv.bytes, iv.at = ok, bytes, now
	return line
}

// benchSummary is the --json output.
type benchSummary struct {
	Mode     string  `json:"mode"`
	Messages int64   `json:"messages"`
	Failed   int64   `json:"failed"`
	Seconds  float64 `json:"seconds"`
	TPS      float64 `json:"tps"`
	// MBps is message bodies per second (MiB/s).
	MBps float64 `json:"mbPerSec"`
	// StoreMBps (consume) is stored message bytes per second (MiB/s):
	// bodies plus each message's headers, properties and topic.
	StoreMBps float64 `json:"storeMbPerSec,omitempty"`
	// Latency says what the percentiles measure: "send" (request to ack)
	// or "store-to-consume" (broker's store timestamp to delivery).
	Latency string `json:"latency"`
	P50us   int64  `json:"p50us"`
	P90us   int64  `json:"p90us"`
	P99us   int64  `json:"p99us"`
	P999us  int64  `json:"p999us"`
	MaxUs   int64  `json:"maxUs"`
	// Clamped counts latencies above the histogram's range, recorded as
	// its maximum.
	Clamped int64 `json:"clamped,omitempty"`
	// FirstError is the first failed send's error (the broker's code and
	// remark for a refusal).
	FirstError string `json:"firstError,omitempty"`
	// CPUus is this process's CPU time (user+system) per message: the
	// client's cost, which shares the cores with a local broker.
	CPUus float64 `json:"clientCpuUsPerMsg"`
	// Brokers is each broker process's CPU per message (bench_cpu.go);
	// BrokersCPUus is their sum.
	Brokers      []brokerCPU `json:"brokers,omitempty"`
	BrokersCPUus float64     `json:"brokersCpuUsPerMsg,omitempty"`
}

// summary aggregates the run. elapsed is the whole run; a consume run's
// rates use the span from the first to the last delivery instead when
// there is one (see benchStats.first).
func (s *benchStats) summary(produce bool, elapsed time.Duration) benchSummary {
	sum := benchSummary{Mode: "produce", Latency: "send", Messages: s.ok.Load(), Failed: s.failed.Load()}
	span := elapsed
	if !produce {
		sum.Mode, sum.Latency = "consume", "store-to-consume"
		if d := time.Duration(s.last.Load() - s.first.Load()); s.first.Load() != 0 && d > 0 {
			span = d
		}
	}
	sum.Seconds = span.Seconds()
	if sum.Seconds > 0 {
		sum.TPS = float64(sum.Messages) / sum.Seconds
		sum.MBps = float64(s.bytes.Load()) / sum.Seconds / (1 << 20)
		if !produce {
			sum.StoreMBps = float64(s.storeBytes.Load()) / sum.Seconds / (1 << 20)
		}
	}
	s.mu.Lock()
	h := s.hist
	sum.P50us, sum.P90us, sum.P99us = h.ValueAtQuantile(50), h.ValueAtQuantile(90), h.ValueAtQuantile(99)
	sum.P999us, sum.MaxUs, sum.Clamped = h.ValueAtQuantile(99.9), h.Max(), s.clamped
	sum.FirstError = s.firstErr
	s.mu.Unlock()
	return sum
}

// text is the summary's human-readable line.
func (sum benchSummary) text() string {
	rate := fmt.Sprintf("%.1f MB/s", sum.MBps)
	latency := "latency"
	if sum.Mode == "consume" {
		rate += fmt.Sprintf(" (%.1f MB/s as stored)", sum.StoreMBps)
		latency = "store→consume latency"
	}
	line := fmt.Sprintf("total %s: %d ok, %d failed in %.1fs: %.0f msg/s, %s, %s p50 %s p90 %s p99 %s p999 %s max %s, client CPU %.1f µs/msg",
		sum.Mode, sum.Messages, sum.Failed, sum.Seconds, sum.TPS, rate, latency,
		us(sum.P50us), us(sum.P90us), us(sum.P99us), us(sum.P999us), us(sum.MaxUs), sum.CPUus)
	if sum.Clamped > 0 {
		line += fmt.Sprintf(" (%d latencies above %s counted as %s)", sum.Clamped, us(sum.MaxUs), us(sum.MaxUs))
	}
	if sum.FirstError != "" {
		line += "\nfirst failure: " + sum.FirstError
	}
	if b := brokersCPUText(sum.Brokers, sum.CPUus); b != "" {
		line += "\n" + b
	}
	return line
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
	st := newBenchStats(produceMaxLatency)
	if !produce {
		st = newBenchStats(consumeMaxLatency)
	}
	probe, err := newBrokerCPUProbe(f, log)
	if err != nil {
		return err
	}
	defer probe.close()
	brokers0 := probe.sample(ctx)
	cpu0 := processCPU()
	start := time.Now()
	done := make(chan struct{})
	go func() { // reporter
		defer close(done)
		t := time.NewTicker(f.interval)
		defer t.Stop()
		iv := &benchInterval{at: start}
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				line := st.tick(now, iv)
				if f.count > 0 {
					line += " " + progressBar(iv.ok, f.count)
				}
				fmt.Fprintln(out, line)
			}
		}
	}()
	if produce {
		err = benchProduce(ctx, stop, f, st, log)
	} else {
		err = benchConsume(ctx, stop, f, st, log)
	}
	if err != nil {
		err = fmt.Errorf("%w%s", err, f.tls.plaintextHint(err))
	}
	stop()
	<-done
	sum := st.summary(produce, time.Since(start))
	if n := st.ok.Load(); n > 0 {
		sum.CPUus = float64((processCPU() - cpu0).Microseconds()) / float64(n)
		sum.Brokers = brokerCPUPerMsg(brokers0, probe.sample(context.Background()), n)
		for _, b := range sum.Brokers {
			sum.BrokersCPUus += b.CPUus
		}
	}
	if f.jsonOut {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(out, string(b))
	} else {
		fmt.Fprintln(out, sum.text())
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
	creds, err := f.acl.credentials()
	if err != nil {
		return err
	}
	p, err := client.NewProducer(client.NameServers(strings.Split(f.namesrv, ";")...), client.WithLogger(log),
		client.ProducerGroup("benchmark_producer"), client.AutoBatch(f.autoB, 256<<10, 0), f.tls.clientOpt(),
		client.WithCredentials(creds.AccessKey, creds.SecretKey))
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	defer p.Close(context.Background())
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
			pace := newBenchPacer(f.rate, f.workers)
			for ctx.Err() == nil && pace.wait(ctx) && take() {
				if f.async {
					sem <- struct{}{}
					t0 := time.Now()
					err := p.SendAsync(ctx, newMsg(), func(_ *client.SendResult, err error) {
						if err != nil {
							// Sends cut off by the end of a -d run are not
							// failures (as in the sync path).
							if !cutOff(ctx, err, time.Now()) {
								st.fail(err, f.tls.plaintextHint(err))
							}
						} else {
							now := time.Now()
							st.record(now, now.Sub(t0), f.size, 0)
						}
						<-sem
						finished()
					})
					if err != nil {
						<-sem
						if !cutOff(ctx, err, time.Now()) {
							st.fail(err, f.tls.plaintextHint(err))
						}
					}
					continue
				}
				t0 := time.Now()
				if _, err := p.SendSync(ctx, newMsg()); err != nil {
					if !cutOff(ctx, err, time.Now()) {
						st.fail(err, f.tls.plaintextHint(err))
					}
				} else {
					now := time.Now()
					st.record(now, now.Sub(t0), f.size, 0)
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

// cutOff reports whether a send that failed with err at now was cut off
// by the end of the run rather than failed: it timed out or was cancelled
// once the run's context had ended. A send bounded by the run's deadline
// times out on the client's own request timer, which may fire before the
// context's timer marks it done, so the deadline itself counts as the end.
// A broker's refusal is a failure whenever it comes.
func cutOff(ctx context.Context, err error, now time.Time) bool {
	if !errors.Is(err, remoting.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return false
	}
	if ctx.Err() != nil {
		return true
	}
	end, ok := ctx.Deadline()
	return ok && !now.Before(end)
}

func benchConsume(ctx context.Context, stop context.CancelFunc, f *benchFlags, st *benchStats, log *zap.Logger) error {
	from := client.ConsumeFromFirstOffset
	if f.fromLast {
		from = client.ConsumeFromLastOffset
	}
	creds, err := f.acl.credentials()
	if err != nil {
		return err
	}
	c, err := client.NewPushConsumer(client.NameServers(strings.Split(f.namesrv, ";")...), client.WithLogger(log),
		client.ConsumerGroup(f.group), client.ConsumeFrom(from), f.tls.clientOpt(), client.WithCredentials(creds.AccessKey, creds.SecretKey))
	if err != nil {
		return err
	}
	if err := c.Subscribe(f.topic, f.tagExpr); err != nil {
		return err
	}
	err = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		st.recordConsumed(time.Now(), msgs)
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
