package broker

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// learnerCatchup is the test cluster's learnerProbe: the member's own
// CatchupStatus, read in process (the harness has no remoting servers).
func (c *testCluster) learnerCatchup(_ context.Context, id string) (learnerStatus, error) {
	for _, n := range c.nodes {
		if n.id == id {
			if g := n.g(); g != nil {
				return learnerStatus{catchup: g.CatchupStatus(), segmentSize: g.SegmentSize()}, nil
			}
			return learnerStatus{}, fmt.Errorf("%s is down", id)
		}
	}
	return learnerStatus{}, fmt.Errorf("no member %s", id)
}

// heldSource is a catch-up source whose log reads wait for gate to close:
// a learner's catch-up held at its first chunk.
type heldSource struct {
	catchupSource
	gate <-chan struct{}
}

func (s heldSource) readLog(ctx context.Context, pos int64, n int) ([]byte, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.catchupSource.readLog(ctx, pos, n)
}

// fillAndTrim fills the group with about total bytes of messages to queues
// of topic T, then has every member snapshot and drop its oldest two
// segments, so that a member joining now is sent a snapshot and lacks the
// retained messages before it. It returns the acks.
func fillAndTrim(t *testing.T, c *testCluster, total int64, body, seg int, queues int32) []ack {
	t.Helper()
	msgs := int(total / int64(body+200))
	var acks []ack
	for sent := 0; sent < msgs; sent += 20_000 { // sendConcurrently gives each call 2 minutes
		acks = append(acks, c.sendConcurrently(16, min(20_000, msgs-sent), body, queues, nil)...)
	}
	c.waitCaughtUp()
	for _, n := range c.nodes {
		if err := n.g().Raft().Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		cut := n.g().LogStore().MinPosition() + 2*int64(seg)
		idx, err := n.g().LogStore().FirstIndexFrom(cut)
		if err != nil || idx == 0 {
			t.Fatalf("%s: first index from %d: %d, %v", n.id, cut, idx, err)
		}
		if _, err := n.g().LogStore().DeleteSegmentsBefore(idx); err != nil {
			t.Fatal(err)
		}
	}
	return acks
}

// adminAdd runs ADD_RAFT_MEMBER through the broker's processor on leader
// g (what `raftmq admin addMember/replaceMember` sends) and decodes the
// answer.
func adminAdd(ctx context.Context, g *Group, h *wire.RaftMemberRequestHeader) (*MemberChange, error) {
	p := &memberAdminProcessor{rep: g, log: zap.NewNop()}
	resp, err := p.add(ctx, nil, remoting.NewRequest(remoting.RequestAddRaftMember, h, nil))
	if err != nil {
		return nil, err
	}
	var res MemberChange
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &res); err != nil {
			return nil, err
		}
	}
	if resp.Code != remoting.ResponseSuccess {
		return &res, fmt.Errorf("addMember: code %d: %s", resp.Code, resp.Remark)
	}
	return &res, nil
}

// adminRemove runs REMOVE_RAFT_MEMBER through the processor on g.
func adminRemove(ctx context.Context, g *Group, id string) error {
	p := &memberAdminProcessor{rep: g, log: zap.NewNop()}
	resp, err := p.remove(ctx, nil, remoting.NewRequest(remoting.RequestRemoveRaftMember, &wire.RaftMemberRequestHeader{MemberID: id}, nil))
	if err == nil && resp.Code != remoting.ResponseSuccess {
		err = fmt.Errorf("removeMember: code %d: %s", resp.Code, resp.Remark)
	}
	return err
}

// TestGroupPromotionWaitsForCatchup: a learner that joined through a
// snapshot has a current Raft log tail long before it holds the retained
// messages before the snapshot. With its catch-up held at the first
// chunk, addMember does not promote it (a bounded add times out saying the
// catch-up is pending, and the leader's RAFT_STATUS lists the wait); once
// the catch-up may run, it completes and the learner is promoted.
func TestGroupPromotionWaitsForCatchup(t *testing.T) {
	const seg = 1 << 20
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) { g.SnapshotBytes = 0 }})
	c.createTopic("T", 2)
	fillAndTrim(t, c, 4<<20, 1024, seg, 2)
	l := c.leader()

	gate := make(chan struct{})
	c.onStart = func(n *testNode, g *Group) {
		if n.id == "n3" {
			g.startCatchup(func(addr string) catchupSource { return heldSource{catchupSource: c.catchupSource(addr), gate: gate} })
		}
	}
	n3 := addTestNode(t, c, "n3", 3)
	addr, _ := n3.cfg.Raft.SelfAddr()
	ctx := context.Background()
	if _, err := l.g().AddMember(ctx, "n3", addr, AddMemberOptions{Learner: true}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the learner installs the snapshot and its Raft log catches up", func() bool {
		p := l.g().progress.get("n3")
		return n3.g().catchupBlocksVoting() && p.match+DefaultPromoteMaxLag >= l.g().Raft().LastIndex()
	})
	if cq := n3.g().Store().ConsumeQueues().Get("T", 0); cq == nil || cq.MinOffset() == 0 {
		t.Fatal("the learner should lack the messages before the snapshot while its catch-up is held")
	}

	// A bounded add fails on the catch-up, not on the Raft lag.
	res, err := l.g().AddMember(ctx, "n3", addr, AddMemberOptions{Timeout: 1500 * time.Millisecond})
	if !errors.Is(err, ErrCatchUpTimeout) || !strings.Contains(err.Error(), "catch-up is pending") || res.Lag > DefaultPromoteMaxLag {
		t.Fatalf("bounded add while the catch-up is held: %+v, %v", res, err)
	}
	t.Logf("bounded add: %v", err)
	if got := membersOf(t, l.g()); !strings.Contains(got, "n3:Nonvoter") {
		t.Fatalf("configuration after the refused promotion: %s", got)
	}

	// The admin path waits; the leader shows what for.
	type result struct {
		res *MemberChange
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := adminAdd(ctx, l.g(), &wire.RaftMemberRequestHeader{MemberID: "n3", RaftAddr: addr, TimeoutMillis: 60_000})
		done <- result{res, err}
	}()
	testutil.WaitFor(t, 30*time.Second, "the leader reports the wait for n3's catch-up", func() bool {
		st, err := collectRaftStatus(l.g(), true)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Promotions {
			if p.ID == "n3" && p.Waiting == "catchup" && p.Catchup != nil && p.Catchup.Pending && p.WaitedMillis >= 1000 {
				return true
			}
		}
		return false
	})
	select {
	case r := <-done:
		t.Fatalf("promoted while the catch-up is held: %+v, %v", r.res, r.err)
	default:
	}
	if got := membersOf(t, l.g()); !strings.Contains(got, "n3:Nonvoter") {
		t.Fatalf("configuration while the catch-up is held: %s", got)
	}
	if n := promtest.CollectAndCount(promotionCollector{l.g()}, "raftmq_broker_raft_promotion_waiting"); n != 1 {
		t.Fatalf("the leader exports %d promotion waits, want 1", n)
	}

	close(gate)
	var r result
	select {
	case r = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("no promotion within 90 s of the catch-up's release")
	}
	if r.err != nil || r.res.Suffrage != "Voter" {
		t.Fatalf("promotion after the catch-up: %+v, %v", r.res, r.err)
	}
	cs := n3.g().CatchupStatus()
	if cs.Pending || n3.g().catchup.completed.Load() == 0 || cs.BytesDone == 0 {
		t.Fatalf("promoted, but the learner's catch-up: %+v", cs)
	}
	if ps := l.g().Promotions(); len(ps) != 0 {
		t.Fatalf("promotion waits left after the promotion: %+v", ps)
	}
	if n := promtest.CollectAndCount(promotionCollector{l.g()}, "raftmq_broker_raft_promotion_waiting"); n != 0 {
		t.Fatalf("the leader exports %d promotion waits after the promotion", n)
	}
	t.Logf("promoted after %d ms with %d log bytes and %d queue units fetched", r.res.CatchUpMillis, cs.BytesDone, cs.Units)
}

// replaceBytes is how much retained data TestGroupReplaceMemberWhileProducing
// puts in the group: RAFTMQ_REPLACE_BYTES (the 2 GiB acceptance
// profile), else a few MiB.
func replaceBytes(t *testing.T) int64 {
	if v := os.Getenv("RAFTMQ_REPLACE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("RAFTMQ_REPLACE_BYTES=%q: %v", v, err)
		}
		return n
	}
	return 6 << 20
}

// TestGroupReplaceMemberWhileProducing is issue 14's acceptance test: a
// follower of a group holding retained messages is replaced by a fresh,
// empty member (new id and address, raftJoin) through the admin
// processors (addMember then removeMember, as replaceMember sends them)
// while producers keep sending. The new member is promoted only after its
// full-data catch-up; then all three replicas hold the same CommitLog
// bytes (per-segment SHA-256 over the common range) and the same queue
// units at the same offsets, every acknowledged retained message is
// readable on each, and the new member serves the oldest offsets, directly
// and as leader. It logs the time to full redundancy, the catch-up rate
// and producer p99 before and during.
func TestGroupReplaceMemberWhileProducing(t *testing.T) {
	total := replaceBytes(t)
	large := total >= 256<<20
	body, seg := 1024, 1<<20
	if large {
		body, seg = 4096, 64<<20
	}
	const queues = 4
	c := newTestCluster(t, clusterOpts{sync: true, disk: true, segmentSize: seg, tune: func(g *GroupConfig) {
		g.SnapshotBytes = 0
		adaptive := os.Getenv("RAFTMQ_REPLACE_ADAPTIVE") != "false"
		g.CatchupAdaptive = adaptive
		if v := os.Getenv("RAFTMQ_REPLACE_RATE"); v != "" {
			g.CatchupBytesPerSecond, _ = strconv.ParseInt(v, 10, 64)
		} else if adaptive && !large {
			g.CatchupBytesPerSecond = 4 << 20 // slow enough that producers overlap the catch-up
		}
		if large {
			// The store's disk guard must not delete the retained data
			// the test is about on a disk others share.
			g.Store.CleanResourceInterval = time.Hour
		}
	}})
	if large {
		logDiskSpeed(t, filepath.Dir(c.nodes[0].cfg.Store.StorePathRootDir))
	}
	c.createTopic("T", queues)
	fillStart := time.Now()
	old := fillAndTrim(t, c, total, body, seg, queues)
	l := c.leader()
	leaderMin := l.g().LogStore().MinPosition()
	t.Logf("filled %d messages in %v; the leader retains %d bytes from position %d", len(old),
		time.Since(fillStart).Round(time.Millisecond), l.g().LogStore().NextPosition()-leaderMin, leaderMin)

	baseFor := 3 * time.Second
	if large {
		baseFor = 15 * time.Second
	}
	base := sendFor(t, c, 4, body, baseFor)
	t.Logf("load average before the replacement: %s", loadAvg())
	// The fresh member n3 starts before the producers (it joins c.nodes,
	// which they read) and waits with raftJoin until it is added.
	n3 := addTestNode(t, c, "n3", 3)
	addr, _ := n3.cfg.Raft.SelfAddr()
	stop := make(chan struct{})
	var phases phaseClock
	phases.mark("join (add, snapshot)")
	var all []time.Duration
	var allAt []time.Time
	var late []ack
	var prod sync.WaitGroup
	prod.Add(2)
	go func() {
		defer prod.Done()
		all, allAt, late = sendUntilAt(c, 4, body, stop)
	}()
	go func() {
		defer prod.Done()
		phases.watchCatchup(n3.g, stop)
	}()
	var duty *dutyCycle
	if d := replaceDuty(t); d > 0 {
		duty = &dutyCycle{d: d}
		h := duty.hook
		catchupHoldHook.Store(&h)
		t.Cleanup(func() { catchupHoldHook.Store(nil) })
		prod.Add(1)
		go func() {
			defer prod.Done()
			duty.run(n3.g, l.g, stop)
		}()
	}

	// Replace a follower by n3.
	gone := c.nodes[c.followerOf(l)]
	start := time.Now()
	ctx := context.Background()
	sawPending := false
	var res *MemberChange
	var addErr error
	added := make(chan struct{})
	go func() {
		defer close(added)
		for {
			lg := c.leader().g()
			res, addErr = adminAdd(ctx, lg, &wire.RaftMemberRequestHeader{MemberID: "n3", RaftAddr: addr, TimeoutMillis: (30 * time.Minute).Milliseconds()})
			if addErr == nil || !strings.Contains(addErr.Error(), "not leader") {
				return
			}
		}
	}()
	testutil.WaitFor(t, 40*time.Minute, "n3 is added and promoted", func() bool {
		// The configuration first: pending, once cleared, stays so.
		voter := strings.Contains(membersOf(t, n3.g()), "n3:Voter")
		if n3.g().catchupBlocksVoting() {
			sawPending = true
			if voter {
				t.Fatal("n3 is a voter while its catch-up is pending")
			}
		}
		select {
		case <-added:
			return true
		default:
			return false
		}
	})
	if addErr != nil || res.Suffrage != "Voter" {
		t.Fatalf("addMember n3: %+v, %v", res, addErr)
	}
	redundant := time.Since(start)
	promoted := time.Now()
	phases.mark("voter (4 members)")
	t.Logf("load average at the promotion: %s", loadAvg())
	// With a large group, the producers go on for a while with the fourth
	// member replicating live, and again after the removal: the latency
	// floor no catch-up pace controls.
	hold := func() {
		if large {
			time.Sleep(10 * time.Second)
		}
	}
	hold()
	if !sawPending {
		t.Fatal("n3 never had a pending catch-up: it did not join through a snapshot")
	}
	if cs := n3.g().CatchupStatus(); cs.Pending || n3.g().catchup.completed.Load() == 0 {
		t.Fatalf("n3 promoted before its catch-up completed: %+v", cs)
	}
	removing := time.Now()
	phases.mark("removeMember")
	testutil.WaitFor(t, time.Minute, "removeMember "+gone.id, func() bool {
		err := adminRemove(ctx, c.leader().g(), gone.id)
		if err != nil {
			t.Logf("removeMember %s: %v (retrying)", gone.id, err)
		}
		return err == nil
	})
	// In this test the removed member's clean stop (its flushes) shares
	// the producers' disk; a dead or moved host's would not.
	phases.mark("stop removed member")
	gi, _ := nodeByID(c, gone.id)
	c.stop(gi)
	removed := time.Now()
	phases.mark("after (3 members)")
	hold()
	close(stop)
	prod.Wait()
	// During the replacement: add, catch-up, promotion, removal (not the
	// measuring holds in between and after).
	during := append(within(all, allAt, start, promoted), within(all, allAt, removing, removed)...)
	// The checks below compare the group's three members; the retired
	// host's data goes.
	c.nodes = slices.Delete(c.nodes, gi, gi+1)
	if err := os.RemoveAll(gone.cfg.Store.StorePathRootDir); err != nil {
		t.Fatal(err)
	}

	cs := n3.g().CatchupStatus()
	rate := 0.0
	if cs.TookMillis > 0 {
		rate = float64(cs.BytesDone) / 1e6 / (float64(cs.TookMillis) / 1e3)
	}
	t.Logf("full redundancy (n3 added, caught up, promoted) %v after addMember: %d log bytes and %d queue units fetched in %d ms (%.1f MB/s), pace %d B/s",
		redundant.Round(time.Millisecond), cs.BytesDone, cs.Units, cs.TookMillis, rate, n3.cfg.CatchupBytesPerSecond)
	t.Logf("adaptive pace %v (floor %d B/s)", n3.cfg.CatchupAdaptive, n3.cfg.CatchupMinBytesPerSecond)
	t.Logf("producer p50/p99 before %v / %v (%d sends), during the replacement %v / %v (%d sends)",
		pct(base, 50), pct(base, 99), len(base), pct(during, 50), pct(during, 99), len(during))
	phases.report(t, base, all, allAt, time.Now())
	if duty != nil {
		duty.report(t, all, allAt)
	}
	if cs.BytesDone == 0 || cs.Units == 0 || len(during) == 0 {
		t.Fatalf("nothing was fetched (%+v) or nothing sent during the replacement (%d)", cs, len(during))
	}

	commit := c.waitCaughtUp()
	from := int64(0)
	for _, n := range c.nodes {
		if n.g() != nil && n != n3 {
			from = max(from, n.g().LogStore().MinPosition())
		}
	}
	if m := n3.g().LogStore().MinPosition(); m > from {
		t.Fatalf("n3's log starts at %d, its peers hold data from %d", m, from)
	}
	compareSegments(t, c, from, commit)
	c.checkIdentical(from, commit, queues)
	checkRetainedUnits(t, c, n3, from, queues)
	var keep []ack
	for _, a := range append(old, late...) {
		if a.PhysicalOffset >= from {
			keep = append(keep, a)
		}
	}
	for _, n := range c.nodes {
		if n.g() != nil {
			checkAcked(t, n, keep)
		}
	}
	t.Logf("%d acknowledged retained messages readable at their offsets on all three members", len(keep))

	readOldest := func(who string) {
		for q := int32(0); q < queues; q++ {
			cq := n3.g().Store().ConsumeQueues().Get("T", q)
			r, err := n3.g().Store().GetMessage("g", "T", q, cq.MinOffset(), 32, nil)
			if err != nil || len(r.Messages) == 0 {
				t.Fatalf("%s: queue %d: read from the oldest offset %d on n3: %d messages, %v (%+v)", who, q, cq.MinOffset(), len(r.Messages), err, r.Status)
			}
			m, _, err := wire.DecodeMessage(r.Messages[0], false)
			if err != nil || r.QueueOffsets[0] != cq.MinOffset() || m.Topic != "T" || m.QueueID != q {
				t.Fatalf("%s: queue %d: first message read at offset %d (%v), asked %d", who, q, r.QueueOffsets[0], err, cq.MinOffset())
			}
		}
	}
	readOldest("follower")
	testutil.WaitFor(t, 30*time.Second, "n3 leads", func() bool {
		if cur := c.leader(); cur != n3 {
			if err := cur.g().TransferLeadership("n3"); err != nil {
				t.Logf("transfer to n3: %v (retrying)", err)
			}
		}
		return n3.g().IsLeader()
	})
	readOldest("leader")
}

// compareSegments compares the running members' CommitLog segment by
// segment over [from, end of index): each segment's SHA-256 must match.
func compareSegments(t *testing.T, c *testCluster, from int64, index uint64) {
	t.Helper()
	var ref map[int64][32]byte
	var refID string
	for _, n := range c.nodes {
		if n.g() == nil {
			continue
		}
		end, err := n.g().LogStore().EndOf(index)
		if err != nil {
			t.Fatal(err)
		}
		d := map[int64][32]byte{}
		q := n.g().Store().CommitLog().Queue()
		for pos := from; pos < end; {
			mf := q.FindByOffset(pos)
			if mf == nil {
				t.Fatalf("%s: no segment at %d", n.id, pos)
			}
			segEnd := min(end, mf.FileFromOffset()+int64(mf.Size()), mf.FileFromOffset()+int64(mf.WrotePosition()))
			s, err := mf.Read(int(pos-mf.FileFromOffset()), int(segEnd-pos))
			if err != nil {
				t.Fatalf("%s: read [%d,%d): %v", n.id, pos, segEnd, err)
			}
			d[mf.FileFromOffset()] = sha256.Sum256(s.B)
			s.Release()
			pos = mf.FileFromOffset() + int64(mf.Size())
		}
		if ref == nil {
			ref, refID = d, n.id
			continue
		}
		if len(d) != len(ref) {
			t.Fatalf("%s holds %d segments over [%d, end of %d), %s %d", n.id, len(d), from, index, refID, len(ref))
		}
		for off, h := range ref {
			if d[off] != h {
				t.Fatalf("segment %020d: %s and %s differ", off, n.id, refID)
			}
		}
	}
	t.Logf("%d CommitLog segments identical (SHA-256) on all members from %d", len(ref), from)
}

// logDiskSpeed logs dd's sequential write speed (1 GiB, fdatasync) on dir.
func logDiskSpeed(t *testing.T, dir string) {
	f := filepath.Join(dir, "dd.bin")
	out, err := exec.Command("dd", "if=/dev/zero", "of="+f, "bs=1M", "count=1024", "conv=fdatasync").CombinedOutput()
	_ = os.Remove(f)
	if err != nil {
		t.Logf("dd on %s: %v %s", dir, err, out)
		return
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("disk %s: %s", dir, lines[len(lines)-1])
}

// TestLearnerProbeOverRemoting: the leader's probe (the Controller's
// RAFT_STATUS call, the address from the name servers' route) reads a
// member's catch-up as that member reports it: pending while a wiped
// member fetches the retained data, done afterwards; an id that answers
// nowhere is an error, never "done".
func TestLearnerProbeOverRemoting(t *testing.T) {
	pc := startDiskCluster(t, func(c *BrokerConfig) {
		c.Store.MappedFileSizeCommitLog = 1 << 20
		c.SnapshotBytes = 0
		c.Store.MaxMessageSize = 128 << 10
		c.RaftBatchMaxBytes = 256 << 10
		// ~4 MB to fetch: a second or two pending, ample for the probe
		// to see it, without the 4-8 s of a 1 MiB/s pace.
		c.CatchupBytesPerSecond = 4 << 20
	})
	l := pc.leader()
	lg := pc.groups[l]
	if err := lg.UpdateTopic(context.Background(), wire.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	put := func(from, n int) {
		for i := from; i < from+n; i += 16 {
			var ms []*store.Message
			for j := i; j < i+16; j++ {
				ms = append(ms, testMessage("T", int32(j%2), fmt.Sprintf("k%d", j), "p", int64(j), 1024))
			}
			testutil.WaitFor(t, 30*time.Second, "a put", func() bool {
				_, err := pc.groups[pc.leader()].PutMessages(context.Background(), ms)
				return err == nil
			})
		}
	}
	put(0, 4000)
	f := (l + 1) % 3
	fid := pc.cfgs[f].Raft.DLegerSelfID
	probeStatus := func(id string) (learnerStatus, error) {
		p := pc.groups[pc.leader()].promote.probe.Load()
		if p == nil {
			t.Fatal("the leader has no learner probe")
		}
		return (*p)(context.Background(), id)
	}
	probe := func(id string) (CatchupStatus, error) {
		ls, err := probeStatus(id)
		return ls.catchup, err
	}
	if _, err := probe("n9"); err == nil {
		t.Fatal("probe of an unknown member succeeded")
	}
	pc.wipeBehindSnapshot(t, lg, f, func() { put(4000, 400) })
	pc.startNode(f)
	var seen CatchupStatus
	testutil.WaitFor(t, 60*time.Second, "the leader's probe sees "+fid+"'s catch-up pending", func() bool {
		cs, err := probe(fid)
		seen = cs
		return err == nil && cs.Pending
	})
	t.Logf("pending over RAFT_STATUS: %+v", seen)
	testutil.WaitFor(t, 60*time.Second, "the leader's probe sees "+fid+"'s catch-up done", func() bool {
		cs, err := probe(fid)
		return err == nil && !cs.Pending && cs.TookMillis > 0
	})
	if pc.groups[f].catchupBlocksVoting() {
		t.Fatal("probe says done, the member says pending")
	}
	// The promotion compares the learner's segment size with its own.
	if ls, err := probeStatus(fid); err != nil || ls.segmentSize != 1<<20 {
		t.Fatalf("probe of %s: segment size %d (%v), want %d", fid, ls.segmentSize, err, 1<<20)
	}
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute figures ("?" elsewhere).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
