package client

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestLatencyFaultTable(t *testing.T) {
	f := newLatencyFault(time.Now, defaultLatencyMax, defaultNotAvailableDuration)
	for lat, want := range map[time.Duration]time.Duration{
		0: 0, 49 * time.Millisecond: 0, 100 * time.Millisecond: 0, 549 * time.Millisecond: 0,
		550 * time.Millisecond: 30 * time.Second, 999 * time.Millisecond: 30 * time.Second,
		time.Second: 60 * time.Second, 2500 * time.Millisecond: 120 * time.Second,
		3 * time.Second: 180 * time.Second, 15 * time.Second: 600 * time.Second, time.Hour: 600 * time.Second,
	} {
		if got := f.notAvailableFor(lat); got != want {
			t.Errorf("latency %v: %v, want %v", lat, got, want)
		}
	}
}

func TestLatencyFaultWindows(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	f := newLatencyFault(clk.now, defaultLatencyMax, defaultNotAvailableDuration)
	f.update("a", 10*time.Millisecond, false)
	if !f.available("a") || !f.available("never-seen") {
		t.Fatal("fast broker isolated")
	}
	f.update("a", 10*time.Millisecond, true) // a failure: 30 s charged → 600 s
	if f.available("a") {
		t.Fatal("failed broker still available")
	}
	f.update("a", 0, false) // a fast send does not shorten the window
	clk.advance(599 * time.Second)
	if f.available("a") {
		t.Fatal("window shrank")
	}
	clk.advance(time.Second)
	if !f.available("a") {
		t.Fatal("window did not end")
	}
	f.update("b", 700*time.Millisecond, false)
	clk.advance(29 * time.Second)
	if f.available("b") {
		t.Fatal("slow broker available before 30 s")
	}
	f.remove("b")
	if !f.available("b") {
		t.Fatal("remove did not lift isolation")
	}
}

// TestProducerSkipsIsolatedBroker: with fault tolerance on, a broker that
// failed once is skipped by later sends until its window passes; with it
// off, the next send may use it again.
func TestProducerSkipsIsolatedBroker(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
		ns := startNameServer(t)
		log := &requestLog{}
		a := startFakeBroker(t, "broker-a", log)
		b := startFakeBroker(t, "broker-b", log)
		a.register(t, ns, 0, 1, map[string]int{"T": 2})
		b.register(t, ns, 0, 1, map[string]int{"T": 2})
		p := newTestProducer(t, ns, SendLatencyFaultEnable(enabled), WithClock(clk.now),
			SendLatencyFaultTables([]time.Duration{0, 550 * time.Millisecond}, []time.Duration{0, 10 * time.Second}))
		// Make broker-a fail once, then send until that happened.
		var failed atomic.Bool
		a.setAnswer(func(fb *fakeBroker, conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
			if failed.CompareAndSwap(false, true) {
				return answerCode(remoting.ResponseSystemBusy, nil)(fb, conn, req)
			}
			return fb.stored(req)
		})
		for i := 0; !failed.Load(); i++ {
			if i == 8 {
				t.Fatal("8 sends never reached broker-a")
			}
			if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); err != nil {
				t.Fatal(err)
			}
		}
		before := len(log.all())
		usedA := false
		for i := 0; i < 8; i++ {
			res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
			if err != nil {
				t.Fatal(err)
			}
			usedA = usedA || res.Queue.BrokerName == "broker-a"
		}
		if enabled && usedA {
			t.Fatalf("isolated broker-a was chosen: %+v", log.all()[before:])
		}
		if !enabled && !usedA {
			t.Fatal("without fault tolerance broker-a should be back in rotation")
		}
		if enabled {
			clk.advance(11 * time.Second)
			usedA = false
			for i := 0; i < 4; i++ {
				res, _ := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
				usedA = usedA || (res != nil && res.Queue.BrokerName == "broker-a")
			}
			if !usedA {
				t.Fatal("broker-a not used after its window")
			}
		}
	}
}

// TestStalledGroupDoesNotStarveHealthyGroup: with two broker groups, one whose leader stops answering (SIGSTOP keeps
// its connection open, so every attempt there ends by AttemptTimeout),
// closed-loop senders must move to the healthy group instead of paying an
// attempt timeout on every other send. Latency fault tolerance is off (the
// default).
func TestStalledGroupDoesNotStarveHealthyGroup(t *testing.T) {
	t.Parallel()
	a, _, log, p := twoGroupsOf(t, 4, AttemptTimeout(500*time.Millisecond), SendTimeout(5*time.Second))
	// broker-a takes requests and never answers.
	a.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand { return nil })

	const workers, want = 8, 400
	ctx, cancel := context.WithCancel(context.Background())
	var acked, onA atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && acked.Load() < want {
				res, err := p.SendSync(ctx, NewMessage("T", []byte("x")))
				if err != nil {
					continue
				}
				acked.Add(1)
				if res.Queue.BrokerName == "broker-a" {
					onA.Add(1)
				}
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	start := time.Now()
	// Without avoidance every worker pays 500 ms on broker-a about every
	// second send: ~16 acks/s, so 400 would take ~25 s.
	testutil.WaitFor(t, 10*time.Second, "400 sends acknowledged while broker-a is stalled", func() bool { return acked.Load() >= want })
	took := time.Since(start)
	cancel()
	wg.Wait()
	if onA.Load() != 0 {
		t.Fatalf("%d sends acknowledged by the stalled broker-a", onA.Load())
	}
	toA := 0
	for _, r := range log.all() {
		if r.brokerN == "broker-a" && r.code != remoting.RequestHeartBeat {
			toA++
		}
	}
	// Each worker may hit broker-a before the first timeout marks it.
	if toA > 2*workers {
		t.Fatalf("%d requests reached the stalled broker-a; want at most %d", toA, 2*workers)
	}
	t.Logf("%d acks in %v, %d requests to the stalled group", acked.Load(), took, toA)
}
