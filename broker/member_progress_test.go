package broker

import (
	"testing"

	"github.com/hashicorp/raft"
)

// A learner wiped and restarted under its id (addMember run again to wait
// for it) answers the leader's heartbeats at once while it holds nothing.
// The match it acknowledged before the wipe must not stand: with a fresh
// heartbeat it made the promotion see a lag of a few entries and promote
// an empty member. Its first refused append (its last index, 0) lowers it.
func TestProgressForgetsALogThePeerNoLongerHolds(t *testing.T) {
	_, lt := raft.NewInmemTransport("L")
	_, ft := raft.NewInmemTransport("F")
	lt.Connect("F", ft)
	ft.Connect("L", lt)
	answers := make(chan *raft.AppendEntriesResponse, 1)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case rpc := <-ft.Consumer():
				rpc.Respond(<-answers, nil)
			case <-done:
				return
			}
		}
	}()
	defer func() { close(done); <-stopped }()
	p := newProgressTracker()
	tr := trackProgress(lt, p)
	send := func(req *raft.AppendEntriesRequest, resp raft.AppendEntriesResponse) {
		t.Helper()
		answers <- &resp
		var out raft.AppendEntriesResponse
		if err := tr.AppendEntries("F", "F", req, &out); err != nil {
			t.Fatal(err)
		}
	}
	send(&raft.AppendEntriesRequest{PrevLogEntry: 99, Entries: []*raft.Log{{Index: 100}}}, raft.AppendEntriesResponse{Success: true, LastLog: 99})
	if got := p.get("F").match; got != 100 {
		t.Fatalf("match after an acknowledged append up to 100: %d", got)
	}
	// Wiped: the next append is refused, naming its last index.
	send(&raft.AppendEntriesRequest{PrevLogEntry: 100, Entries: []*raft.Log{{Index: 101}}}, raft.AppendEntriesResponse{LastLog: 0})
	// A heartbeat says nothing about the log.
	send(&raft.AppendEntriesRequest{}, raft.AppendEntriesResponse{Success: true})
	if got := p.get("F").match; got != 0 {
		t.Fatalf("match of a peer that refused an append holding nothing: %d, want 0", got)
	}
	send(&raft.AppendEntriesRequest{PrevLogEntry: 0, Entries: []*raft.Log{{Index: 1}, {Index: 2}}}, raft.AppendEntriesResponse{Success: true})
	if got := p.get("F").match; got != 2 {
		t.Fatalf("match after it took entries 1-2 again: %d", got)
	}
}
