package broker

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/broker/timerindex"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestCatchupOverRemoting runs the catch-up of a wiped member between real
// nodes: CATCHUP_READ over TCP (checksummed chunks), the members' client.
// Afterwards the rebuilt member's log bytes over the leader's retained
// range equal the leader's, its queues start where the leader's retained
// messages do, QUERY_MESSAGE on it finds messages of the backfilled range
// by key and by UNIQ_KEY, and its timer index equals the leader's; made
// leader, it fires a timer message stored before the wipe, once.
func TestCatchupOverRemoting(t *testing.T) {
	pc := startDiskCluster(t, func(c *BrokerConfig) {
		c.Store.MappedFileSizeCommitLog = 1 << 20
		c.SnapshotBytes = 0
		c.Store.MaxMessageSize = 128 << 10
		c.RaftBatchMaxBytes = 256 << 10
		// Only the rebuilt member (restarted with a short interval below)
		// delivers timers: a fire comes from its index or not at all.
		c.TimerCheckInterval = time.Hour
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
				m := testMessage("T", int32(j%2), fmt.Sprintf("k%d", j), "p", int64(j), 1024)
				m.Properties[wire.PropertyKeys] = fmt.Sprintf("key%d", j)
				ms = append(ms, m)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := pc.groups[pc.leader()].PutMessages(context.Background(), ms)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				waitBriefly()
			}
		}
	}
	put(0, 4000)
	l = pc.leader()
	lg = pc.groups[l]
	// Two timers stored before the wipe: one due soon (fired later by the
	// rebuilt member as leader), one pending throughout.
	due := time.Now().Add(2 * time.Second).UnixMilli()
	for _, m := range []*store.Message{timerMessage("tmr", due), timerMessage("tmr-later", due+3_600_000)} {
		if _, err := lg.PutMessages(context.Background(), []*store.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	f := (l + 1) % 3
	pc.wipeBehindSnapshot(t, lg, f, func() { put(4000, 400) })
	pc.cfgs[f].TimerCheckInterval = 10 * time.Millisecond
	pc.startNode(f)
	fg := pc.groups[f]
	testutil.WaitFor(t, 60*time.Second, "the rebuilt member catches up", func() bool {
		return fg.catchup.completed.Load() > 0 && !fg.catchupBlocksVoting()
	})
	cs := fg.CatchupStatus()
	t.Logf("caught up over CATCHUP_READ: %d bytes, %d units in %d ms", cs.BytesDone, cs.Units, cs.TookMillis)
	lmin := lg.LogStore().MinPosition()
	if cs.BytesDone == 0 || fg.LogStore().MinPosition() != lmin {
		t.Fatalf("rebuilt member's log starts at %d, the leader's at %d (%+v)", fg.LogStore().MinPosition(), lmin, cs)
	}
	end, err := lg.LogStore().EndOf(lg.lastSnapshotIndex())
	if err != nil {
		t.Fatal(err)
	}
	for pos := lmin; pos < end; {
		a, err := lg.LogStore().ReadRange(pos, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fg.LogStore().ReadRange(pos, len(a))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("log bytes at %d differ (%v)", pos, err)
		}
		pos += int64(len(a))
	}
	for q := int32(0); q < 2; q++ {
		lcq, fcq := lg.Store().ConsumeQueues().Get("T", q), fg.Store().ConsumeQueues().Get("T", q)
		u, err := fcq.Get(fcq.MinOffset())
		if err != nil || u.PhyOffset < lmin {
			t.Fatalf("queue %d: rebuilt member's first unit %+v (%v)", q, u, err)
		}
		if lu, err := lcq.Get(fcq.MinOffset()); err != nil || lu != u {
			t.Fatalf("queue %d offset %d: leader %+v, rebuilt %+v (%v)", q, fcq.MinOffset(), lu, u, err)
		}
		if fcq.MinOffset() > 0 {
			if lu, err := lcq.Get(fcq.MinOffset() - 1); err == nil && lu.PhyOffset >= lmin {
				t.Fatalf("queue %d: rebuilt member lacks offset %d, whose message the leader retains", q, fcq.MinOffset()-1)
			}
		}
	}

	checkRebuiltIndexAndTimers(t, pc, l, f, due)
}

// checkRebuiltIndexAndTimers: QUERY_MESSAGE on the rebuilt member f finds
// messages of the backfilled range by key and by UNIQ_KEY; its timer
// records equal the leader's; made leader, it delivers the timer "tmr"
// stored before its wipe exactly once.
func checkRebuiltIndexAndTimers(t *testing.T, pc *procCluster, l, f int, due int64) {
	t.Helper()
	fg, lg := pc.groups[f], pc.groups[l]
	addr := pc.nodes[f].Addr()
	end := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	// k3999 was stored before the wipe, k4300 while the member was down:
	// both below the snapshot it installed.
	for _, q := range []struct{ key, want string }{{"k3999", "k3999"}, {"key3999", "k3999"}, {"k4300", "k4300"}, {"key4300", "k4300"}} {
		r := pc.call(addr, remoting.RequestQueryMessage, map[string]string{"topic": "T", "key": q.key, "maxNum": "32",
			"beginTimestamp": "0", "endTimestamp": end}, nil)
		if r.Code != remoting.ResponseSuccess {
			t.Fatalf("QUERY_MESSAGE %q on the rebuilt member: %d %s (%+v)", q.key, r.Code, r.Remark, fg.CatchupStatus())
		}
		msgs := decodeAll(t, r.Body)
		if len(msgs) != 1 || msgs[0].Properties[wire.PropertyUniqKey] != q.want {
			t.Fatalf("QUERY_MESSAGE %q on the rebuilt member: %d messages", q.key, len(msgs))
		}
	}
	if cs := fg.CatchupStatus(); cs.Indexed == 0 {
		t.Fatalf("the catch-up indexed nothing: %+v", cs)
	} else {
		t.Logf("index rebuilt for %d backfilled messages", cs.Indexed)
	}

	// The rebuilt member holds the leader's timer records (the snapshot's
	// image), including the two stored before its wipe.
	testutil.WaitFor(t, 30*time.Second, "the rebuilt member applies everything", func() bool {
		return fg.FSMAppliedIndex() >= lg.FSMAppliedIndex()
	})
	fr, lr := timerRecords(t, fg.TimerIndex()), timerRecords(t, lg.TimerIndex())
	if len(lr) != 2 || !maps.EqualFunc(fr, lr, slices.Equal) {
		t.Fatalf("timer records: rebuilt %v, leader %v", fr, lr)
	}

	testutil.WaitFor(t, 30*time.Second, "the rebuilt member leads", func() bool {
		if fg.IsLeader() {
			return true
		}
		if cur := pc.leader(); cur >= 0 && cur != f {
			_ = pc.groups[cur].TransferLeadership(fg.SelfID())
		}
		return fg.IsLeader()
	})
	if now := time.Now().UnixMilli(); now > due {
		t.Logf("the timer was due %d ms before the rebuilt member led", now-due)
	}
	fired := func(g *Group) int {
		n := 0
		cq := g.Store().ConsumeQueues().Get("T", 0)
		for o := cq.MinOffset(); o < cq.MaxOffset(); o++ {
			r, err := g.Store().GetMessage("", "T", 0, o, 1, nil)
			if err != nil || len(r.Messages) == 0 {
				continue
			}
			if m, _, err := wire.DecodeMessage(r.Messages[0], false); err == nil && m.Properties[wire.PropertyUniqKey] == "tmr" {
				n++
			}
		}
		return n
	}
	bucket := timerindex.BucketOf(due)
	testutil.WaitFor(t, 30*time.Second, "the rebuilt leader fires the timer and moves past it", func() bool {
		c := fg.TimerCursor()
		return c.Bucket > bucket || c.Bucket == bucket && c.Fired >= 1
	})
	testutil.WaitFor(t, 30*time.Second, "every member applies the fire", func() bool {
		for _, g := range pc.groups {
			if g.FSMAppliedIndex() < fg.FSMAppliedIndex() {
				return false
			}
		}
		return true
	})
	for i, g := range pc.groups {
		if n := fired(g); n != 1 {
			t.Fatalf("member %d holds %d deliveries of the timer stored before the wipe, want 1", i, n)
		}
	}
}
