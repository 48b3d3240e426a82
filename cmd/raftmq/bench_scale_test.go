package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
)

func TestParseCountsAndBytes(t *testing.T) {
	got, err := parseCounts("10, 1000,,20000")
	if err != nil || len(got) != 3 || got[0] != 10 || got[2] != 20000 {
		t.Fatalf("parseCounts = %v, %v", got, err)
	}
	if _, err := parseCounts("10,x"); err == nil {
		t.Fatal("parseCounts accepted x")
	}
	if _, err := parseCounts("0"); err == nil {
		t.Fatal("parseCounts accepted 0")
	}
	for in, want := range map[string]int64{"8GiB": 8 << 30, "1.5MiB": 3 << 19, "64KiB": 64 << 10, "100": 100} {
		if n, err := parseBytes(in); err != nil || n != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	if _, err := parseBytes("8GB"); err == nil {
		t.Error("parseBytes accepted 8GB")
	}
}

// TestBenchPacer: 4 workers at 400 msg/s in all send one message each
// per 10 ms, and a paced worker never runs ahead of its schedule.
func TestBenchPacer(t *testing.T) {
	if newBenchPacer(0, 4) != nil {
		t.Fatal("rate 0 must not pace")
	}
	p := newBenchPacer(400, 4)
	if p.every != 10*time.Millisecond {
		t.Fatalf("every = %v, want 10ms", p.every)
	}
	start := time.Now()
	for range 5 {
		if !p.wait(context.Background()) {
			t.Fatal("wait = false")
		}
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("5 paced sends took %v, want ≥ 40ms", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.next = time.Now().Add(time.Hour)
	if p.wait(ctx) {
		t.Fatal("wait on a cancelled context = true")
	}
}

// TestBenchScaleSmoke runs `bench scale` with small steps on real
// processes and checks every row measured something.
func TestBenchScaleSmoke(t *testing.T) {
	skipMeasuringToolUnderRace(t)
	o := &scaleBenchOpts{dir: t.TempDir(), topics: []int{3, 20}, groups: []int{2}, queues: 2, creators: 4,
		workers: 4, size: 128, duration: time.Second, heartbeatPeriod: 200 * time.Millisecond,
		launch: testLauncher(t), progress: func(s string) { t.Log(s) }}
	steps, err := runScaleBench(context.Background(), o, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 {
		t.Fatalf("%d steps, want 3", len(steps))
	}
	for _, s := range steps {
		if s.TPS <= 0 || s.Failed != 0 || s.RegisterJSONBytes <= s.RegisterZlibBytes || s.LeaderRSSKiB.Total <= 0 {
			t.Errorf("step %+v", s)
		}
	}
	if steps[1].Topics < 20 || steps[2].Topics < 10+2 {
		t.Errorf("registered topics %d / %d", steps[1].Topics, steps[2].Topics)
	}
}

// TestBenchRestartSmoke fills a real 3-process group with 32 MiB,
// restarts it after SIGKILL and checks it served again.
func TestBenchRestartSmoke(t *testing.T) {
	skipMeasuringToolUnderRace(t)
	o := &restartBenchOpts{dir: t.TempDir(), fill: 32 << 20, size: 16 << 10, senders: 4, kill: true, rounds: 1, members: 3,
		launch: testLauncher(t), progress: func(s string) { t.Log(s) }}
	rounds, err := runRestartBench(context.Background(), o, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r := rounds[0]
	if r.CommitLogBytes < 32<<20 || r.FirstSendMs <= 0 || r.FirstOldPullMs <= 0 || r.ReadyzLastMs <= 0 {
		t.Fatalf("round %+v", r)
	}
}

// TestBenchRestartSmallFillSmoke restarts (SIGTERM) a one-member group
// filled to less than one preallocated CommitLog segment: the segment
// file alone reaches --fill, yet the old-offset probe still needs its
// message.
func TestBenchRestartSmallFillSmoke(t *testing.T) {
	skipMeasuringToolUnderRace(t)
	o := &restartBenchOpts{dir: t.TempDir(), fill: 1 << 20, size: 64 << 10, senders: 32, rounds: 1, members: 1,
		launch: testLauncher(t), progress: func(s string) { t.Log(s) }}
	rounds, err := runRestartBench(context.Background(), o, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if r := rounds[0]; r.FirstSendMs <= 0 || r.FirstOldPullMs <= 0 || r.StopMs <= 0 {
		t.Fatalf("round %+v", r)
	}
}

// skipMeasuringToolUnderRace skips a real-process smoke test of a
// measuring tool under -race: instrumenting its processes doubles its time
// in the README's test command and covers nothing its unit tests miss.
// .ci/run runs these tests once more without -race (-run 'Smoke$').
func skipMeasuringToolUnderRace(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("a measuring tool's real-process smoke test; runs in the non-race pass of .ci/run")
	}
}
