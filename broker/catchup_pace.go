package broker

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// The adaptive catch-up pace: the leader serving a catch-up yields to the
// producers it answers.
//
// The leader times every send request it answers (arrival to answer, the
// latency its producers see, batcher.go) and keeps the p99 of each
// half-second window. While it serves no catch-up it learns the baseline
// (an average of those p99s); while it serves one (a CATCHUP_READ in the
// last two seconds) it steers the pace the fetching members use, AIMD
// style: a window p99 above paceBackoff × baseline halves the pace, one
// within paceNear × baseline (or a window with too few sends to matter)
// raises it by a sixteenth of the maximum, between the floor
// (raftCatchupMinBytesPerSecond, so a catch-up always ends) and the
// maximum (raftCatchupBytesPerSecond). The fetcher (catchup.go) asks for
// the pace every paceSync (CATCHUP_READ op "pace") and sets its one pacer
// to it, in every phase: the log fetch, the queue units, the index. The
// log chunks stay 1 MiB at any pace: each is one durable write on the
// member, and smaller chunks only add syncs (ADR 0021). With
// raftCatchupAdaptive=false the leader advertises no pace and fetchers
// keep their configured maximum.

const (
	// paceWindow is how long one latency window lasts.
	paceWindow = 500 * time.Millisecond
	// paceServing is how long after a CATCHUP_READ the leader counts as
	// serving a catch-up.
	paceServing = 2 * time.Second
	// paceBackoff and paceNear are multiples of the baseline p99: above
	// the first the pace halves, within the second it grows.
	paceBackoff = 1.5
	paceNear    = 1.2
	// paceMinSends is the fewest sends a window needs to count as
	// evidence; a quieter window has nothing to protect.
	paceMinSends = 20
	// paceSamples bounds the latencies one window keeps.
	paceSamples = 8192
	// paceSync is how often a fetcher asks the leader for the pace.
	paceSync = 250 * time.Millisecond
)

// paceController is the leader's AIMD controller. Zero value: not
// configured (observes nothing, advertises no pace).
type paceController struct {
	mu         sync.Mutex
	on         bool
	max, floor float64
	rate       float64 // current pace, bytes per second
	winStart   time.Time
	win        []time.Duration // a uniform sample of the window's latencies
	seen       int             // latencies observed in the window
	baseline   time.Duration   // average p99 of windows without catch-up
	low        time.Duration   // lowest p99 of a serving window (baseline unknown)
	lastP99    time.Duration   // the last closed window's p99
	lastServed time.Time
}

// configure sets the limits; adaptive false leaves the controller off.
func (p *paceController) configure(maxRate, floor int64, adaptive bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = adaptive && maxRate > 0
	p.max = float64(maxRate)
	p.floor = float64(min(max(floor, 1), maxRate))
	p.rate = p.start()
}

// start is the pace a catch-up starts at: a quarter of the maximum, so
// the first windows probe upwards instead of starting at full speed.
func (p *paceController) start() float64 { return max(p.floor, p.max/4) }

// observeAt records one answered send's latency d, answered at now.
func (p *paceController) observeAt(now time.Time, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	p.tick(now)
	// Reservoir sampling: past paceSamples every latency of the window
	// still has the same chance to be kept, so a rise late in a busy
	// window shows in its p99.
	p.seen++
	if len(p.win) < paceSamples {
		p.win = append(p.win, d)
	} else if j := rand.IntN(p.seen); j < paceSamples {
		p.win[j] = d
	}
}

// served notes a catch-up read and returns the pace to advertise (0: no
// opinion; the fetcher keeps its own maximum).
func (p *paceController) served(now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return 0
	}
	p.tick(now)
	if now.Sub(p.lastServed) >= paceServing {
		// A new catch-up: it starts low and probes upwards.
		p.rate, p.low = p.start(), 0
	}
	p.lastServed = now
	return int64(p.rate)
}

// current returns the pace while a catch-up is served, else 0.
func (p *paceController) current(now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return 0
	}
	p.tick(now)
	if now.Sub(p.lastServed) >= paceServing {
		return 0
	}
	return int64(p.rate)
}

// tick closes the window when it is over (mu held).
func (p *paceController) tick(now time.Time) {
	if p.winStart.IsZero() {
		p.winStart = now
		return
	}
	if now.Sub(p.winStart) < paceWindow {
		return
	}
	n := len(p.win)
	var p99 time.Duration
	if n > 0 {
		slices.Sort(p.win)
		p99 = p.win[min(n-1, n*99/100)]
	}
	p.win, p.seen, p.winStart = p.win[:0], 0, now
	serving := now.Sub(p.lastServed) < paceServing
	if !serving {
		if n >= paceMinSends {
			if p.baseline == 0 {
				p.baseline = p99
			} else {
				p.baseline = (3*p.baseline + p99) / 4
			}
		}
		p.lastP99 = p99
		return
	}
	p.lastP99 = p99
	if n < paceMinSends {
		p.rate = min(p.max, p.rate+p.max/16)
		return
	}
	ref := p.baseline
	if ref == 0 {
		// No window without catch-up seen yet (a leader elected during
		// one): the quietest serving window stands in.
		if p.low == 0 || p99 < p.low {
			p.low = p99
		}
		ref = p.low
	}
	switch {
	case float64(p99) > paceBackoff*float64(ref):
		p.rate = max(p.floor, p.rate/2)
	case float64(p99) <= paceNear*float64(ref):
		p.rate = min(p.max, p.rate+p.max/16)
	}
}

// catchupLatencyHook configures this member's pace controller and returns
// the function the batcher reports answered sends to (nil when the pace
// does not adapt: the send path then pays nothing).
func (g *Group) catchupLatencyHook() func(time.Time, time.Duration) {
	g.catchup.pace.configure(g.cfg.CatchupBytesPerSecond, g.cfg.CatchupMinBytesPerSecond, g.cfg.CatchupAdaptive)
	if !g.catchup.pace.on {
		return nil
	}
	return g.catchup.pace.observeAt
}

// catchupPace is CATCHUP_READ op "pace": the pace this leader wants
// catch-ups fetched at now (0: no opinion).
func (g *Group) catchupPace() int64 { return g.catchup.pace.served(time.Now()) }

// fetchPace keeps a fetcher's pacer at the leader's advertised pace,
// asking at most every paceSync; it never exceeds this member's maximum.
type fetchPace struct {
	p     *pacer
	src   catchupSource
	max   int64
	asked time.Time
	state *catchupState
}

func (g *Group) newFetchPace(ctx context.Context, src catchupSource) *fetchPace {
	f := &fetchPace{p: newPacer(g.cfg.CatchupBytesPerSecond), src: src, max: g.cfg.CatchupBytesPerSecond, state: &g.catchup}
	f.sync(ctx, time.Now())
	return f
}

// wait paces n bytes, first updating the rate when it is time to ask.
func (f *fetchPace) wait(ctx context.Context, n int) error {
	if now := time.Now(); now.Sub(f.asked) >= paceSync {
		f.sync(ctx, now)
	}
	return f.p.wait(ctx, n)
}

func (f *fetchPace) sync(ctx context.Context, now time.Time) {
	f.asked = now
	rate := f.max
	if adv, err := f.src.pace(ctx); err == nil && adv > 0 && (rate <= 0 || adv < rate) {
		rate = adv
	}
	f.p.setRate(rate, now)
	f.state.update(func(s *CatchupStatus) { s.PaceBytesPerSecond = rate })
}
