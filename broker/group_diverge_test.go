package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/storage"
)

// cqFaultFS fails the creation of ConsumeQueue files with err while err is
// set: the member's Raft log (the CommitLog) keeps taking entries, but
// applying them cannot write the queue units that need a new queue file.
type cqFaultFS struct {
	storage.FS
	err atomic.Pointer[error]
}

func (f *cqFaultFS) set(err error) {
	if err == nil {
		f.err.Store(nil)
		return
	}
	f.err.Store(&err)
}

// OpenFile implements storage.FS.
func (f *cqFaultFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	if e := f.err.Load(); e != nil && flag&os.O_CREATE != 0 && strings.Contains(name, "consumequeue") {
		return nil, &os.PathError{Op: "open", Path: name, Err: *e}
	}
	return f.FS.OpenFile(name, flag, perm)
}

// divergeCluster is a 3-member in-memory cluster whose ConsumeQueue files
// hold 4 units (a new file every 4 messages per queue), every member on a
// cqFaultFS.
func divergeCluster(t *testing.T, retry time.Duration) (*testCluster, []*cqFaultFS) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, tune: func(cfg *GroupConfig) {
		cfg.Store.MappedFileSizeConsumeQueue = 4 * store.CQUnitSize
		cfg.ApplyRetryTimeout = retry
	}})
	fss := make([]*cqFaultFS, len(c.nodes))
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.startOn(i, func(fsys storage.FS) storage.FS { fss[i] = &cqFaultFS{FS: fsys}; return fss[i] }, nil)
	}
	c.createTopic("T", 2)
	return c, fss
}

// checkSameUnits compares every ConsumeQueue unit (physical offset, size,
// tags code) of queues [0, queues) of topic T across the running members.
func checkSameUnits(t *testing.T, c *testCluster, queues int32) {
	t.Helper()
	for q := range queues {
		var ref []store.CQUnit
		var refID string
		for _, n := range c.nodes {
			g := n.g()
			if g == nil {
				continue
			}
			cq := g.Store().ConsumeQueues().Get("T", q)
			if cq == nil {
				t.Fatalf("%s: queue %d missing", n.id, q)
			}
			var units []store.CQUnit
			for off := cq.MinOffset(); off < cq.MaxOffset(); off++ {
				u, err := cq.Get(off)
				if err != nil {
					t.Fatalf("%s: queue %d offset %d: %v", n.id, q, off, err)
				}
				units = append(units, u)
			}
			if refID == "" {
				ref, refID = units, n.id
				continue
			}
			if len(units) != len(ref) {
				t.Fatalf("queue %d: %s holds %d units, %s %d", q, n.id, len(units), refID, len(ref))
			}
			for i := range units {
				if units[i] != ref[i] {
					t.Fatalf("queue %d offset %d: %s has %+v, %s has %+v", q, i, n.id, units[i], refID, ref[i])
				}
			}
		}
		t.Logf("queue %d: %d units identical on every member", q, len(ref))
	}
}

// A follower whose ConsumeQueue writes fail for a while (ENOSPC) retries
// the entry until they succeed: it never skips a unit, so once the fault
// clears every member holds the same units and the same CommitLog bytes.
func TestGroupApplyRetryKeepsOffsetsIdentical(t *testing.T) {
	t.Parallel()
	c, fss := divergeCluster(t, time.Minute)
	var acks []ack
	for k := range 10 {
		acks = append(acks, c.sendSeq(k, 1<<10))
	}
	c.waitCaughtUp()
	fi := c.followerOf(c.leader())
	f := c.nodes[fi]
	fss[fi].set(unix.ENOSPC)
	// The other two acknowledge these while the follower retries.
	for k := 10; k < 40; k++ {
		acks = append(acks, c.sendSeq(k, 1<<10))
	}
	testutil.WaitFor(t, 10*time.Second, "the follower's dispatch fails", func() bool { return f.g().fsm.failures.Load() > 0 })
	// The follower holds at the failed entry while the fault lasts.
	held := f.g().FSMAppliedIndex() < c.leader().g().FSMAppliedIndex()
	fss[fi].set(nil)
	commit := c.waitCaughtUp()
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
	checkSameUnits(t, c, 2)
	c.checkIdentical(0, commit, 2)
	if err := f.g().ApplyStopped(); err != nil {
		t.Fatalf("follower stopped although the fault cleared within the retry time: %v", err)
	}
	if !held || f.g().fsm.retried.Load() == 0 {
		t.Fatalf("follower went past its failed entry (held %v, %d entries applied on a retry)", held, f.g().fsm.retried.Load())
	}
	t.Logf("follower %s: %d failed dispatch attempts, %d entries applied on a retry", f.id,
		f.g().fsm.failures.Load(), f.g().fsm.retried.Load())
}

// A follower whose ConsumeQueue writes keep failing (EIO) stops applying
// with an ApplyStoppedError naming the entry; the other two keep
// acknowledging. After the fault is fixed and the member restarted it
// re-applies from its last snapshot and ends with the same units and bytes.
func TestGroupApplyStopsOnPersistentFailure(t *testing.T) {
	t.Parallel()
	c, fss := divergeCluster(t, 100*time.Millisecond)
	var acks []ack
	for k := range 10 {
		acks = append(acks, c.sendSeq(k, 1<<10))
	}
	c.waitCaughtUp()
	// A snapshot on every member: the restart below re-applies only what
	// came after it.
	for _, n := range c.nodes {
		if _, err := n.g().SnapshotAndTruncate(); err != nil {
			t.Fatalf("%s: snapshot: %v", n.id, err)
		}
	}
	fi := c.followerOf(c.leader())
	f := c.nodes[fi]
	fss[fi].set(unix.EIO)
	for k := 10; k < 30; k++ {
		acks = append(acks, c.sendSeq(k, 1<<10))
	}
	testutil.WaitFor(t, 10*time.Second, "the follower's FSM stops", func() bool { return f.g().ApplyStopped() != nil })
	var stop *ApplyStoppedError
	if err := f.g().ApplyStopped(); !errors.As(err, &stop) || !errors.Is(err, unix.EIO) || !strings.Contains(err.Error(), "consumequeue") {
		t.Fatalf("stop error %v: want an ApplyStoppedError naming the consume queue file and EIO", err)
	}
	t.Logf("follower %s: %v", f.id, stop)
	stoppedAt := f.g().FSMAppliedIndex()
	if stoppedAt >= stop.Index {
		t.Fatalf("FSM applied index %d at or past the failed entry %d", stoppedAt, stop.Index)
	}
	if _, err := f.g().fsm.Snapshot(); err == nil {
		t.Fatal("a stopped FSM took a snapshot: a restart would not retry the failed entry")
	}
	// The other two keep serving; the stopped member keeps storing the log
	// but applies nothing more.
	for k := 30; k < 50; k++ {
		acks = append(acks, c.sendSeq(k, 1<<10))
	}
	if got := f.g().FSMAppliedIndex(); got != stoppedAt {
		t.Fatalf("stopped FSM moved from %d to %d", stoppedAt, got)
	}
	rs, err := collectRaftStatus(f.g(), false)
	if err != nil {
		t.Fatal(err)
	}
	if rs.ApplyStopped == "" {
		t.Fatalf("raftStatus of the stopped member has no applyStopped: %+v", rs)
	}
	fss[fi].set(nil)
	c.stop(fi)
	c.startOn(fi, func(fsys storage.FS) storage.FS { fss[fi] = &cqFaultFS{FS: fsys}; return fss[fi] }, nil)
	commit := c.waitCaughtUp()
	if err := f.g().ApplyStopped(); err != nil {
		t.Fatalf("restarted member stopped again: %v", err)
	}
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
	checkSameUnits(t, c, 2)
	c.checkIdentical(0, commit, 2)
}

// A leader whose own apply stops answers that entry's senders
// SERVICE_NOT_AVAILABLE (never SEND_OK) and hands leadership away; the
// producer's retry (idempotent) lands on the new leader, and after a
// restart the old leader holds the same units and bytes as the others.
func TestGroupApplyStoppedLeaderStepsDown(t *testing.T) {
	t.Parallel()
	c, fss := divergeCluster(t, 100*time.Millisecond)
	var acks []ack
	for k := range 10 {
		acks = append(acks, c.sendSeq(k, 1<<10))
	}
	c.waitCaughtUp()
	l := c.leader()
	li := slices.Index(c.nodes, l)
	fss[li].set(unix.EIO)
	refused := 0
	for k := 10; k < 30; k++ {
		m := testMessage("T", int32(k%2), fmt.Sprintf("k%d", k), "p", int64(k), 1<<10)
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := c.sendRetrying(m, deadline)
			if err == nil {
				acks = append(acks, ack{key: m.UniqKey(), PutResult: res})
				break
			}
			if !errors.Is(err, store.ErrServiceNotAvailable) || time.Now().After(deadline) {
				t.Fatalf("send %d: %v", k, err)
			}
			refused++
			waitBriefly()
		}
	}
	if refused == 0 {
		t.Fatal("no send was refused: the leader's fault did not bite")
	}
	if err := l.g().ApplyStopped(); err == nil {
		t.Fatal("the faulty leader's FSM did not stop")
	}
	// Every send above was acknowledged in the end, and a stopped FSM
	// acknowledges nothing: another member led them.
	t.Logf("%d sends refused by the stopped leader %s; new leader %s", refused, l.id, c.leader().id)
	fss[li].set(nil)
	c.stop(li)
	c.startOn(li, func(fsys storage.FS) storage.FS { fss[li] = &cqFaultFS{FS: fsys}; return fss[li] }, nil)
	commit := c.waitCaughtUp()
	for _, n := range c.nodes {
		checkAcked(t, n, acks)
	}
	checkSameUnits(t, c, 2)
	c.checkIdentical(0, commit, 2)
}

// TestFSMCaughtUpWaitsForTheFSM: Raft's applied index moves when entries
// are queued for the FSM, so it reaches the commit index while the FSM
// still has them to apply (a restarted member replaying its log, or here a
// follower retrying a failed dispatch). Such a member is not caught up
// (/readyz says 503) until its FSM has applied them.
func TestFSMCaughtUpWaitsForTheFSM(t *testing.T) {
	c, fss := divergeCluster(t, time.Minute)
	c.sendSeq(0, 64)
	c.waitCaughtUp()
	fi := c.followerOf(c.leader())
	f := c.nodes[fi]
	if !f.g().FSMCaughtUp() {
		t.Fatalf("%s not caught up in a quiet group", f.id)
	}
	fss[fi].set(unix.ENOSPC)
	n := 2*c.nodes[0].cfg.Raft.MaxAppendEntries + 1
	for k := 1; k <= n; k++ {
		c.sendSeq(k, 64)
	}
	commit := c.leader().g().Raft().CommitIndex()
	testutil.WaitFor(t, 10*time.Second, "the follower's Raft to hand its FSM every entry", func() bool {
		r := f.g().Raft()
		return r.CommitIndex() >= commit && r.AppliedIndex() >= r.CommitIndex()
	})
	if f.g().FSMCaughtUp() {
		t.Errorf("%s caught up with its FSM at %d and Raft's applied index at %d", f.id, f.g().FSMAppliedIndex(), f.g().Raft().AppliedIndex())
	}
	fss[fi].set(nil)
	testutil.WaitFor(t, 10*time.Second, "the follower's FSM to catch up", func() bool { return f.g().FSMCaughtUp() })
}

// TestFSMCaughtUpInAnIdleGroupAfterElections: every election appends a
// no-op and the new leader's barrier, entries Raft never hands the FSM.
// A group that elects leaders and writes nothing else (a quiet cluster
// through rolling restarts, balanceLeaders runs) must stay caught up: its
// FSM has applied everything it was given.
func TestFSMCaughtUpInAnIdleGroupAfterElections(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, tune: func(g *GroupConfig) { g.Raft.MaxAppendEntries = 4 }})
	c.waitCaughtUp()
	// Each member leads once first, announcing its address (a command);
	// the elections after add only entries the FSM never sees.
	for range 7 {
		old := c.leader()
		if err := old.g().Raft().LeadershipTransfer().Error(); err != nil {
			t.Fatalf("transfer from %s: %v", old.id, err)
		}
		testutil.WaitFor(t, 10*time.Second, "a new serving leader", func() bool {
			n := c.currentLeader()
			return n != nil && n != old
		})
	}
	c.waitCaughtUp()
	for _, n := range c.nodes {
		g := n.g()
		if !g.FSMCaughtUp() {
			t.Errorf("%s not caught up in an idle group: FSM at %d, Raft applied %d, fsm_pending %s",
				n.id, g.FSMAppliedIndex(), g.Raft().AppliedIndex(), g.Raft().Stats()["fsm_pending"])
		}
	}
}

// A leader whose FSM stopped still replicates: its step-down flushes the
// offset commits it coalesced and acknowledged, and the new leader, which
// applies the entry, has them.
func TestGroupApplyStoppedStepDownFlushesOffsets(t *testing.T) {
	// Not parallel: it needs leadership to move by a transfer, and beside
	// other clusters on 2 cores a missed heartbeat moves it by election.
	c, fss := divergeCluster(t, 100*time.Millisecond)
	c.sendSeq(0, 64)
	c.waitCaughtUp()
	l := c.leader()
	has := flushOnTransfer(t, l.g())
	fss[slices.Index(c.nodes, l)].set(unix.EIO)
	for k := 1; ; k++ {
		// Sends until one reaches the leader's FSM and stops it.
		m := testMessage("T", int32(k%2), fmt.Sprintf("k%d", k), "p", int64(k), 64)
		_, _ = c.sendRetrying(m, time.Now().Add(5*time.Second))
		if l.g().ApplyStopped() != nil || !l.g().IsLeader() {
			break
		}
	}
	var moved *testNode
	testutil.WaitFor(t, 15*time.Second, "leadership moves off the apply-stopped leader", func() bool {
		moved = c.currentLeader()
		return moved != nil && moved != l
	})
	if l.g().ApplyStopped() == nil {
		t.Fatal("the faulty leader's FSM did not stop")
	}
	testutil.WaitFor(t, 5*time.Second, "the new leader "+moved.id+" holds the flushed offset", func() bool { return has(moved.g()) })
}

// A leader whose FSM stopped commits the whole of an offsets batch that
// takes several entries: the other members apply the last entry too, and
// the stop is answered after it, so the caller can take the batch as
// committed.
func TestGroupApplyStoppedLeaderCommitsEveryOffsetEntry(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{})
	// No step-down moves leadership while the batch is proposed.
	sd := diskStepDownConfig{interval: time.Hour, gap: time.Hour, retry: time.Hour, recoverRetry: time.Hour}
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.startOn(i, nil, &sd)
	}
	l := c.leader()
	l.g().fsm.stopped.Store(&ApplyStoppedError{Index: 1, Err: errors.New("injected")})
	topic := strings.Repeat("t", 150)
	commits := make([]OffsetCommit, 4000)
	for i := range commits {
		commits[i] = OffsetCommit{Group: "G", Topic: topic, QueueID: int32(i), Offset: int64(i) + 1}
	}
	if n := offsetEntryLen(commits); n > len(commits)/2 {
		t.Fatalf("the batch fits %d of %d commits in its first entry; want several entries", n, len(commits))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stop *ApplyStoppedError
	if err := l.g().CommitOffsets(ctx, commits); !errors.As(err, &stop) {
		t.Fatalf("CommitOffsets on an apply-stopped leader: %v; want its ApplyStoppedError", err)
	}
	last := commits[len(commits)-1]
	for _, n := range c.nodes {
		if n == l {
			continue
		}
		testutil.WaitFor(t, 10*time.Second, n.id+" applies the batch's last entry", func() bool {
			off, ok := n.g().State().ConsumerOffset(last.Group, last.Topic, last.QueueID)
			return ok && off == last.Offset
		})
	}
}
