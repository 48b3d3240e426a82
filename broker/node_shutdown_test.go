package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// shutdownProducers send to a group's leader from several goroutines the
// way the SDK does: a not-leader answer moves them to the leader it
// names, any other failure re-reads the route from the name server, and a
// message counts as failed only if it is not acknowledged within
// sendRetryBudget.
type shutdownProducers struct {
	pc     *procCluster
	addr   atomic.Pointer[string]
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	acks   []time.Time // guarded by mu
	failed []error     // guarded by mu
}

const sendRetryBudget = 10 * time.Second

func startShutdownProducers(pc *procCluster, leaderAddr, topic string, n int) *shutdownProducers {
	p := &shutdownProducers{pc: pc, stop: make(chan struct{})}
	p.addr.Store(&leaderAddr)
	for w := 0; w < n; w++ {
		p.wg.Add(1)
		go p.run(topic, w)
	}
	return p
}

func (p *shutdownProducers) run(topic string, queue int) {
	defer p.wg.Done()
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		if err := p.send(topic, queue, fmt.Sprintf("w%d-%d", queue, i)); err != nil {
			p.mu.Lock()
			p.failed = append(p.failed, err)
			p.mu.Unlock()
		}
	}
}

func (p *shutdownProducers) send(topic string, queue int, body string) error {
	deadline := time.Now().Add(sendRetryBudget)
	var last error
	for time.Now().Before(deadline) {
		addr := *p.addr.Load()
		req := remoting.NewRequest(remoting.RequestSendMessage, nil, []byte(body))
		for k, v := range sendExt(topic, queue, "") {
			req.ExtFields[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := p.pc.client.InvokeSync(ctx, addr, req)
		cancel()
		switch {
		case err == nil && resp.Code == remoting.ResponseSuccess:
			p.mu.Lock()
			p.acks = append(p.acks, time.Now())
			p.mu.Unlock()
			return nil
		case err == nil && resp.Code == remoting.ResponseServiceNotAvailable && resp.ExtFields[wire.ExtLeaderAddr] != "":
			next := resp.ExtFields[wire.ExtLeaderAddr]
			p.addr.Store(&next)
			continue
		case err != nil:
			last = err
		default:
			last = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		// As the SDK: ask the name server where brokerId 0 is now.
		if a := p.pc.ns.Routes().ClusterInfo().BrokerAddrTable[p.pc.cfgs[0].BrokerName].BrokerAddrs[wire.MasterID]; a != "" {
			p.addr.Store(&a)
		}
	}
	return fmt.Errorf("%s not acknowledged within %s: %w", body, sendRetryBudget, last)
}

func (p *shutdownProducers) ackCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acks)
}

// finish stops the producers and returns the longest gap between two
// consecutive acknowledgements and the failed sends.
func (p *shutdownProducers) finish() (time.Duration, []error) {
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(p.acks); i++ {
		gap = max(gap, p.acks[i].Sub(p.acks[i-1]))
	}
	return gap, p.failed
}

// TestShutdownLeaderTransfersLeadership: a planned stop (Node.Close, what
// SIGTERM runs) of the leader while producers send hands leadership to a
// follower before the node goes away: no send fails, the term after the
// old leader's was won by the member the hand-off named through the
// transfer's vote (the target campaigned at once; nobody timed out
// waiting for a dead leader and no election was split), and the name
// server routes the leader. Later terms are tolerated: on a starved
// machine the new leader can miss its lease (no quorum contact within
// LeaderLeaseTimeout) and step down, and the election that follows is
// Raft's answer to load, not the hand-off's doing.
func TestShutdownLeaderTransfersLeadership(t *testing.T) {
	pc := startRealCluster(t, withProdRaftTimings)
	l := pc.createTopicOnLeader("SDT", 4)
	oldID, oldTerm := pc.groups[l].SelfID(), pc.groups[l].Raft().CurrentTerm()
	el := watchElections(pc)

	p := startShutdownProducers(pc, pc.nodes[l].Addr(), "SDT", 4)
	testutil.WaitFor(t, 10*time.Second, "acks before the shutdown", func() bool { return p.ackCount() >= 100 })
	to := pc.shutdownNode(l)
	before := p.ackCount()
	testutil.WaitFor(t, 10*time.Second, "acks after the shutdown", func() bool { return p.ackCount() >= before+100 })
	gap, failed := p.finish()

	if len(failed) != 0 {
		t.Fatalf("%d sends failed across the planned stop, first: %v", len(failed), failed[0])
	}
	if to == "" || to == oldID {
		t.Fatalf("Close of the leader %s handed off to %q", oldID, to)
	}
	won, votes := el.term(oldTerm + 1)
	if won != to {
		t.Fatalf("term %d (after the old leader's %d) was won by %q, the hand-off named %s", oldTerm+1, oldTerm, won, to)
	}
	for _, v := range votes {
		if !v.LeadershipTransfer || string(v.ID) != to {
			t.Fatalf("term %d had a vote request from %s that was no leadership transfer's (transfer %v)", oldTerm+1, v.ID, v.LeadershipTransfer)
		}
	}
	if len(votes) == 0 {
		t.Fatalf("no vote request for term %d seen", oldTerm+1)
	}
	nl := -1
	testutil.WaitFor(t, 15*time.Second, "the name server routes the leader as brokerId 0", func() bool {
		nl = pc.leader()
		return pc.ns.Routes().ClusterInfo().BrokerAddrTable[pc.cfgs[nl].BrokerName].BrokerAddrs[wire.MasterID] == pc.nodes[nl].Addr()
	})
	if term := pc.groups[nl].Raft().CurrentTerm(); term != oldTerm+1 {
		t.Logf("term %d -> %d: the transfer's leader %s lost leadership to a later election (leader now %s)", oldTerm, term, to, pc.groups[nl].SelfID())
	}
	t.Logf("longest gap between two acks across the planned stop: %v (heartbeat timeout %v, election timeout %v)",
		gap, pc.cfgs[nl].Raft.HeartbeatTimeout, pc.cfgs[nl].Raft.ElectionTimeout)
}

// TestShutdownFollowerKeepsLeader: a follower's planned stop hands nothing
// off; the leader and the term stay.
func TestShutdownFollowerKeepsLeader(t *testing.T) {
	pc := startRealCluster(t, withProdRaftTimings)
	l := pc.leader()
	term := pc.groups[l].Raft().CurrentTerm()
	if to := pc.shutdownNode((l + 1) % 3); to != "" {
		t.Fatalf("a follower's Close handed leadership to %q", to)
	}
	if !pc.groups[l].IsLeader() || pc.groups[l].Raft().CurrentTerm() != term {
		t.Fatalf("leader %d after a follower's stop: leader %v, term %d (was %d)", l, pc.groups[l].IsLeader(), pc.groups[l].Raft().CurrentTerm(), term)
	}
}

// TestShutdownTransferDisabled: shutdownTransferTimeout=0 stops a leader
// without a hand-off (the others elect after their heartbeat timeout).
func TestShutdownTransferDisabled(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { withProdRaftTimings(c); c.ShutdownTransferTimeout = 0 })
	l := pc.leader()
	if to := pc.shutdownNode(l); to != "" {
		t.Fatalf("shutdownTransferTimeout=0 still handed off to %q", to)
	}
	if nl := pc.leader(); nl == l {
		t.Fatal("the stopped node still leads")
	}
}

// TestStopLeaderWithoutHandOffGap is the contrast that makes the gap above
// meaningful: a leader that goes away without a hand-off (a crash) leaves
// producers without acks until the followers' heartbeat timeout ran out
// and one of them won an election, so the longest gap is at least about
// a heartbeat timeout (half of it asserted: a candidate's last contact
// can trail the last ack slightly).
func TestStopLeaderWithoutHandOffGap(t *testing.T) {
	pc := startRealCluster(t, withProdRaftTimings)
	l := pc.createTopicOnLeader("SDK", 4)
	p := startShutdownProducers(pc, pc.nodes[l].Addr(), "SDK", 4)
	testutil.WaitFor(t, 10*time.Second, "acks before the stop", func() bool { return p.ackCount() >= 100 })
	pc.stopNode(l)
	before := p.ackCount()
	testutil.WaitFor(t, 20*time.Second, "acks after the stop", func() bool { return p.ackCount() >= before+100 })
	gap, failed := p.finish()
	ht := pc.cfgs[l].Raft.HeartbeatTimeout
	if gap < ht/2 {
		t.Fatalf("longest gap %v after a crash-like stop, want at least half the heartbeat timeout %v", gap, ht)
	}
	t.Logf("longest gap between two acks across a crash-like stop: %v (%d sends failed)", gap, len(failed))
}

// TestShutdownPreferredLeaderStaysOff: the planned stop of the preferred
// leader is not undone by the new leader's preferredLeaderId check (which
// here runs every 20 ms): the term after n0's is won by the member the
// hand-off named, through the transfer's campaign, and n0 wins no later
// term through a transfer while it finishes stopping. Later elections are
// tolerated (on production timings a starved machine can cost a leader
// its lease; that election is Raft's answer to load, not the check's).
func TestShutdownPreferredLeaderStaysOff(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) {
		withProdRaftTimings(c)
		c.Raft.PreferredLeaderID = "n0"
		c.PreferredLeaderCheckInterval = 20 * time.Millisecond
	})
	waitN0Leads := func() {
		t.Helper()
		testutil.WaitFor(t, 15*time.Second, "n0 leads", func() bool { return pc.groups[0].IsLeader() })
	}
	if l := pc.createTopicOnLeader("SDP", 4); l != 0 {
		waitN0Leads()
	}
	pc.waitLeaderRegistered()
	p := startShutdownProducers(pc, pc.nodes[0].Addr(), "SDP", 4)
	testutil.WaitFor(t, 10*time.Second, "acks before the shutdown", func() bool { return p.ackCount() >= 100 })
	// A lost lease meanwhile moved leadership off n0 and the check moves
	// it back: the stop must begin while n0 leads.
	waitN0Leads()
	term := pc.groups[0].Raft().CurrentTerm()
	el := watchElections(pc)
	to := pc.shutdownNode(0)
	before := p.ackCount()
	testutil.WaitFor(t, 10*time.Second, "acks after the shutdown", func() bool { return p.ackCount() >= before+100 })
	_, failed := p.finish()
	if len(failed) != 0 {
		t.Fatalf("%d sends failed, first: %v", len(failed), failed[0])
	}
	if to == "" || to == "n0" {
		t.Fatalf("hand-off named %q", to)
	}
	if won, _ := el.term(term + 1); won != to || !el.transferVote(term+1, to) {
		t.Fatalf("term %d (after n0's %d) was won by %q, want %s, the hand-off's target, through its transfer", term+1, term, won, to)
	}
	// Only a transfer to n0 is the check moving leadership back; n0 may
	// also win a plain election while it finishes stopping (its Raft runs
	// until the hand-off is routed), when a starved leader lost its lease,
	// and it then hands off again.
	nl := pc.leader()
	for tm := term + 1; tm <= pc.groups[nl].Raft().CurrentTerm(); tm++ {
		if won, _ := el.term(tm); won == "n0" && el.transferVote(tm, "n0") {
			t.Fatalf("n0 won term %d through a transfer after handing leadership off in term %d: the preferred-leader check moved it back", tm, term)
		}
	}
	if now := pc.groups[nl].Raft().CurrentTerm(); now != term+1 {
		t.Logf("term %d -> %d: %s lost leadership to a later election (leader now %s)", term, now, to, pc.groups[nl].SelfID())
	}
}

// TestShutdownLeaderKeepsCommittedOffsets: consumer offsets the leader
// acknowledged but still holds in its coalescer are committed before it
// hands leadership off (a follower would drop them), so the new leader
// serves them: no offset regression across a planned stop.
func TestShutdownLeaderKeepsCommittedOffsets(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { withProdRaftTimings(c); c.ConsumerOffsetCommitCoalescer = time.Hour })
	l := pc.createTopicOnLeader("SDO", 4)
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("OG")) // offsets are kept for known groups only
	if r := pc.call(pc.nodes[l].Addr(), remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group OG: %d %s", r.Code, r.Remark)
	}
	for q := 0; q < 4; q++ {
		if r := pc.call(pc.nodes[l].Addr(), remoting.RequestSendMessage, sendExt("SDO", q, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
		ext := map[string]string{"consumerGroup": "OG", "topic": "SDO", "queueId": fmt.Sprint(q), "commitOffset": "1"}
		if r := pc.call(pc.nodes[l].Addr(), remoting.RequestUpdateConsumerOffset, ext, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit offset: %d %s", r.Code, r.Remark)
		}
	}
	if to := pc.shutdownNode(l); to == "" {
		t.Fatal("no hand-off")
	}
	nl := pc.leader()
	for q := 0; q < 4; q++ {
		if off, ok := pc.groups[nl].State().ConsumerOffset("OG", "SDO", int32(q)); !ok || off != 1 {
			t.Fatalf("queue %d: the new leader has offset %d (%v), want the acknowledged 1", q, off, ok)
		}
	}
}

// elections records, from every running member of a group, which member
// won each term and the vote requests sent for it.
type elections struct {
	mu    sync.Mutex
	won   map[uint64]string                    // guarded by mu
	votes map[uint64][]raft.RequestVoteRequest // guarded by mu
}

// watchElections starts recording on pc's running members.
func watchElections(pc *procCluster) *elections { return watchGroupElections(pc.groups...) }

// watchGroupElections starts recording on groups (nil entries: members
// not running).
func watchGroupElections(groups ...*Group) *elections {
	e := &elections{won: map[uint64]string{}, votes: map[uint64][]raft.RequestVoteRequest{}}
	for _, g := range groups {
		if g == nil {
			continue
		}
		id := g.SelfID()
		// The filter runs on Raft's goroutine: on entering Leader, after
		// the won election's term is set; on a vote request, before Raft
		// acts on it.
		g.Raft().RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			switch d := o.Data.(type) {
			case raft.RaftState:
				if d == raft.Leader {
					e.won[o.Raft.CurrentTerm()] = id
				}
			case raft.RequestVoteRequest:
				e.votes[d.Term] = append(e.votes[d.Term], d)
			}
			return false
		}))
	}
	return e
}

// term returns the member that won term and the vote requests seen for it.
func (e *elections) term(term uint64) (string, []raft.RequestVoteRequest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.won[term], e.votes[term]
}

// transferVote reports whether a vote request for term came from id (any
// member when id is "") and carried the leadership-transfer flag (a
// campaign started by TimeoutNow, not by a heartbeat or election timeout).
func (e *elections) transferVote(term uint64, id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range e.votes[term] {
		if (id == "" || string(v.ID) == id) && v.LeadershipTransfer {
			return true
		}
	}
	return false
}
