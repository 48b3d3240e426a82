package broker

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// TestCatchupTransportRefusesCandidacy: while blocked, the member's own
// vote and pre-vote requests fail without reaching the peer; pre-vote
// support stays visible to Raft; unblocked they go through.
func TestCatchupTransportRefusesCandidacy(t *testing.T) {
	_, a := raft.NewInmemTransport("a")
	_, b := raft.NewInmemTransport("b")
	a.Connect("b", b)
	defer a.Close()
	defer b.Close()
	blocked := true
	w := wrapCatchupTransport(a, func() bool { return blocked })
	pv, ok := w.(raft.WithPreVote)
	if !ok {
		t.Fatal("the wrapper hides pre-vote support")
	}
	done := make(chan struct{})
	served := make(chan struct{})
	defer func() { close(done); <-served }()
	go func() {
		defer close(served)
		for {
			var rpc raft.RPC
			select {
			case rpc = <-b.Consumer():
			case <-done:
				return
			}
			switch rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{Granted: true}, nil)
			}
		}
	}()
	var vr raft.RequestVoteResponse
	var pr raft.RequestPreVoteResponse
	if err := w.RequestVote("b", "b", &raft.RequestVoteRequest{}, &vr); !errors.Is(err, errCatchupPending) || vr.Granted {
		t.Fatalf("blocked RequestVote: %v, granted %v", err, vr.Granted)
	}
	if err := pv.RequestPreVote("b", "b", &raft.RequestPreVoteRequest{}, &pr); !errors.Is(err, errCatchupPending) || pr.Granted {
		t.Fatalf("blocked RequestPreVote: %v, granted %v", err, pr.Granted)
	}
	blocked = false
	if err := w.RequestVote("b", "b", &raft.RequestVoteRequest{}, &vr); err != nil || !vr.Granted {
		t.Fatalf("unblocked RequestVote: %v, granted %v", err, vr.Granted)
	}
	if err := pv.RequestPreVote("b", "b", &raft.RequestPreVoteRequest{}, &pr); err != nil || !pr.Granted {
		t.Fatalf("unblocked RequestPreVote: %v, granted %v", err, pr.Granted)
	}
}
