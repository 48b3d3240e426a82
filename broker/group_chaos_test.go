package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/wire"
)

// The randomized group test: concurrent idempotent producers append
// while a seeded nemesis kills leaders and followers (process-style), restarts
// them, partitions nodes, transfers leadership and takes snapshots with
// retention. The seed fixes the schedule (which operation, on which role,
// after which pause); goroutine interleavings still vary, so a failing seed
// reproduces the same fault sequence, not the same instructions.
//
//	RAFTMQ_SEED=<seed> go test -run TestGroupRandomized -v ./broker/
//	RAFTMQ_LONG=1 (60 s instead of 12 s), RAFTMQ_CHAOS_SECONDS=<n> overrides both.

const chaosQueues = 4

// chaosSeed returns the seed from RAFTMQ_SEED or a fresh one.
func chaosSeed(t *testing.T) uint64 {
	if s := os.Getenv("RAFTMQ_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RAFTMQ_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

func chaosDuration(t *testing.T) time.Duration {
	if s := os.Getenv("RAFTMQ_CHAOS_SECONDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("RAFTMQ_CHAOS_SECONDS=%q: %v", s, err)
		}
		return time.Duration(v) * time.Second
	}
	if longRun() {
		return 60 * time.Second
	}
	return 12 * time.Second
}

// termLeaders records who was leader in which term, as Raft (state change
// to Leader, seen synchronously by an observer filter) and as the serving
// role (after the barrier).
type termLeaders struct {
	mu      sync.Mutex
	raft    map[uint64]map[string]bool
	serving map[uint64]map[string]bool
}

func (tl *termLeaders) add(m map[uint64]map[string]bool, term uint64, id string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if m[term] == nil {
		m[term] = map[string]bool{}
	}
	m[term][id] = true
}

// watch hooks a newly started member.
func (tl *termLeaders) watch(n *testNode, g *Group) {
	id := n.id
	// The filter runs on Raft's goroutine inside setState, after the term
	// of the won election is set, so CurrentTerm is the leader's term.
	g.Raft().RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if s, ok := o.Data.(raft.RaftState); ok && s == raft.Leader {
			tl.add(tl.raft, o.Raft.CurrentTerm(), id)
		}
		return false
	}))
	g.OnRoleChange(func(leader bool, term uint64) {
		if leader {
			tl.add(tl.serving, term, id)
		}
	})
}

func (tl *termLeaders) check(t *testing.T) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for name, m := range map[string]map[uint64]map[string]bool{"raft": tl.raft, "serving": tl.serving} {
		var terms []uint64
		for term, ids := range m {
			terms = append(terms, term)
			if len(ids) > 1 {
				t.Errorf("%s: term %d had %d leaders: %v", name, term, len(ids), ids)
			}
		}
		sort.Slice(terms, func(i, j int) bool { return terms[i] < terms[j] })
		var seq []string
		for _, term := range terms {
			for id := range m[term] {
				seq = append(seq, fmt.Sprintf("%d:%s", term, id))
			}
		}
		t.Logf("%s leaders by term: %s", name, strings.Join(seq, " "))
	}
}

// chaosNemesis drives the seeded fault schedule.
type chaosNemesis struct {
	t    *testing.T
	c    *testCluster
	rng  *rand.Rand
	dead map[int]bool // killed, not restarted
	cut  map[int]bool // partitioned
	ops  map[string]int
}

func (nm *chaosNemesis) faulty() []int {
	var out []int
	for i := range nm.c.nodes {
		if nm.dead[i] || nm.cut[i] {
			out = append(out, i)
		}
	}
	return out
}

// pick returns a healthy node: the leader when wantLeader, else a follower
// (or any healthy node when there is no leader right now).
func (nm *chaosNemesis) pick(wantLeader bool) int {
	var healthy []int
	for i, n := range nm.c.nodes {
		if nm.dead[i] || nm.cut[i] {
			continue
		}
		if g := n.g(); g != nil && g.IsLeader() == wantLeader {
			healthy = append(healthy, i)
		}
	}
	if len(healthy) == 0 {
		for i := range nm.c.nodes {
			if !nm.dead[i] && !nm.cut[i] {
				healthy = append(healthy, i)
			}
		}
	}
	if len(healthy) == 0 {
		return -1
	}
	return healthy[nm.rng.IntN(len(healthy))]
}

// step applies one randomly chosen operation. At most one node is faulty,
// except that a second fault (quorum loss) is injected now and then.
func (nm *chaosNemesis) step() {
	c := nm.c
	faulty := nm.faulty()
	r := nm.rng.Float64()
	op := ""
	switch {
	case len(faulty) > 0 && (r < 0.55 || len(faulty) > 1):
		i := faulty[nm.rng.IntN(len(faulty))]
		if nm.dead[i] {
			op = "restart " + c.nodes[i].id
			c.start(i)
			delete(nm.dead, i)
		} else {
			op = "heal " + c.nodes[i].id
			c.setCut(c.nodes[i], false)
			delete(nm.cut, i)
		}
	case r < 0.65 || (len(faulty) > 0 && r < 0.75):
		i := nm.pick(true)
		if i < 0 {
			return
		}
		to := "" // the most caught-up follower, or a named one
		if j := nm.rng.IntN(len(c.nodes)); nm.rng.IntN(2) == 0 && j != i {
			to = c.nodes[j].id
		}
		op = fmt.Sprintf("transfer %s->%q", c.nodes[i].id, to)
		if g := c.nodes[i].g(); g != nil {
			if err := g.TransferLeadership(to); err != nil {
				op += " (" + shortErr(err) + ")"
			}
		}
	case r < 0.75 || len(faulty) > 0 && r < 0.85:
		i := nm.pick(nm.rng.IntN(2) == 0)
		if i < 0 {
			return
		}
		// Mostly snapshots alone; retention (which removes old messages,
		// and with them what the final check can verify) one time in four.
		if nm.rng.IntN(4) > 0 {
			op = "snapshot " + c.nodes[i].id
			if g := c.nodes[i].g(); g != nil {
				if err := g.Raft().Snapshot().Error(); err != nil {
					op += " (" + shortErr(err) + ")"
				}
			}
			break
		}
		op = "snapshot+retention " + c.nodes[i].id
		if g := c.nodes[i].g(); g != nil {
			if first, err := g.SnapshotAndTruncate(); err != nil {
				op += " (" + shortErr(err) + ")"
			} else {
				op += fmt.Sprintf(" (first index %d)", first)
			}
		}
	case len(faulty) > 0 && r < 0.9:
		op = "wait"
	default:
		i := nm.pick(nm.rng.IntN(3) > 0) // the leader two times in three
		if i < 0 {
			return
		}
		role := "follower"
		if g := c.nodes[i].g(); g != nil && g.IsLeader() {
			role = "leader"
		}
		if nm.rng.IntN(2) == 0 {
			op = "kill " + role + " " + c.nodes[i].id
			c.kill(i)
			nm.dead[i] = true
		} else {
			op = "partition " + role + " " + c.nodes[i].id
			c.setCut(c.nodes[i], true)
			nm.cut[i] = true
		}
	}
	kind, _, _ := strings.Cut(op, " ")
	nm.ops[kind]++
	nm.t.Logf("nemesis: %s", op)
}

// healAll ends the faults: partitions healed, killed nodes restarted.
func (nm *chaosNemesis) healAll() {
	for i := range nm.c.nodes {
		if nm.cut[i] {
			nm.c.setCut(nm.c.nodes[i], false)
			delete(nm.cut, i)
		}
		if nm.dead[i] {
			nm.c.start(i)
			delete(nm.dead, i)
		}
	}
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// chaosSender is one idempotent producer sending until stopped.
func (c *testCluster) chaosSender(id int, stop <-chan struct{}, deadline time.Time, out chan<- []ack, errs chan<- error) {
	pid := fmt.Sprintf("chaos-p%d", id)
	var acks []ack
	defer func() { out <- acks }()
	for seq := int64(0); ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("c%d-%06d", id, seq)
		m := testMessage("T", int32(seq%chaosQueues), key, pid, seq, 200)
		res, err := c.sendAnyway(m, deadline)
		if err != nil {
			errs <- err
			return
		}
		acks = append(acks, ack{key: key, PutResult: res})
	}
}

// sendAnyway is sendRetrying for a cluster under faults: the node it talks
// to may be killed under it (its store and files go away), so every error
// is retried, like an SDK retrying elsewhere; the idempotent producer makes
// that safe. Errors other than the expected ones are retried too but
// counted, so the test can report them.
func (c *testCluster) sendAnyway(m *store.Message, deadline time.Time) (PutResult, error) {
	var last error
	for {
		if time.Now().After(deadline) {
			return PutResult{}, fmt.Errorf("%s not acknowledged before the deadline (last error: %v)", m.UniqKey(), last)
		}
		_, g := c.currentLeaderGroup()
		if g == nil {
			waitBriefly()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		res, err := g.PutMessages(ctx, []*store.Message{m})
		cancel()
		if err == nil {
			return res[0], nil
		}
		last = err
		waitBriefly()
	}
}

func TestGroupRandomized(t *testing.T) {
	seed := chaosSeed(t)
	dur := chaosDuration(t)
	t.Logf("seed %d, %v of faults (reproduce the schedule: RAFTMQ_SEED=%d go test -run TestGroupRandomized -v ./broker/)", seed, dur, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	tl := &termLeaders{raft: map[uint64]map[string]bool{}, serving: map[uint64]map[string]bool{}}
	c := newTestCluster(t, clusterOpts{prodTimings: true, disk: true, sync: true, segmentSize: 1 << 20, onStart: tl.watch})
	c.createTopic("T", chaosQueues)

	const senders = 6
	stop := make(chan struct{})
	out := make(chan []ack, senders)
	errs := make(chan error, senders)
	sendDeadline := time.Now().Add(dur + 90*time.Second)
	for s := 0; s < senders; s++ {
		go c.chaosSender(s, stop, sendDeadline, out, errs)
	}
	nm := &chaosNemesis{t: t, c: c, rng: rng, dead: map[int]bool{}, cut: map[int]bool{}, ops: map[string]int{}}
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		nm.step()
		// The schedule's pause (not a wait for a condition).
		<-time.After(time.Duration(50+rng.IntN(700)) * time.Millisecond)
	}
	nm.healAll()
	t.Logf("nemesis done: %v", nm.ops)
	// Let the senders see the healed group before they stop.
	l := c.leader()
	c.sendConcurrently(2, 20, 64, chaosQueues, nil)
	close(stop)
	var acks []ack
	for s := 0; s < senders; s++ {
		acks = append(acks, <-out...)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	commit := c.waitCaughtUp()
	l = c.leader()
	t.Logf("%d acknowledged chaos sends; final leader %s (term %d), commit index %d", len(acks), l.id, l.g().Term(), commit)
	if len(acks) == 0 {
		t.Fatal("no send was acknowledged")
	}
	tl.check(t)
	checkDense(t, acks)
	chaosCheckQueues(t, c, acks)
	// CommitLogs identical from the newest first entry (a node that
	// installed a snapshot starts there) to the commit index.
	from := int64(0)
	for _, n := range c.nodes {
		from = max(from, logStart(t, n))
	}
	c.checkIdentical(from, commit, chaosQueues)
}

// logStart is the position of n's first log entry: below it a node holds
// nothing (retention, or the zeros before an installed snapshot's position).
func logStart(t *testing.T, n *testNode) int64 {
	t.Helper()
	fi, err := n.g().LogStore().FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	pos, _, err := n.g().LogStore().Locate(fi)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// chaosCheckQueues reads every queue on every node: units are dense (no
// hole between the first readable unit and the max offset) and identical
// across nodes where they overlap, every acknowledged message is at its
// acknowledged queue offset and physical offset on every node, and no
// idempotent send was stored twice.
func chaosCheckQueues(t *testing.T, c *testCluster, acks []ack) {
	t.Helper()
	type loc struct {
		queue int32
		off   int64
		phy   int64
	}
	ref := map[string]loc{}
	refUnits := map[int32]map[int64]store.CQUnit{}
	for ni, n := range c.nodes {
		ms := n.g().Store()
		from := logStart(t, n)
		keys := map[string]loc{}
		for q := int32(0); q < chaosQueues; q++ {
			cq := ms.ConsumeQueues().Get("T", q)
			if cq == nil {
				t.Fatalf("%s: queue %d missing", n.id, q)
			}
			if ni == 0 {
				refUnits[q] = map[int64]store.CQUnit{}
			}
			for off := cq.MinOffset(); off < cq.MaxOffset(); off++ {
				u, err := cq.Get(off)
				if err != nil {
					t.Fatalf("%s: queue %d offset %d (of [%d,%d)): %v", n.id, q, off, cq.MinOffset(), cq.MaxOffset(), err)
				}
				if u.PhyOffset < from {
					continue // blank pre-unit or below retention
				}
				if ru, ok := refUnits[q][off]; ok && ru != u {
					t.Fatalf("%s: queue %d offset %d is %+v, %s has %+v", n.id, q, off, u, c.nodes[0].id, ru)
				} else if !ok {
					refUnits[q][off] = u
				}
				s, err := ms.CommitLog().ReadMessage(u.PhyOffset)
				if err != nil {
					t.Fatalf("%s: queue %d offset %d: read at %d: %v", n.id, q, off, u.PhyOffset, err)
				}
				m, _, err := wire.DecodeMessage(s.B, false)
				s.Release()
				if err != nil {
					t.Fatalf("%s: queue %d offset %d: %v", n.id, q, off, err)
				}
				if m.QueueID != q {
					t.Fatalf("%s: queue %d offset %d holds a message of queue %d", n.id, q, off, m.QueueID)
				}
				k := m.UniqKey()
				if prev, dup := keys[k]; dup && strings.HasPrefix(k, "c") {
					t.Fatalf("%s: %s stored twice: queue %d offsets %d and %d", n.id, k, q, prev.off, off)
				}
				keys[k] = loc{queue: q, off: off, phy: u.PhyOffset}
			}
		}
		if len(keys) > len(ref) {
			ref = keys
		}
		// Every acknowledged message at or after this node's first log
		// entry is at its acknowledged queue and physical offset.
		var keep []ack
		for _, a := range acks {
			if a.QueueOffset >= 0 && a.PhysicalOffset >= from {
				keep = append(keep, a)
				if got, ok := keys[a.key]; !ok || got.queue != a.QueueID || got.off != a.QueueOffset || got.phy != a.PhysicalOffset {
					t.Errorf("%s: acknowledged %s at queue %d offset %d phy %d; stored: %v %+v", n.id, a.key, a.QueueID,
						a.QueueOffset, a.PhysicalOffset, ok, got)
				}
			}
		}
		checkAcked(t, n, keep)
		t.Logf("%s: log from %d, %d acknowledged messages checked in place, %d keys stored", n.id,
			from, len(keep), len(keys))
	}
	// An acknowledged message may be gone only where retention deleted its
	// segment; one whose offset the ack did not carry (a duplicate whose
	// original left the dedup window) must be stored somewhere.
	retired, unknown := 0, 0
	for _, a := range acks {
		if a.QueueOffset < 0 {
			unknown++
			if _, ok := ref[a.key]; !ok {
				t.Errorf("acknowledged %s (offset unknown) is stored nowhere", a.key)
			}
			continue
		}
		kept := false
		for _, n := range c.nodes {
			kept = kept || a.PhysicalOffset >= logStart(t, n)
		}
		if !kept {
			retired++
		}
	}
	t.Logf("%d acknowledged messages below every node's retention point, %d acknowledged without offsets", retired, unknown)
}
