package broker

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// TestInmemSnapshotStore: a snapshot is listed only once its sink closed,
// a cancelled one never, the newest comes first and only retain are kept.
func TestInmemSnapshotStore(t *testing.T) {
	s := NewInmemSnapshotStore(2)
	create := func(index uint64) raft.SnapshotSink {
		t.Helper()
		sink, err := s.Create(1, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write([]byte{byte(index)}); err != nil {
			t.Fatal(err)
		}
		return sink
	}
	indexes := func() []uint64 {
		t.Helper()
		l, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, m := range l {
			out = append(out, m.Index)
		}
		return out
	}
	open := create(10)
	if got := indexes(); len(got) != 0 {
		t.Fatalf("snapshot listed before its sink closed: %v", got)
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	if err := create(20).Cancel(); err != nil {
		t.Fatal(err)
	}
	if got := indexes(); len(got) != 1 || got[0] != 10 {
		t.Fatalf("after a cancelled snapshot: %v, want [10]", got)
	}
	for _, i := range []uint64{30, 40} {
		if err := create(i).Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := indexes(); len(got) != 2 || got[0] != 40 || got[1] != 30 {
		t.Fatalf("listed %v, want [40 30] (newest first, retain 2)", got)
	}
	l, _ := s.List()
	meta, rc, err := s.Open(l[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || meta.Index != 40 || meta.Size != 1 || len(b) != 1 || b[0] != 40 {
		t.Fatalf("open: meta %+v, data %v, err %v", meta, b, err)
	}
}

// testNodeConfig is a one-member broker node on in-memory parts and
// loopback remoting. One member has no lease to lose: production's Raft
// timings let it elect itself sooner.
func testNodeConfig(t *testing.T, nsAddr string) BrokerConfig {
	cfg := testBrokerConfig(t, nsAddr, testutil.FreePort(t))
	withProdRaftTimings(&cfg)
	cfg.Store.StorePathRootDir = t.TempDir()
	cfg.Store.MappedFileSizeCommitLog = 2 << 20
	cfg.Store.MappedFileSizeConsumeQueue = 1000 * store.CQUnitSize
	cfg.Store.MaxHashSlotNum, cfg.Store.MaxIndexNum = 500, 2000
	cfg.RaftBatchMaxBytes = cfg.Store.MaxMessageSize
	cfg.Raft.DLegerPeers = "n0-127.0.0.1:20910"
	cfg.Raft.DLegerSelfID = "n0"
	if err := cfg.Derive(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestNodeRunUntilCancel: a node on in-memory parts serves once Run
// started it, and Run returns when its context ends with the node closed:
// no goroutine it started is left.
// Its in-memory FS keeps the data for the next node on the same parts.
func TestNodeRunUntilCancel(t *testing.T) {
	_, nsAddr := startProcNameServer(t)
	cfg := testNodeConfig(t, nsAddr)
	net := NewInmemNetwork()
	parts, err := NewInmemParts(cfg.GroupConfig, net)
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent() // the name server's goroutines
	n, err := NewNode(cfg, parts, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	testutil.WaitFor(t, 10*time.Second, "the single member leads", n.Group().IsLeader)
	res, err := n.Group().PutMessages(ctx, []*store.Message{testMessage(wire.TopicAutoCreate, 0, "k", "", 0, 16)})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Nothing the node started outlives Close (the name server's handler
	// of its registration connection ends once the connection is gone).
	goleak.VerifyNone(t, before)

	n, err = NewNode(cfg, net.Reopen(parts), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	testutil.WaitFor(t, 10*time.Second, "the restarted member leads", n.Group().IsLeader)
	if got := n.Group().Store().CommitLog().MaxOffset(); got <= res[0].PhysicalOffset {
		t.Fatalf("restarted on the same parts: CommitLog ends at %d, the message was at %d", got, res[0].PhysicalOffset)
	}
}

// TestInmemNetworkPartition: a cut-off member's RPCs fail at once both
// ways, and work again once it rejoins.
func TestInmemNetworkPartition(t *testing.T) {
	net := NewInmemNetwork()
	a := net.Transport("a", time.Second)
	b := net.Transport("b", time.Second)
	defer a.(raft.WithClose).Close()
	defer b.(raft.WithClose).Close()
	// b answers every vote request.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case rpc := <-b.Consumer():
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			case <-stop:
				return
			}
		}
	}()
	vote := func(from raft.Transport, to raft.ServerAddress) error {
		var resp raft.RequestVoteResponse
		return from.RequestVote("x", to, &raft.RequestVoteRequest{}, &resp)
	}
	if err := vote(a, "b"); err != nil {
		t.Fatalf("connected: %v", err)
	}
	net.SetPartitioned("b", true)
	start := time.Now()
	if err := vote(a, "b"); err == nil {
		t.Fatal("RPC crossed the partition")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("RPC across the partition failed after %v, not at once", d)
	}
	net.SetPartitioned("b", false)
	if err := vote(a, "b"); err != nil {
		t.Fatalf("healed: %v", err)
	}
}

// TestInmemNetworkReopenPartitioned: a member restarting behind a
// partition gets a transport that no peer reaches and that reaches no
// peer until the partition heals; Reopen, as after a plain restart,
// joins the network at once.
func TestInmemNetworkReopenPartitioned(t *testing.T) {
	net := NewInmemNetwork()
	a := net.Transport("a", time.Second)
	defer a.(raft.WithClose).Close()
	grant := func(tr raft.Transport) (stop func()) {
		quit, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case rpc := <-tr.Consumer():
					rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
				case <-quit:
					return
				}
			}
		}()
		return func() { close(quit); <-done }
	}
	defer grant(a)()
	for _, cut := range []bool{true, false} {
		b := net.Transport("b", time.Second)
		if err := b.(raft.WithClose).Close(); err != nil {
			t.Fatal(err)
		}
		reopen := net.Reopen
		if cut {
			reopen = net.ReopenPartitioned
		}
		p := reopen(Parts{Transport: b})
		stop := grant(p.Transport)
		var resp raft.RequestVoteResponse
		toB := a.RequestVote("x", "b", &raft.RequestVoteRequest{}, &resp)
		if !cut && toB != nil {
			t.Fatalf("after a plain reopen: %v", toB)
		}
		if cut {
			if toA := p.Transport.RequestVote("x", "a", &raft.RequestVoteRequest{}, &resp); toB == nil || toA == nil {
				t.Fatalf("RPCs crossed the partition the member restarted behind: to it %v, from it %v", toB, toA)
			}
			net.SetPartitioned("b", false)
			if err := a.RequestVote("x", "b", &raft.RequestVoteRequest{}, &resp); err != nil {
				t.Fatalf("healed: %v", err)
			}
		}
		stop()
		_ = p.Transport.(raft.WithClose).Close()
	}
}

// TestInmemTransportCloseFailsPipelinedAppends: an AppendEntries queued on
// a pipeline to a member whose transport closes before its Raft took it
// completes with the close error (hashicorp/raft's in-memory pipeline
// reads the response before the error, so the answer must carry one).
func TestInmemTransportCloseFailsPipelinedAppends(t *testing.T) {
	net := NewInmemNetwork()
	a := net.Transport("a", 5*time.Second)
	b := net.Transport("b", 5*time.Second)
	defer a.(raft.WithClose).Close()
	defer b.(raft.WithClose).Close()
	p, err := a.AppendEntriesPipeline("x", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var resp raft.AppendEntriesResponse
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{}, &resp); err != nil {
		t.Fatal(err)
	}
	// Nothing consumes b's RPCs: the append is queued there. Close answers
	// it first (then detaches b, which also shuts a's pipeline down, so
	// the answer is checked here before that step).
	b.(*inmemTransport).failQueued()
	select {
	case f := <-p.Consumer():
		if !errors.Is(f.Error(), errTransportClosed) {
			t.Fatalf("pipelined append to a closed member: %v, want errTransportClosed", f.Error())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pipelined append never completed")
	}
}
