package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// sendRound makes keys and producer ids unique per sendConcurrently call.
var sendRound atomic.Int64

func longRun() bool { return os.Getenv("RAFTMQ_LONG") == "1" }

// sendConcurrently sends total messages from `senders` goroutines (one
// idempotent producer each) through sendRetrying; onAck runs after each ack.
func (c *testCluster) sendConcurrently(senders, total, bodySize int, queues int32, onAck func(n int64)) []ack {
	var mu sync.Mutex
	var acks []ack
	var count atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	deadline := time.Now().Add(2 * time.Minute)
	round := sendRound.Add(1)
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pid := fmt.Sprintf("r%dp%d", round, s)
			for i := s; i < total; i += senders {
				key := fmt.Sprintf("r%dk%07d", round, i)
				m := testMessage("T", int32(i)%queues, key, pid, int64(i), bodySize)
				res, err := c.sendRetrying(m, deadline)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acks = append(acks, ack{key: key, PutResult: res})
				mu.Unlock()
				if onAck != nil {
					onAck(count.Add(1))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.t.Fatal(err)
	}
	return acks
}

// checkDense verifies queue offsets are dense per queue (no two acked
// messages share one, and duplicates resolved to their originals).
func checkDense(t *testing.T, acks []ack) {
	t.Helper()
	seen := map[[2]int64]string{}
	for _, a := range acks {
		k := [2]int64{int64(a.QueueID), a.QueueOffset}
		if other, ok := seen[k]; ok && other != a.key {
			t.Fatalf("queue %d offset %d acked for %s and %s", a.QueueID, a.QueueOffset, other, a.key)
		}
		seen[k] = a.key
	}
}

func TestGroupLeaderKillMidStream(t *testing.T) {
	total := 10_000
	if longRun() {
		total = 100_000
	}
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true})
	c.createTopic("T", 4)
	first := c.leader()
	killed := -1
	var killOnce sync.Once
	var killedAt time.Time
	var mu sync.Mutex
	acks := c.sendConcurrently(16, total, 256, 4, func(n int64) {
		if n == int64(total/3) {
			killOnce.Do(func() {
				for i, nd := range c.nodes {
					if nd == first {
						killed = i
					}
				}
				// Stop the leader from another goroutine: senders go on.
				go func() {
					mu.Lock()
					defer mu.Unlock()
					killedAt = time.Now()
					c.stop(killed)
				}()
			})
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if len(acks) != total {
		t.Fatalf("%d acks, want %d", len(acks), total)
	}
	checkDense(t, acks)
	l := c.leader()
	if l == first {
		t.Fatal("the killed leader still leads")
	}
	t.Logf("leader %s killed at ack %d (%v ago); new leader %s", first.id, total/3, time.Since(killedAt).Round(time.Millisecond), l.id)
	c.waitCaughtUp()
	checkAcked(t, l, acks)
	// The old leader restarts, catches up, and holds the same bytes.
	c.start(killed)
	commit := c.waitCaughtUp()
	checkAcked(t, c.nodes[killed], acks)
	c.checkIdentical(0, commit, 4)
}

func TestGroupPartitionedLeaderAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{prodTimings: true, disk: true, sync: true})
	c.createTopic("T", 2)
	old := c.leader()
	before := c.sendConcurrently(4, 200, 128, 2, nil)
	c.setCut(old, true)
	// Writes to the cut-off leader: none may be acknowledged.
	var wg sync.WaitGroup
	var acked atomic.Int64
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			m := testMessage("T", 0, fmt.Sprintf("cut%d", i), "cut", int64(i), 128)
			if _, err := old.g().PutMessages(ctx, []*store.Message{m}); err == nil {
				acked.Add(1)
			}
		}()
	}
	var l *testNode
	testutil.WaitFor(t, 30*time.Second, "a leader among the connected nodes", func() bool {
		for _, n := range c.nodes {
			if n != old && n.g().IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	after := c.sendConcurrently(4, 200, 128, 2, nil)
	wg.Wait()
	if n := acked.Load(); n != 0 {
		t.Fatalf("partitioned leader acknowledged %d writes", n)
	}
	testutil.WaitFor(t, 10*time.Second, "old leader steps down", func() bool { return !old.g().IsLeader() })
	c.setCut(old, false)
	commit := c.waitCaughtUp()
	all := append(before, after...)
	for _, n := range c.nodes {
		checkAcked(t, n, all)
	}
	c.checkIdentical(0, commit, 2)
	_ = l
}

// TestGroupFollowerRecoversThroughSnapshot: a follower that was down while
// the others snapshotted and removed the log it lacks catches up through
// the snapshot, and its log then continues at the leader's positions.
func TestGroupFollowerRecoversThroughSnapshot(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, segmentSize: 256 << 10})
	c.createTopic("T", 2)
	l := c.leader()
	lagging := c.followerOf(l)
	c.sendConcurrently(4, 300, 1024, 2, nil)
	c.waitCaughtUp()
	c.stop(lagging)
	c.sendConcurrently(4, 2000, 1024, 2, nil)
	// Both running members snapshot and truncate, not only the leader: on
	// production timings a loaded box can elect the other one, and a
	// leader that still holds the entries the follower lacks sends those
	// instead of the snapshot.
	for i, n := range c.nodes {
		if i == lagging {
			continue
		}
		first, err := n.g().SnapshotAndTruncate()
		if err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
		if min := n.g().Store().CommitLog().MinOffset(); first <= 1 || min == 0 {
			t.Fatalf("%s: retention removed nothing: first index %d, min offset %d", n.id, first, min)
		}
	}
	c.start(lagging)
	late := c.sendConcurrently(4, 300, 1024, 2, nil)
	commit := c.waitCaughtUp()
	f := c.nodes[lagging]
	// The follower's log continues at the leader's positions: messages after
	// the snapshot are readable at the acked offsets on both.
	checkAcked(t, f, late)
	checkAcked(t, l, late)
	// The follower's log starts at the installed snapshot's position (the
	// bytes before it in that segment are zeros there).
	fi, err := f.g().LogStore().FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	min, _, err := f.g().LogStore().Locate(fi)
	if err != nil {
		t.Fatal(err)
	}
	if min == 0 {
		t.Fatalf("follower log starts at 0: it did not install the snapshot (first index %d)", fi)
	}
	t.Logf("follower restarted from the snapshot: first index %d at position %d", fi, min)
	d1, _ := logDigest(t, f, min, commit)
	d2, _ := logDigest(t, l, min, commit)
	if d1 != d2 {
		t.Fatalf("follower's CommitLog differs from the leader's in [%d, end of %d)", min, commit)
	}
	for q := int32(0); q < 2; q++ {
		if a, b := f.g().Store().ConsumeQueues().Get("T", q).MaxOffset(), l.g().Store().ConsumeQueues().Get("T", q).MaxOffset(); a != b {
			t.Fatalf("queue %d: follower max offset %d, leader %d", q, a, b)
		}
	}
}

// TestGroupTransferWithSendsInFlight: a leadership transfer while eight
// producers send loses and duplicates nothing, and the term after the
// transferring leader's is won by another member through the transfer's
// campaign. The transfer starts from whoever leads at the 1000th ack: on
// production timings a loaded box can cost the first leader its lease
// before then, and a later election is Raft's answer to load, not the
// transfer's doing.
func TestGroupTransferWithSendsInFlight(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true})
	c.createTopic("T", 4)
	var groups []*Group
	for _, n := range c.nodes {
		groups = append(groups, n.g())
	}
	el := watchGroupElections(groups...)
	var from *testNode
	var fromTerm uint64
	var gap time.Duration
	var once sync.Once
	acks := c.sendConcurrently(8, 3000, 256, 4, func(n int64) {
		if n == 1000 {
			once.Do(func() {
				// Leadership may move between the look and the transfer:
				// look again.
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					l, g := c.currentLeaderGroup()
					if g == nil {
						continue
					}
					term, start := g.Term(), time.Now()
					err := g.TransferLeadership("")
					if errors.Is(err, ErrNotLeader) || errors.Is(err, raft.ErrNotLeader) {
						continue
					}
					if err != nil {
						t.Errorf("transfer from %s: %v", l.id, err)
						return
					}
					from, fromTerm, gap = l, term, time.Since(start)
					return
				}
				t.Errorf("no leader to transfer from within 20s")
			})
		}
	})
	if from == nil {
		t.Fatal("no transfer happened")
	}
	won, _ := el.term(fromTerm + 1)
	if won == "" || won == from.id || !el.transferVote(fromTerm+1, won) {
		t.Fatalf("term %d, after %s's transfer from term %d, was won by %q, want another member through the transfer's campaign",
			fromTerm+1, from.id, fromTerm, won)
	}
	l := c.leader()
	t.Logf("transfer from %s returned after %v; %s won term %d, %s leads now", from.id, gap.Round(time.Millisecond), won, fromTerm+1, l.id)
	checkDense(t, acks)
	commit := c.waitCaughtUp()
	checkAcked(t, l, acks)
	c.checkIdentical(0, commit, 4)
}

func TestGroupDedupAndTables(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true})
	c.createTopic("T", 1)
	l := c.leader()
	ctx := context.Background()
	m := testMessage("T", 0, "dup", "pid", 7, 64)
	r1, err := l.g().PutMessages(ctx, []*store.Message{m})
	if err != nil {
		t.Fatal(err)
	}
	m2 := testMessage("T", 0, "dup", "pid", 7, 64)
	r2, err := l.g().PutMessages(ctx, []*store.Message{m2, testMessage("T", 0, "next", "pid", 8, 64)})
	if err != nil {
		t.Fatal(err)
	}
	if !r2[0].Duplicate || r2[0].QueueOffset != r1[0].QueueOffset || r2[0].PhysicalOffset != r1[0].PhysicalOffset {
		t.Fatalf("retry not deduplicated: first %+v, retry %+v", r1[0], r2[0])
	}
	if r2[1].Duplicate || r2[1].QueueOffset != r1[0].QueueOffset+1 {
		t.Fatalf("next message %+v, want queue offset %d", r2[1], r1[0].QueueOffset+1)
	}
	if err := l.g().CommitOffsets(ctx, []OffsetCommit{{Group: "G", Topic: "T", QueueID: 0, Offset: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := l.g().UpdateSubscriptionGroup(ctx, wire.DefaultSubscriptionGroupConfig("G")); err != nil {
		t.Fatal(err)
	}
	if err := l.g().UpdateScheduleOffsets(ctx, map[int32]int64{3: 9}); err != nil {
		t.Fatal(err)
	}
	c.waitCaughtUp()
	for _, n := range c.nodes {
		st := n.g().State()
		if off, ok := st.ConsumerOffset("G", "T", 0); !ok || off != 2 {
			t.Fatalf("%s: offset %d %v", n.id, off, ok)
		}
		if _, ok := st.SubscriptionGroup("G"); !ok {
			t.Fatalf("%s: group missing", n.id)
		}
		if st.ScheduleOffsets()[3] != 9 {
			t.Fatalf("%s: schedule offsets %v", n.id, st.ScheduleOffsets())
		}
		if st.TopicsDataVersion() != l.g().State().TopicsDataVersion() {
			t.Fatalf("%s: topics data version differs", n.id)
		}
		if n != l && n.g().LeaderAddr() != l.remoting {
			t.Fatalf("%s: leader addr %q, want %q", n.id, n.g().LeaderAddr(), l.remoting)
		}
		if n != l {
			if _, err := n.g().PutMessages(ctx, []*store.Message{m}); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("%s: follower write: %v", n.id, err)
			}
		}
	}
	// Snapshot + restart: tables and the dedup window survive.
	if _, err := l.g().SnapshotAndTruncate(); err != nil {
		t.Fatal(err)
	}
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	l = c.leader()
	r3, err := l.g().PutMessages(ctx, []*store.Message{testMessage("T", 0, "dup", "pid", 7, 64)})
	if err != nil {
		t.Fatal(err)
	}
	if !r3[0].Duplicate || r3[0].QueueOffset != r1[0].QueueOffset {
		t.Fatalf("after restart: retry %+v not deduplicated", r3[0])
	}
	if off, ok := l.g().State().ConsumerOffset("G", "T", 0); !ok || off != 2 {
		t.Fatalf("after restart: offset %d %v", off, ok)
	}
}

// TestGroupDedupBeyondWindow: a retry whose sequence left the dedup
// window is answered as a duplicate, stores nothing, and names no message:
// its own bytes are no message of the queue, so an id for them would be
// one no lookup finds.
func TestGroupDedupBeyondWindow(t *testing.T) {
	c := newTestCluster(t, clusterOpts{tune: func(g *GroupConfig) { g.DedupWindow = 4 }})
	c.createTopic("T", 1)
	l := c.leader()
	ctx := context.Background()
	var first PutResult
	// The window keeps up to twice its size before it forgets.
	for seq := int64(1); seq <= 12; seq++ {
		r, err := l.g().PutMessages(ctx, []*store.Message{testMessage("T", 0, "k", "pid", seq, 64)})
		if err != nil {
			t.Fatal(err)
		}
		if seq == 1 {
			first = r[0]
		}
	}
	known, err := l.g().PutMessages(ctx, []*store.Message{testMessage("T", 0, "k", "pid", 12, 64)})
	if err != nil {
		t.Fatal(err)
	}
	if !known[0].Duplicate || known[0].QueueOffset != 11 || known[0].MsgID == "" {
		t.Fatalf("retry of the newest: %+v, want a duplicate of queue offset 11 with its id", known[0])
	}
	old, err := l.g().PutMessages(ctx, []*store.Message{testMessage("T", 0, "k", "pid", 1, 64)})
	if err != nil {
		t.Fatal(err)
	}
	if r := old[0]; !r.Duplicate || r.QueueOffset != -1 || r.MsgID != "" {
		t.Fatalf("retry beyond the window: %+v, want a duplicate with queue offset -1 and no id (the original was %s)", r, first.MsgID)
	}
	if max := l.g().Store().ConsumeQueues().Get("T", 0).MaxOffset(); max != 12 {
		t.Fatalf("queue holds %d units, want the 12 first sends only", max)
	}
}

func TestGroupPreferredLeaderReturns(t *testing.T) {
	// Not parallel: it needs leadership to move by a transfer, and beside
	// other clusters on 2 cores a missed heartbeat moves it by election.
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, tune: func(g *GroupConfig) {
		g.Raft.PreferredLeaderID = "n2"
		g.PreferredLeaderCheckInterval = 100 * time.Millisecond
	}})
	leads := func(id string) func() bool {
		return func() bool { n := c.currentLeader(); return n != nil && n.id == id }
	}
	testutil.WaitFor(t, 10*time.Second, "the preferred leader n2 leads", leads("n2"))
	c.createTopic("T", 1)
	c.kill(2)
	if l := c.leader(); l.id == "n2" {
		t.Fatal("killed node still leads")
	}
	// What a leader must finish before it hands leadership away (the
	// controller's coalesced offsets) runs before the check's transfer.
	var before atomic.Int32
	for _, n := range c.nodes[:2] {
		n.g().SetBeforeTransfer(func() { before.Add(1) })
	}
	acks := c.sendConcurrently(2, 100, 64, 1, nil)
	c.start(2)
	testutil.WaitFor(t, 10*time.Second, "leadership back on n2 after its restart", leads("n2"))
	if before.Load() == 0 {
		t.Fatal("leadership moved back to n2 without the interim leader's BeforeTransfer")
	}
	c.waitCaughtUp()
	checkAcked(t, c.nodes[2], acks)
}

// TestGroupPreferredLeaderWaitsWhileDown: while the preferred member is
// down the leader keeps checking but never tries a transfer (each try
// would hold every write for an election timeout), and it hands leadership
// over once the member is back and caught up.
func TestGroupPreferredLeaderWaitsWhileDown(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, tune: func(g *GroupConfig) {
		g.Raft.PreferredLeaderID = "n2"
		g.PreferredLeaderCheckInterval = 20 * time.Millisecond
	}})
	leads := func(id string) func() bool {
		return func() bool { n := c.currentLeader(); return n != nil && n.id == id }
	}
	testutil.WaitFor(t, 10*time.Second, "the preferred leader n2 leads", leads("n2"))
	c.kill(2)
	l := c.leader()
	p := l.g().preferred
	from := p.Stats()
	// Past ha.PreferredLeaderSettle every tick is a check.
	testutil.WaitFor(t, 15*time.Second, "five checks while n2 is down", func() bool {
		return p.Stats().Checked >= from.Checked+5
	})
	if s := p.Stats(); s.Attempted != from.Attempted {
		t.Fatalf("%d transfers to the killed preferred member in %d checks", s.Attempted-from.Attempted, s.Checked-from.Checked)
	}
	c.createTopic("T", 1) // a write while n2 is down: it comes back behind
	c.start(2)
	testutil.WaitFor(t, 10*time.Second, "leadership back on n2 after its restart", leads("n2"))
}
