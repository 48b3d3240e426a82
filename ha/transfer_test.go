package ha

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// inmemGroup starts n in-memory Raft members "n0".."n{n-1}"; the last one
// is a nonvoter when nonvoter is set. n0 bootstraps the configuration.
func inmemGroup(t *testing.T, n int, nonvoter bool) []*raft.Raft {
	t.Helper()
	var conf raft.Configuration
	trans := make([]*raft.InmemTransport, n)
	for i := range trans {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("n%d", i)))
		trans[i] = tr
		s := raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: addr}
		if nonvoter && i == n-1 {
			s.Suffrage = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, s)
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(trans[j].LocalAddr(), trans[j])
			}
		}
	}
	rs := make([]*raft.Raft, n)
	for i := range rs {
		c := raft.DefaultConfig()
		c.LocalID = conf.Servers[i].ID
		c.HeartbeatTimeout, c.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
		c.LeaderLeaseTimeout, c.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
		c.LogOutput = io.Discard
		store := raft.NewInmemStore()
		r, err := raft.NewRaft(c, nopFSM{}, store, store, raft.NewInmemSnapshotStore(), trans[i])
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = r
		t.Cleanup(func() { _ = r.Shutdown().Error() })
	}
	if err := rs[0].BootstrapCluster(conf).Error(); err != nil {
		t.Fatal(err)
	}
	return rs
}

func inmemLeader(rs []*raft.Raft) *raft.Raft {
	for _, r := range rs {
		if r.State() == raft.Leader {
			return r
		}
	}
	return nil
}

// TestTransferToNonvoterRefused: a nonvoter (a member being added, still
// catching up) cannot win an election, so handing it leadership would only
// make it campaign with a higher term and depose the leader. The transfer
// is refused with a clear error and the nonvoter never campaigns. (The
// voters' own elections are not the transfer's doing: under 100 ms
// timeouts a starved machine can have one at any time.)
func TestTransferToNonvoterRefused(t *testing.T) {
	rs := inmemGroup(t, 3, true)
	// The filter runs on n2's Raft goroutine as it changes state: a
	// TimeoutNow makes it a candidate before it answers, so a campaign the
	// transfer started is recorded by the time the transfer returns.
	var campaigned atomic.Bool
	rs[2].RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if s, ok := o.Data.(raft.RaftState); ok && s == raft.Candidate {
			campaigned.Store(true)
		}
		return false
	}))
	var l *raft.Raft
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { l = inmemLeader(rs); return l != nil })
	testutil.WaitFor(t, 10*time.Second, "the nonvoter caught up", func() bool {
		return rs[2].AppliedIndex() >= l.AppliedIndex()
	})
	// Leadership can move between finding the leader and the call: that
	// refusal (ErrNotLeader) is asked again of the new leader.
	var err error
	testutil.WaitFor(t, 10*time.Second, "the leader's answer", func() bool {
		l = inmemLeader(rs)
		if l == nil {
			return false
		}
		err = TransferLeadership(l, "n2")
		return !errors.Is(err, ErrNotLeader)
	})
	if !errors.Is(err, ErrNotVoter) {
		t.Errorf("transfer to the nonvoter: %v, want ErrNotVoter", err)
	}
	if campaigned.Load() || rs[2].State() != raft.Follower {
		t.Errorf("the nonvoter campaigned (state now %v) after the refused transfer", rs[2].State())
	}
}
