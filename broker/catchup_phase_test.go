package broker

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// phaseClock records when a member replacement moves from one phase to the
// next, so that producer latencies can be told apart by phase: which part
// of the added p99 a catch-up pace controls and which it cannot.
type phaseClock struct {
	mu    sync.Mutex
	marks []phaseMark
	paces map[string][]int64 // catch-up pace seen per phase
}

type phaseMark struct {
	name string
	at   time.Time
}

// mark starts phase name now (a repeat of the current phase is ignored).
func (p *phaseClock) mark(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.marks); n > 0 && p.marks[n-1].name == name {
		return
	}
	p.marks = append(p.marks, phaseMark{name, time.Now()})
}

// watchCatchup marks g's catch-up phases ("catch-up log", "catch-up
// queues", "catch-up index") as it enters them, and "learner live" once its
// catch-up completed, until then or until stop closes.
func (p *phaseClock) watchCatchup(g func() *Group, stop <-chan struct{}) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		m := g()
		if m == nil {
			continue
		}
		if m.catchup.completed.Load() > 0 {
			p.mark("learner live")
			return
		}
		if cs := m.CatchupStatus(); cs.Phase != "" {
			p.mark("catch-up " + cs.Phase)
			p.mu.Lock()
			if p.paces == nil {
				p.paces = map[string][]int64{}
			}
			p.paces["catch-up "+cs.Phase] = append(p.paces["catch-up "+cs.Phase], cs.PaceBytesPerSecond)
			p.mu.Unlock()
		}
	}
}

// phaseOf returns the phase that was current at t ("" before the first;
// mu held).
func (p *phaseClock) phaseOf(t time.Time) string {
	name := ""
	for _, m := range p.marks {
		if m.at.After(t) {
			break
		}
		name = m.name
	}
	return name
}

// report logs, per phase in order, how long it lasted, how many sends
// began in it and their p50/p99, with the p99 as a multiple of base's.
func (p *phaseClock) report(t *testing.T, base []time.Duration, lat []time.Duration, at []time.Time, end time.Time) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	by := map[string][]time.Duration{}
	for i := range lat {
		ph := p.phaseOf(at[i])
		by[ph] = append(by[ph], lat[i])
	}
	ref := pct(base, 99)
	t.Logf("%-22s %8s %7s %9s %9s %6s  %s", "phase", "lasted", "sends", "p50", "p99", "p99/before", "pace MiB/s min/median/max")
	t.Logf("%-22s %8s %7d %9v %9v %6.2f", "before", "", len(base), pct(base, 50), ref, 1.0)
	marks := p.marks
	for i, m := range marks {
		stop := end
		if i+1 < len(marks) {
			stop = marks[i+1].at
		}
		ds := by[m.name]
		ratio := 0.0
		if ref > 0 {
			ratio = float64(pct(ds, 99)) / float64(ref)
		}
		paces := ""
		if ps := slices.Clone(p.paces[m.name]); len(ps) > 0 {
			slices.Sort(ps)
			paces = fmt.Sprintf("%.1f / %.1f / %.1f", float64(ps[0])/(1<<20), float64(ps[len(ps)/2])/(1<<20), float64(ps[len(ps)-1])/(1<<20))
		}
		t.Logf("%-22s %8v %7d %9v %9v %6.2f  %s", m.name, stop.Sub(m.at).Round(10*time.Millisecond), len(ds),
			pct(ds, 50), pct(ds, 99), ratio, paces)
		if stop.Sub(m.at) > 3*phaseSlice {
			// Long phases by slice: whether their cost is spread, comes at
			// their start (the learner's Raft replication of the entries
			// after its snapshot runs then, unpaced) or in episodes.
			for from := m.at; from.Before(stop); from = from.Add(phaseSlice) {
				to := from.Add(phaseSlice)
				if to.After(stop) {
					to = stop
				}
				ds := within(lat, at, from, to)
				t.Logf("%-22s %8s %7d %9v %9v %6.2f", "  +"+from.Sub(m.at).Round(time.Second).String(), "", len(ds),
					pct(ds, 50), pct(ds, 99), float64(pct(ds, 99))/float64(max(ref, 1)))
			}
		}
	}
}

// phaseSlice is the slice long phases are also reported by.
const phaseSlice = 5 * time.Second

// within returns the latencies of sends that began in [from, to).
func within(lat []time.Duration, at []time.Time, from, to time.Time) []time.Duration {
	var out []time.Duration
	for i := range lat {
		if !at[i].Before(from) && at[i].Before(to) {
			out = append(out, lat[i])
		}
	}
	return out
}
