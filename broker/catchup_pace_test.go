package broker

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// paceFeed drives a paceController on a fake clock, one whole window at
// a time.
type paceFeed struct {
	p   *paceController
	now time.Time
}

func newPaceFeed(maxRate, floor int64) *paceFeed {
	f := &paceFeed{p: &paceController{}, now: time.Unix(1_700_000_000, 0)}
	f.p.configure(maxRate, floor, true)
	f.p.current(f.now) // the first window starts now
	return f
}

// window answers sends of the given latencies spread over the rest of the
// current window, with catch-up reads served throughout or not, closes it
// and returns the pace advertised then.
func (f *paceFeed) window(lats []time.Duration, serving bool) int64 {
	end := f.p.winStart.Add(paceWindow)
	step := end.Sub(f.now) / time.Duration(len(lats)+1)
	for _, d := range lats {
		f.now = f.now.Add(step)
		f.p.observeAt(f.now, d)
		if serving {
			f.p.served(f.now)
		}
	}
	f.now = end
	if serving {
		return f.p.served(f.now)
	}
	return f.p.current(f.now)
}

// same is n sends of latency d.
func same(n int, d time.Duration) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

// TestPaceControllerAIMD: the leader learns its p99 without catch-up,
// then while serving one raises the pace while producers' p99 stays near
// it, halves it when the p99 rises above 1.5× it, never below the floor
// nor above the maximum, and recovers once the latency is back.
func TestPaceControllerAIMD(t *testing.T) {
	const maxRate, floor = 64 << 20, 2 << 20
	f := newPaceFeed(maxRate, floor)
	if adv := f.p.current(f.now); adv != 0 {
		t.Fatalf("advertised %d with no catch-up served", adv)
	}
	for i := 0; i < 10; i++ {
		f.window(same(200, 4*time.Millisecond), false)
	}
	if f.p.baseline != 4*time.Millisecond {
		t.Fatalf("baseline %v, want 4ms", f.p.baseline)
	}

	// A catch-up starts at a quarter of the maximum and, with latency at
	// the baseline, climbs to the maximum and stays there.
	if adv := f.p.served(f.now); adv != maxRate/4 {
		t.Fatalf("first pace %d, want %d", adv, maxRate/4)
	}
	prev := int64(0)
	for i := 0; i < 20; i++ {
		adv := f.window(same(200, 4*time.Millisecond), true)
		if adv < prev || adv > maxRate {
			t.Fatalf("window %d: pace %d after %d (max %d)", i, adv, prev, maxRate)
		}
		prev = adv
	}
	if prev != maxRate {
		t.Fatalf("pace %d at baseline latency, want the maximum %d", prev, maxRate)
	}

	// Latency at 3× the baseline: the pace halves each window down to the
	// floor and stays there.
	for i := 0; i < 10; i++ {
		adv := f.window(same(200, 12*time.Millisecond), true)
		want := max(int64(floor), prev/2)
		if adv != want {
			t.Fatalf("high latency window %d: pace %d, want %d", i, adv, want)
		}
		prev = adv
	}
	if prev != floor {
		t.Fatalf("pace %d, want the floor %d", prev, floor)
	}
	// The p99 counts, not the mean: 2% slow sends are enough to back off.
	before := f.window(same(200, 4*time.Millisecond), true)
	if adv := f.window(append(same(196, 4*time.Millisecond), same(4, 20*time.Millisecond)...), true); adv != max(int64(floor), before/2) {
		t.Fatalf("after a window with a slow p99: pace %d, want %d", adv, max(int64(floor), before/2))
	}

	// Between 1.2× and 1.5× the pace holds.
	hold := f.window(same(200, 4*time.Millisecond), true)
	if adv := f.window(same(200, 5400*time.Microsecond), true); adv != hold {
		t.Fatalf("latency 1.35× baseline: pace %d, want it held at %d", adv, hold)
	}

	// Back at the baseline it recovers additively to the maximum.
	for i := 0; i < 20; i++ {
		prev = f.window(same(200, 4*time.Millisecond), true)
	}
	if prev != maxRate {
		t.Fatalf("recovered pace %d, want %d", prev, maxRate)
	}

	// Windows with too few sends are no evidence against the catch-up.
	for i := 0; i < 5; i++ {
		f.window(same(200, 40*time.Millisecond), true)
	}
	low := f.window(same(3, 400*time.Millisecond), true)
	if next := f.window(same(3, 400*time.Millisecond), true); next <= low {
		t.Fatalf("quiet windows: pace %d after %d, want it rising", next, low)
	}

	// The baseline was not learned from windows with a catch-up served.
	if f.p.baseline != 4*time.Millisecond {
		t.Fatalf("baseline %v after serving, want 4ms", f.p.baseline)
	}
	// Serving stops: nothing is advertised; the next catch-up starts low.
	f.now = f.now.Add(paceServing)
	if adv := f.p.current(f.now); adv != 0 {
		t.Fatalf("advertised %d after serving stopped", adv)
	}
	if adv := f.p.served(f.now); adv != maxRate/4 {
		t.Fatalf("next catch-up starts at %d, want %d", adv, maxRate/4)
	}
}

// TestPaceControllerNoBaseline: a leader that never saw a window without
// catch-up (elected during one) measures against its quietest serving
// window.
func TestPaceControllerNoBaseline(t *testing.T) {
	const maxRate, floor = 64 << 20, 4 << 20
	f := newPaceFeed(maxRate, floor)
	f.p.served(f.now)
	for i := 0; i < 3; i++ {
		f.window(same(100, 3*time.Millisecond), true)
	}
	got := f.window(same(100, 3*time.Millisecond), true)
	if adv := f.window(same(100, 9*time.Millisecond), true); adv != max(int64(floor), got/2) {
		t.Fatalf("pace %d after latency tripled, want %d", adv, max(int64(floor), got/2))
	}
}

// TestPaceControllerBusyWindow: a window with more sends than it keeps
// samples of, answered in batches that share one answer time (as the
// batcher reports them), still shows a latency rise in its last quarter.
func TestPaceControllerBusyWindow(t *testing.T) {
	const maxRate, floor = 64 << 20, 2 << 20
	f := newPaceFeed(maxRate, floor)
	for i := 0; i < 3; i++ {
		f.window(same(100, time.Millisecond), false)
	}
	start := f.p.served(f.now)
	const batches, batch = 2 * paceSamples / 64, 64
	step := paceWindow / (batches + 1)
	for i := 0; i < batches; i++ {
		f.now = f.now.Add(step)
		d := time.Millisecond
		if i >= batches*3/4 {
			d = 10 * time.Millisecond
		}
		for j := 0; j < batch; j++ {
			f.p.observeAt(f.now, d)
		}
		f.p.served(f.now)
	}
	f.now = f.p.winStart.Add(paceWindow)
	if adv := f.p.served(f.now); adv != max(int64(floor), start/2) {
		t.Fatalf("pace %d after a window whose last quarter was 10x slower, want %d (halved from %d)", adv, max(int64(floor), start/2), start)
	}
}

// TestPaceControllerOff: with the adaptive pace off the leader advertises
// nothing and fetchers keep their maximum.
func TestPaceControllerOff(t *testing.T) {
	p := &paceController{}
	p.configure(64<<20, 2<<20, false)
	now := time.Now()
	p.observeAt(now, time.Second)
	if adv := p.served(now); adv != 0 {
		t.Fatalf("advertised %d with the adaptive pace off", adv)
	}
	if adv := (&paceController{}).served(now); adv != 0 {
		t.Fatalf("an unconfigured controller advertised %d", adv)
	}
}

// fixedPaceSource advertises a fixed pace.
type fixedPaceSource struct {
	catchupSource
	adv int64
}

func (s fixedPaceSource) pace(context.Context) (int64, error) { return s.adv, nil }

// TestFetchPaceFollowsLeader: a fetcher takes the leader's pace but never
// more than its own maximum, and reports it in its status.
func TestFetchPaceFollowsLeader(t *testing.T) {
	g := &Group{}
	g.cfg.CatchupBytesPerSecond = 32 << 20
	for _, c := range []struct{ adv, want int64 }{{8 << 20, 8 << 20}, {128 << 20, 32 << 20}, {0, 32 << 20}} {
		f := g.newFetchPace(context.Background(), fixedPaceSource{adv: c.adv})
		if f.p.rate != float64(c.want) || g.catchup.st.PaceBytesPerSecond != c.want {
			t.Fatalf("leader advertises %d: pacer %v, status %d, want %d", c.adv, f.p.rate, g.catchup.st.PaceBytesPerSecond, c.want)
		}
	}
}

// paceReader is a catchup reader that only advertises a pace.
type paceReader struct {
	noCatchupPeer
	adv int64
}

func (r paceReader) catchupPace() int64 { return r.adv }

// TestCatchupReadPaceOp: CATCHUP_READ op "pace" answers the leader's pace
// in the header (and, like every answer, a CRC of the empty body).
func TestCatchupReadPaceOp(t *testing.T) {
	resp := serveCatchupRead(paceReader{adv: 12 << 20}, remoting.NewRequest(remoting.RequestCatchupRead,
		&wire.CatchupReadRequestHeader{Op: "pace"}, nil))
	var rh wire.CatchupReadResponseHeader
	if err := resp.DecodeHeader(&rh); err != nil || resp.Code != remoting.ResponseSuccess || rh.Pace != 12<<20 {
		t.Fatalf("pace op: code %d %q, pace %d, %v", resp.Code, resp.Remark, rh.Pace, err)
	}
}
