package client

import (
	"fmt"
	"sync"
	"time"
)

// Default latency tables of RocketMQ 4.x's MQFaultStrategy: a send that
// took at least latencyMax[i] makes its broker unavailable for
// notAvailableDuration[i]. Sends under 550 ms never isolate a broker.
var (
	defaultLatencyMax = []time.Duration{
		50 * time.Millisecond, 100 * time.Millisecond, 550 * time.Millisecond,
		time.Second, 2 * time.Second, 3 * time.Second, 15 * time.Second,
	}
	defaultNotAvailableDuration = []time.Duration{
		0, 0, 30 * time.Second, 60 * time.Second, 120 * time.Second, 180 * time.Second, 600 * time.Second,
	}
)

// isolationLatency is the latency charged to a broker whose send failed
// with a transport error or an error answer (RocketMQ 4.x charges 30 s,
// which the default table turns into 10 minutes of isolation).
const isolationLatency = 30 * time.Second

// latencyFault is RocketMQ's LatencyFaultTolerance: per brokerName, the
// time before which it should not be chosen. Time comes from the injected
// clock so tests can move it.
type latencyFault struct {
	now          func() time.Time
	latencyMax   []time.Duration
	notAvailable []time.Duration

	mu    sync.Mutex
	items map[string]*faultItem // guarded by mu
}

type faultItem struct {
	latency        time.Duration
	availableAfter time.Time
	// unresponsiveUntil is set by a request that timed out (see stalled);
	// it is honoured whether or not latency fault tolerance is enabled.
	unresponsiveUntil time.Time
}

// stallAvoidance is how long a brokerName whose request timed out is left
// out of the send rotation (all groups but one being avoided, the rotation
// goes on as before). A stalled leader — SIGSTOP, a long GC or I/O pause —
// keeps its connection open and answers nothing, so each send that picks
// it costs a whole AttemptTimeout; without this mark closed-loop senders
// keep landing on it about every other send and starve the healthy groups.
// A new leader in the route lifts the mark at once
// (remove); otherwise it is a few election timeouts, after which one send
// probes the group again.
const stallAvoidance = 3 * time.Second

func newLatencyFault(now func() time.Time, latencyMax, notAvailable []time.Duration) *latencyFault {
	return &latencyFault{now: now, latencyMax: latencyMax, notAvailable: notAvailable, items: map[string]*faultItem{}}
}

// validateLatencyTables checks what SendLatencyFaultTables accepts.
func validateLatencyTables(latencyMax, notAvailable []time.Duration) error {
	if len(latencyMax) == 0 || len(latencyMax) != len(notAvailable) {
		return fmt.Errorf("%w: SendLatencyFaultTables: %d latency steps and %d durations; want the same non-zero count",
			ErrInvalidOption, len(latencyMax), len(notAvailable))
	}
	for i := range latencyMax {
		if latencyMax[i] < 0 || notAvailable[i] < 0 || (i > 0 && latencyMax[i] <= latencyMax[i-1]) {
			return fmt.Errorf("%w: SendLatencyFaultTables: steps must be non-negative and increasing, got %v / %v",
				ErrInvalidOption, latencyMax, notAvailable)
		}
	}
	return nil
}

// notAvailableFor maps a latency to its isolation
// (MQFaultStrategy.computeNotAvailableDuration): the duration of the
// highest step the latency reaches.
func (f *latencyFault) notAvailableFor(latency time.Duration) time.Duration {
	for i := len(f.latencyMax) - 1; i >= 0; i-- {
		if latency >= f.latencyMax[i] {
			return f.notAvailable[i]
		}
	}
	return 0
}

// update records one send to brokerName that took latency; isolation
// charges isolationLatency instead (a failed send). An isolation window
// only ever grows (FaultItem.updateNotAvailableDuration).
func (f *latencyFault) update(brokerName string, latency time.Duration, isolation bool) {
	d := latency
	if isolation {
		d = isolationLatency
	}
	dur := f.notAvailableFor(d)
	var now time.Time
	if dur > 0 { // the usual fast answer reads no clock
		now = f.now()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	it := f.items[brokerName]
	if it == nil {
		it = &faultItem{}
		f.items[brokerName] = it
	}
	it.latency = latency
	if until := now.Add(dur); dur > 0 && until.After(it.availableAfter) {
		it.availableAfter = until
	}
}

// available reports whether brokerName may be chosen now.
func (f *latencyFault) available(brokerName string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	it := f.items[brokerName]
	return it == nil || it.availableAfter.IsZero() || !f.now().Before(it.availableAfter)
}

// stalled records that a request to brokerName got no answer within its
// deadline: the group is avoided for stallAvoidance.
func (f *latencyFault) stalled(brokerName string) {
	until := f.now().Add(stallAvoidance)
	f.mu.Lock()
	defer f.mu.Unlock()
	it := f.items[brokerName]
	if it == nil {
		it = &faultItem{}
		f.items[brokerName] = it
	}
	if until.After(it.unresponsiveUntil) {
		it.unresponsiveUntil = until
	}
}

// responsive reports whether brokerName has not timed out recently (see
// stalled).
func (f *latencyFault) responsive(brokerName string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	it := f.items[brokerName]
	return it == nil || it.unresponsiveUntil.IsZero() || !f.now().Before(it.unresponsiveUntil)
}

// remove forgets brokerName's record, e.g. when a new leader took over the
// group: the isolation was about the old process.
func (f *latencyFault) remove(brokerName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.items, brokerName)
}
