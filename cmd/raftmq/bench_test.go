package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/remoting"
)

// consumed returns n messages of body bytes, stored at storedAt.
func consumed(n, body int, storeSize int32, storedAt time.Time) []*client.MessageExt {
	msgs := make([]*client.MessageExt, n)
	for i := range msgs {
		msgs[i] = &client.MessageExt{StoreSize: storeSize, StoreTimestamp: storedAt.UnixMilli()}
		msgs[i].Body = make([]byte, body)
	}
	return msgs
}

// within reports whether got is v within HDR's 3 significant digits.
func within(got, v int64) bool { return got >= v-v/500-1 && got <= v+v/500+1 }

// TestBenchConsumeAggregation feeds the consume path two deliveries of 1 MiB
// of bodies each, 2 s apart, and checks the interval lines and the summary:
// MB/s from the bytes received (not from a produce-only --size), rates over
// the first-to-last-delivery span, store→consume percentiles.
func TestBenchConsumeAggregation(t *testing.T) {
	const body, stored, perBatch = 16 << 10, 16<<10 + 200, 64 // 64 × 16 KiB = 1 MiB
	st := newBenchStats(consumeMaxLatency)
	start := time.UnixMilli(1_800_000_000_000)
	iv := &benchInterval{at: start}

	t1 := start.Add(5 * time.Second) // after a slow start-up and rebalance
	st.recordConsumed(t1, consumed(perBatch, body, stored, t1.Add(-5*time.Millisecond)))
	line := st.tick(t1, iv)
	if !strings.Contains(line, " MB/s=0.2 ") || !strings.Contains(line, "p50=5.0") {
		t.Errorf("first interval (5 s, 1 MiB): %s", line)
	}
	line = st.tick(t1.Add(time.Second), iv) // one empty second
	if !strings.Contains(line, "tps=0 MB/s=0.0 ") {
		t.Errorf("empty interval: %s", line)
	}
	t2 := t1.Add(2 * time.Second)
	st.recordConsumed(t2, consumed(perBatch, body, stored, t2.Add(-20*time.Millisecond)))
	line = st.tick(t2, iv)
	if !strings.Contains(line, "tps=64 MB/s=1.0 ") || !strings.Contains(line, "p50=20.0") {
		t.Errorf("interval with 1 MiB in 1 s: %s", line)
	}

	// A -d run goes on idle after the last delivery.
	sum := st.summary(false, t2.Add(10*time.Second).Sub(start))
	if sum.Mode != "consume" || sum.Latency != "store-to-consume" || sum.Messages != 2*perBatch {
		t.Fatalf("summary %+v", sum)
	}
	if sum.Seconds != 2 || sum.TPS != perBatch || sum.MBps != 1 {
		t.Errorf("over the 2 s between first and last delivery of 2 MiB: seconds %v, tps %v, MB/s %v", sum.Seconds, sum.TPS, sum.MBps)
	}
	if want := float64(2*perBatch*stored) / 2 / (1 << 20); sum.StoreMBps != want {
		t.Errorf("stored MB/s %v, want %v", sum.StoreMBps, want)
	}
	if !within(sum.P50us, 5000) || !within(sum.P90us, 20000) || !within(sum.MaxUs, 20000) {
		t.Errorf("percentiles p50 %d p90 %d max %d µs, want 5000, 20000, 20000", sum.P50us, sum.P90us, sum.MaxUs)
	}
	b, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"latency":"store-to-consume"`, `"mbPerSec":1,`, `"p50us":`, `"storeMbPerSec":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("--json lacks %s: %s", want, b)
		}
	}
	if text := sum.text(); !strings.Contains(text, "1.0 MB/s (1.0 MB/s as stored), store→consume latency p50 5.0") {
		t.Errorf("summary line: %s", text)
	}
}

// TestBenchConsumeOldMessages checks that a backlog older than the send
// histogram's minute is counted, and beyond the consume range is clamped
// and reported instead of dropped.
func TestBenchConsumeOldMessages(t *testing.T) {
	st := newBenchStats(consumeMaxLatency)
	now := time.UnixMilli(1_800_000_000_000)
	st.recordConsumed(now, consumed(1, 10, 100, now.Add(-2*time.Hour)))
	st.recordConsumed(now, consumed(1, 10, 100, now.Add(-48*time.Hour)))
	st.recordConsumed(now, consumed(1, 10, 100, now.Add(time.Second))) // consumer clock behind the broker's
	sum := st.summary(false, time.Minute)
	if sum.Messages != 3 || sum.Clamped != 1 {
		t.Fatalf("messages %d clamped %d, want 3 and 1", sum.Messages, sum.Clamped)
	}
	if !within(sum.P50us, (2*time.Hour).Microseconds()) || !within(sum.MaxUs, consumeMaxLatency.Microseconds()) {
		t.Errorf("p50 %d max %d µs", sum.P50us, sum.MaxUs)
	}
	if sum.Seconds != 60 { // all delivered at one instant: the whole run
		t.Errorf("seconds %v", sum.Seconds)
	}
	if !strings.Contains(sum.text(), "1 latencies above") {
		t.Errorf("clamping not reported: %s", sum.text())
	}
}

// TestBenchProduceAggregation checks the produce summary keeps the run's
// wall time and send latency.
func TestBenchProduceAggregation(t *testing.T) {
	st := newBenchStats(produceMaxLatency)
	at := time.UnixMilli(1_800_000_000_000)
	for i := 0; i < 1000; i++ {
		st.record(at, time.Duration(i+1)*time.Microsecond, 1024, 0)
	}
	sum := st.summary(true, 4*time.Second)
	if sum.Mode != "produce" || sum.Latency != "send" || sum.Seconds != 4 || sum.TPS != 250 || sum.MBps != 1000*1024/4.0/(1<<20) {
		t.Errorf("summary %+v", sum)
	}
	if sum.StoreMBps != 0 || !within(sum.P50us, 500) || sum.MaxUs != 1000 {
		t.Errorf("summary %+v", sum)
	}
}

// runBenchCmd runs `raftmq bench ARGS --json` and decodes its summary.
func runBenchCmd(t *testing.T, args ...string) benchSummary {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(append(append([]string{"--log-level", "error", "bench"}, args...), "--json", "--interval", "1h"))
	if err := root.Execute(); err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, out.String())
	}
	var sum benchSummary
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, out.String())
	}
	return sum
}

// TestBenchConsumeLive produces n messages of known size into a live
// 3-node group and consumes them with `bench consume`: the reported MB/s
// times the reported seconds is exactly the bodies received.
func TestBenchConsumeLive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := devcluster.MustStart(t, devcluster.Options{SegmentBytes: 8 << 20, ConsumeQueueEntries: 10_000, InMemory: true})
	const n, size = 2000, 700
	ns := c.NamesrvAddr()
	p := runBenchCmd(t, "produce", "-n", ns, "-t", "BenchLive", "-s", "700", "-w", "8", "-m", "2000")
	if p.Messages != n || p.Failed != 0 {
		t.Fatalf("produce: %+v", p)
	}
	if len(p.Brokers) != 1 || !p.Brokers[0].Shared || len(p.Brokers[0].Members) != 3 || p.Brokers[0].CPUus <= 0 {
		t.Errorf("one in-process cluster: want one shared broker process line, got %+v", p.Brokers)
	}
	sum := runBenchCmd(t, "consume", "-n", ns, "-t", "BenchLive", "-g", "bench-live", "-m", "2000", "-d", "60s")
	if sum.Messages < n || sum.Latency != "store-to-consume" {
		t.Fatalf("consume: %+v", sum)
	}
	got := sum.MBps * sum.Seconds * (1 << 20)
	if want := float64(sum.Messages * size); math.Abs(got-want) > 1e-6*want {
		t.Errorf("MB/s × seconds = %.0f bytes, received %d bodies of %d bytes = %.0f", got, sum.Messages, size, want)
	}
	if sum.StoreMBps <= sum.MBps {
		t.Errorf("stored MB/s %v not above body MB/s %v (stored messages carry headers)", sum.StoreMBps, sum.MBps)
	}
	if sum.P50us <= 0 || sum.MaxUs < sum.P50us {
		t.Errorf("store-to-consume percentiles p50 %d max %d", sum.P50us, sum.MaxUs)
	}
}

// TestCutOff: a send that times out at the run's deadline (the client's
// request timer fired first) or after the run was stopped is not a
// failure; one that times out before, or that a broker refused at any
// time, is.
func TestCutOff(t *testing.T) {
	end := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	timeout := fmt.Errorf("send: %w", remoting.ErrTimeout)
	refused := &client.BrokerError{Code: remoting.ResponseSystemError, Remark: "refused"}
	if cutOff(ctx, timeout, end.Add(-time.Millisecond)) {
		t.Fatal("a timeout before the deadline counted as the run's end")
	}
	if !cutOff(ctx, timeout, end) {
		t.Fatal("a timeout at the deadline, before the context noticed, counted as a failure")
	}
	if cutOff(ctx, refused, end) {
		t.Fatal("a broker's refusal at the deadline was forgiven")
	}
	cancel()
	if !cutOff(ctx, context.Canceled, end.Add(-time.Minute)) {
		t.Fatal("a send cancelled by the stopped run counted as a failure")
	}
	if cutOff(ctx, refused, end.Add(-time.Minute)) {
		t.Fatal("a broker's refusal after the run stopped was forgiven")
	}
	open, stop := context.WithCancel(context.Background())
	defer stop()
	if cutOff(open, timeout, time.Now().Add(time.Hour)) {
		t.Fatal("a run without a deadline ended by itself")
	}
}

// TestBenchNamesrvFromEnv: without -n, bench takes NAMESRV_ADDR as admin and
// RocketMQ's tools do, and the local default port only when it is unset.
func TestBenchNamesrvFromEnv(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"10.0.0.7:9876;10.0.0.8:9876", "10.0.0.7:9876;10.0.0.8:9876"},
		{"", "127.0.0.1:9876"},
	} {
		t.Setenv("NAMESRV_ADDR", tc.env)
		bench, _, err := newRootCmd().Find([]string{"bench", "produce"})
		if err != nil {
			t.Fatal(err)
		}
		if got := bench.Flag("namesrv").Value.String(); got != tc.want {
			t.Errorf("NAMESRV_ADDR=%q: -n defaults to %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestBenchFlagDefaultsPerSubcommand: produce and consume keep their own
// defaults for flags of the same name (a shared variable takes the default
// registered last: every produced message was tagged "*").
func TestBenchFlagDefaultsPerSubcommand(t *testing.T) {
	for sub, want := range map[string]string{"produce": "", "consume": "*"} {
		c, _, err := newRootCmd().Find([]string{"bench", sub})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Flag("tags").Value.String(); got != want {
			t.Errorf("bench %s --tags defaults to %q, want %q", sub, got, want)
		}
	}
}

// TestBenchLocalGroupFlags: bench timer, scale and restart start their own
// local group, so they take none of produce's and consume's connection
// flags (name server, topic, TLS, ACL keys, run length, profile): a flag
// shown in their help and then ignored would mislead.
func TestBenchLocalGroupFlags(t *testing.T) {
	conn := []string{"aclAccessKey", "aclSecretKey", "namesrv", "topic", "tls", "tls-trust-cert", "interval", "cpuprofile"}
	for _, sub := range []string{"produce", "consume"} {
		c, _, err := newRootCmd().Find([]string{"bench", sub})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range append(conn, "duration", "count", "json") {
			if c.Flag(name) == nil {
				t.Errorf("bench %s has no --%s", sub, name)
			}
		}
	}
	for _, sub := range []string{"timer", "scale", "restart"} {
		c, _, err := newRootCmd().Find([]string{"bench", sub})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range conn {
			if c.Flag(name) != nil {
				t.Errorf("bench %s shows --%s, which it ignores", sub, name)
			}
		}
		// scale's own -d is its measurement time; timer's --count has no -m.
		if sub != "scale" && c.Flag("duration") != nil {
			t.Errorf("bench %s shows --duration, which it ignores", sub)
		}
		if c.Flags().ShorthandLookup("m") != nil {
			t.Errorf("bench %s shows -m, which it ignores", sub)
		}
	}
}
