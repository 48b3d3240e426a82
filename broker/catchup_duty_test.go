package broker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// dutyCycle measures what a catch-up adds to producer latency without
// comparing windows minutes apart (on a shared box the drift between them
// is as large as the effect): during the catch-up's log and queue phases
// it alternately holds the fetch (catchupHoldHook) and lets it run, each
// for d, and compares the sends that began in "on" windows with those in
// "off" windows of the same catch-up.
type dutyCycle struct {
	d       time.Duration
	mu      sync.Mutex
	release chan struct{} // non-nil while the fetch is held
	windows []dutyWindow
}

// dutyWindow is one on or off window and what the pace controllers did in
// it.
type dutyWindow struct {
	on       bool
	from, to time.Time
	paces    []int64       // the fetcher's pace, sampled
	baseline time.Duration // the leader's baseline p99 at the window's end
	rate     int64         // the leader controller's pace at the window's end
	serving  bool          // whether the leader counted a catch-up as served then
	adaptive bool          // whether the leader's controller is on at all
}

// dutySkip is how long after a toggle sends are not attributed: the
// transition belongs to neither state.
const dutySkip = 200 * time.Millisecond

// replaceDuty returns RAFTMQ_REPLACE_DUTY (0: no duty cycle).
func replaceDuty(t *testing.T) time.Duration {
	v := os.Getenv("RAFTMQ_REPLACE_DUTY")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 2*dutySkip {
		t.Fatalf("RAFTMQ_REPLACE_DUTY=%q: want a duration above %v (%v)", v, 2*dutySkip, err)
	}
	return d
}

// hook is the catchupHoldHook: it blocks while the fetch is held.
func (d *dutyCycle) hook(ctx context.Context) bool {
	d.mu.Lock()
	ch := d.release
	d.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
	return true
}

func (d *dutyCycle) hold(held bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case held && d.release == nil:
		d.release = make(chan struct{})
	case !held && d.release != nil:
		close(d.release)
		d.release = nil
	}
}

// run waits for the learner's log phase, then toggles every d, starting
// with an on window, until the learner leaves the log and queue phases
// (or stop closes); it always ends with the fetch released. A window cut
// short by the end is not recorded.
func (d *dutyCycle) run(learner, leader func() *Group, stop <-chan struct{}) {
	defer d.hold(false)
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	phase := func() string {
		if m := learner(); m != nil && m.catchup.completed.Load() == 0 {
			return m.CatchupStatus().Phase
		}
		return ""
	}
	for phase() != "log" {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		if m := learner(); m != nil && m.catchup.completed.Load() > 0 {
			return
		}
	}
	cur := dutyWindow{on: true, from: time.Now()}
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		if ph := phase(); ph != "log" && ph != "queues" {
			return
		}
		if cur.on {
			if m := learner(); m != nil {
				cur.paces = append(cur.paces, m.CatchupStatus().PaceBytesPerSecond)
			}
		}
		if time.Since(cur.from) < d.d {
			continue
		}
		now := time.Now()
		cur.to = now
		if lg := leader(); lg != nil {
			pc := &lg.catchup.pace
			pc.mu.Lock()
			cur.baseline, cur.rate, cur.serving, cur.adaptive = pc.baseline, int64(pc.rate), now.Sub(pc.lastServed) < paceServing, pc.on
			pc.mu.Unlock()
		}
		d.mu.Lock()
		d.windows = append(d.windows, cur)
		d.mu.Unlock()
		cur = dutyWindow{on: !cur.on, from: now}
		d.hold(!cur.on)
	}
}

// report logs each window, the pooled on and off latencies, and the p99
// of each on window over that of its neighbouring off windows.
func (d *dutyCycle) report(t *testing.T, lat []time.Duration, at []time.Time) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	sends := make([][]time.Duration, len(d.windows))
	var on, off []time.Duration
	nOn, nOff := 0, 0
	for i, w := range d.windows {
		sends[i] = within(lat, at, w.from.Add(dutySkip), w.to)
		if w.on {
			on, nOn = append(on, sends[i]...), nOn+1
		} else {
			off, nOff = append(off, sends[i]...), nOff+1
		}
	}
	mib := func(v int64) string { return fmt.Sprintf("%.1f", float64(v)/(1<<20)) }
	t.Logf("duty cycle %v (first %v after each toggle not counted), catch-up log and queue phases:", d.d, dutySkip)
	t.Logf("%4s %4s %7s %9s %9s  %-22s %12s %10s %s", "win", "", "sends", "p50", "p99", "fetch pace MiB/s", "leader base", "leader MiB/s", "serving")
	for i, w := range d.windows {
		state, paces := "off", ""
		if w.on {
			state = "on"
			if ps := slices.Clone(w.paces); len(ps) > 0 {
				slices.Sort(ps)
				paces = mib(ps[0]) + " / " + mib(ps[len(ps)/2]) + " / " + mib(ps[len(ps)-1])
			}
		}
		base, rate, serving := w.baseline.String(), mib(w.rate), fmt.Sprint(w.serving)
		if !w.adaptive {
			base, rate, serving = "-", "-", "-"
		}
		t.Logf("%4d %4s %7d %9v %9v  %-22s %12s %10s %s", i, state, len(sends[i]), pct(sends[i], 50), pct(sends[i], 99),
			paces, base, rate, serving)
	}
	ratio := func(a, b []time.Duration) float64 {
		if pb := pct(b, 99); pb > 0 {
			return float64(pct(a, 99)) / float64(pb)
		}
		return 0
	}
	t.Logf("on:  %d windows, %d sends, p50 %v, p99 %v", nOn, len(on), pct(on, 50), pct(on, 99))
	t.Logf("off: %d windows, %d sends, p50 %v, p99 %v", nOff, len(off), pct(off, 50), pct(off, 99))
	var pairs []float64
	for i, w := range d.windows {
		if !w.on {
			continue
		}
		var nb []time.Duration
		for _, j := range []int{i - 1, i + 1} {
			if j >= 0 && j < len(d.windows) && !d.windows[j].on {
				nb = append(nb, sends[j]...)
			}
		}
		if len(nb) > 0 && len(sends[i]) > 0 {
			pairs = append(pairs, ratio(sends[i], nb))
		}
	}
	slices.Sort(pairs)
	med := 0.0
	if len(pairs) > 0 {
		med = pairs[len(pairs)/2]
	}
	t.Logf("p99 on/off pooled %.2f; per on window over its neighbouring off windows: median %.2f of %d %v",
		ratio(on, off), med, len(pairs), roundAll(pairs))
}

func roundAll(fs []float64) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprintf("%.2f", f)
	}
	return out
}
