package main

import (
	"context"
	"math/rand/v2"
	"time"
)

// benchPacer spaces one worker's sends so that all workers together send
// at most --rate messages per second: worker k sends its n-th message no
// earlier than start + n·workers/rate. The schedule is open-loop (a late
// send does not move the next one), so a worker that fell behind catches
// up at once and the offered load stays the rate, as long as the workers
// can keep it.
type benchPacer struct {
	every time.Duration
	next  time.Time
}

// newBenchPacer returns nil (no pacing) when rate is 0.
func newBenchPacer(rate float64, workers int) *benchPacer {
	if rate <= 0 {
		return nil
	}
	every := time.Duration(float64(max(workers, 1)) / rate * float64(time.Second))
	// Workers start spread over one interval, not all at once.
	return &benchPacer{every: every, next: time.Now().Add(time.Duration(float64(every) * rand.Float64()))}
}

// wait blocks until the worker's next send is due; false when ctx ended.
func (p *benchPacer) wait(ctx context.Context) bool {
	if p == nil {
		return true
	}
	d := time.Until(p.next)
	p.next = p.next.Add(p.every)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
