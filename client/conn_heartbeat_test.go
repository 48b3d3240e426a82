package client

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestConnHeartbeatsOwnDialWantsNoOther: a new connection to a member
// gets that member one heartbeat, and the heartbeat's own dial (the
// connection having closed in between) gets none of its own: a broker
// closing every connection would otherwise be heartbeaten without end.
// Nor does the dial of a heartbeat sent otherwise (the interval's). A
// round a member took ends with took; a connection to an address that is
// no member (a name server) gets no heartbeat.
func TestConnHeartbeatsOwnDialWantsNoOther(t *testing.T) {
	var dials atomic.Int32
	member, other := startFakeBroker(t, "b", &requestLog{}).addr, startFakeBroker(t, "ns", &requestLog{}).addr
	rc := remoting.NewClient(remoting.ClientConfig{}, nil)
	t.Cleanup(func() { _ = rc.Close() })
	rc.OnConnOpen(func(context.Context, string) { dials.Add(1) })

	hb := &wire.HeartbeatData{ClientID: "c", ProducerDataSet: []wire.HeartbeatProducerData{}, ConsumerDataSet: []wire.HeartbeatConsumerData{}}
	sent := make(chan string, 4)
	proceed, triggered := make(chan struct{}), make(chan struct{})
	var tookN atomic.Int32
	h := newConnHeartbeats(func() []brokerMember { return []brokerMember{{"b", member}} }, func(ctx context.Context, b brokerMember) error {
		<-triggered
		rc.CloseConn(b.addr) // the new connection closed before the heartbeat went out
		err := sendHeartbeat(ctx, rc, b.name, b.addr, hb)
		sent <- b.addr
		<-proceed
		return err
	}, func() { tookN.Add(1) })
	rc.OnConnOpen(h.connOpened)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.run(ctx) }()
	// The heartbeat waits for the calls that dialed (the listener runs
	// before they are written), then for the checks below.
	trigger, release := sync.OnceFunc(func() { close(triggered) }), sync.OnceFunc(func() { close(proceed) })
	defer func() { trigger(); release(); cancel(); wg.Wait() }()

	for _, addr := range []string{other, member} {
		if _, err := invokeOK(context.Background(), rc, "b", addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	trigger()
	if got := <-sent; got != member {
		t.Fatalf("heartbeat on a new connection to %s, want %s", got, member)
	}
	if n := dials.Load(); n != 3 {
		t.Fatalf("%d dials, want 3 (the other address, the member, the heartbeat's own)", n)
	}
	pending := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.opened)
	}
	if n := pending(); n != 0 {
		t.Fatalf("the heartbeat's own dial left %d addresses to heartbeat", n)
	}
	release()
	testutil.WaitFor(t, 5*time.Second, "took after the member took the heartbeat", func() bool { return tookN.Load() == 1 })

	// The listener runs before the dialing call is written.
	rc.CloseConn(member)
	if err := sendHeartbeat(context.Background(), rc, "b", member, hb); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 4 {
		t.Fatalf("%d dials, want 4", n)
	}
	if n := pending(); n != 0 {
		t.Fatalf("an interval heartbeat's dial left %d addresses to heartbeat", n)
	}
}

// TestConnHeartbeatsConnOpenedDuringHeartbeat: a connection another call
// opens to a member while a heartbeat to that member is in flight (the
// connection the heartbeat was to go on having closed) gets a heartbeat
// of its own: the broker dropped the client with the closed connection,
// and the heartbeat in flight may have gone on it.
func TestConnHeartbeatsConnOpenedDuringHeartbeat(t *testing.T) {
	member := startFakeBroker(t, "b", &requestLog{}).addr
	rc := remoting.NewClient(remoting.ClientConfig{}, nil)
	t.Cleanup(func() { _ = rc.Close() })

	hb := &wire.HeartbeatData{ClientID: "c", ProducerDataSet: []wire.HeartbeatProducerData{}, ConsumerDataSet: []wire.HeartbeatConsumerData{}}
	var sends atomic.Int32
	inFlight, release := make(chan struct{}), make(chan struct{})
	h := newConnHeartbeats(func() []brokerMember { return []brokerMember{{"b", member}} }, func(ctx context.Context, b brokerMember) error {
		if sends.Add(1) == 1 {
			close(inFlight)
			<-release
		}
		return sendHeartbeat(ctx, rc, b.name, b.addr, hb)
	}, nil)
	rc.OnConnOpen(h.connOpened)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.run(ctx) }()
	unblock := sync.OnceFunc(func() { close(release) })
	defer func() { unblock(); cancel(); wg.Wait() }()

	call := func() {
		t.Helper()
		if _, err := rc.InvokeSync(context.Background(), member, remoting.NewRequest(remoting.RequestSendMessage, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	call()
	<-inFlight
	rc.CloseConn(member)
	call()
	unblock()
	testutil.WaitFor(t, 5*time.Second, "a heartbeat for the connection opened while one was in flight", func() bool { return sends.Load() == 2 })
}
