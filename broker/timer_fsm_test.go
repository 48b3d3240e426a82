package broker

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/broker/timerindex"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// The cursor moves only from where the proposer saw it; an advance moves
// what the leader had not seen; entries at or below the applied mark (a
// restart's re-apply) change the cursor but not the files again.
func TestTimerProgressApply(t *testing.T) {
	x, err := timerindex.Open(storage.NewFaultFS(1), "/t/timer", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	f := &fsm{st: newState(16, 60_000), timers: x, log: zap.NewNop()}
	rec := func(q int64) timerindex.Record { return timerindex.Record{DeliverMs: 10_500, QueueOffset: q} }
	if err := x.Append(10, []timerindex.Record{rec(0), rec(1), rec(2)}); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(11, []timerindex.Record{rec(3)}); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(20, []timerindex.Record{rec(4)}); err != nil {
		t.Fatal(err)
	}
	apply := func(i uint64, p TimerProgress) {
		t.Helper()
		if r := f.applyTimerProgress(&raft.Log{Index: i}, p).(*applyResult); r.err != nil {
			t.Fatal(r.err)
		}
	}
	cursor := func() TimerCursor { return f.st.timer }

	apply(1, TimerProgress{From: TimerCursor{}, To: TimerCursor{Bucket: 10}, Done: 0})
	apply(2, TimerProgress{From: TimerCursor{Bucket: 10}, To: TimerCursor{Bucket: 10, Fired: 2}})
	// Stale (an earlier leader's view) and malformed moves change nothing.
	apply(3, TimerProgress{From: TimerCursor{Bucket: 10}, To: TimerCursor{Bucket: 10, Fired: 1}})
	apply(4, TimerProgress{From: TimerCursor{Bucket: 10, Fired: 2}, To: TimerCursor{Bucket: 10, Fired: 1}})
	if c := cursor(); c != (TimerCursor{Bucket: 10, Fired: 2}) {
		t.Fatalf("cursor %+v", c)
	}
	// The leader delivered 2 of bucket 10 and moves to 20: record 2 and
	// bucket 11 arrived after it looked and move to 20.
	apply(5, TimerProgress{From: TimerCursor{Bucket: 10, Fired: 2}, To: TimerCursor{Bucket: 20}, Done: 2})
	got, total, err := x.Read(20, 0, 10)
	if err != nil || total != 3 || got[0].QueueOffset != 4 || got[1].QueueOffset != 2 || got[2].QueueOffset != 3 {
		t.Fatalf("bucket 20 = %v (%d) %v", got, total, err)
	}
	if x.Buckets() != 1 || x.Applied() != 5 {
		t.Fatalf("%d buckets, applied %d", x.Buckets(), x.Applied())
	}
	// A re-apply of entry 5 after a restart (cursor restored to before it)
	// moves the cursor again but copies nothing twice.
	f.st.timer = TimerCursor{Bucket: 10, Fired: 2}
	apply(5, TimerProgress{From: TimerCursor{Bucket: 10, Fired: 2}, To: TimerCursor{Bucket: 20}, Done: 2})
	if _, total, _ := x.Read(20, 0, 10); total != 3 || cursor() != (TimerCursor{Bucket: 20}) {
		t.Fatalf("re-apply: bucket 20 holds %d, cursor %+v", total, cursor())
	}
}

// The snapshot image carries a moved cursor under "timer" and leaves the
// old golden image's bytes as they were while the cursor is zero.
func TestTimerCursorInSnapshotImage(t *testing.T) {
	s := newState(0, 0)
	s.timer = TimerCursor{Bucket: 1700000000, Fired: 3}
	b, err := json.Marshal(s.imageLocked())
	if err != nil {
		t.Fatal(err)
	}
	const want = `"queues":null,"timer":{"bucket":1700000000,"fired":3}}`
	if !strings.HasSuffix(string(b), want) {
		t.Fatalf("image %s lacks %s", b, want)
	}
	var img stateImage
	if err := json.Unmarshal(b, &img); err != nil {
		t.Fatal(err)
	}
	r := newState(0, 0)
	r.loadLocked(img)
	if r.timer != s.timer {
		t.Fatalf("restored cursor %+v", r.timer)
	}
	// An image from before timers restores a zero cursor.
	r.loadLocked(stateImage{})
	if r.timer != (TimerCursor{}) {
		t.Fatalf("cursor from an old image %+v", r.timer)
	}
}

// timerMessage is a message as applyTimer leaves it: in the timer topic,
// due at dueMs, for topic T queue 0.
func timerMessage(key string, dueMs int64) *store.Message {
	m := testMessage(wire.TopicTimer, 0, key, "", 0, 64)
	m.Properties = map[string]string{wire.PropertyUniqKey: key, wire.PropertyTimerOutMs: strconv.FormatInt(dueMs, 10),
		wire.PropertyRealTopic: "T", wire.PropertyRealQueueID: "0"}
	return m
}

// TestTimerIndexAfterSnapshotInstall: a follower that installs a snapshot
// takes the cursor and the timer index from it (the record of "mid", a
// timer stored before the snapshot and still pending, which it never
// applied), drops its own buckets before the cursor, and indexes the timer
// messages after the snapshot as the leader does: its records equal the
// leader's bucket by bucket, position by position.
func TestTimerIndexAfterSnapshotInstall(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, sync: true, segmentSize: 256 << 10})
	c.createTopic("T", 1)
	l := c.leader()
	lagging := c.followerOf(l)
	base := timerindex.BucketOf(time.Now().UnixMilli()) * timerindex.BucketMs
	put := func(key string, due int64) {
		t.Helper()
		if _, err := c.sendRetrying(timerMessage(key, due), time.Now().Add(15*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	put("early", base-5000) // a bucket the cursor will pass
	c.waitCaughtUp()
	c.stop(lagging)
	put("mid", base+3_600_000)
	c.sendConcurrently(4, 2000, 1024, 1, nil)
	// The leader's timer service delivered the early bucket and moved on.
	ctx := context.Background()
	if err := l.g().UpdateTimerProgress(ctx, TimerProgress{From: TimerCursor{}, To: TimerCursor{Bucket: timerindex.BucketOf(base - 5000)}}); err != nil {
		t.Fatal(err)
	}
	cur := l.g().TimerCursor()
	if err := l.g().UpdateTimerProgress(ctx, TimerProgress{From: cur, To: TimerCursor{Bucket: timerindex.BucketOf(base + 3_600_000)}, Done: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.g().SnapshotAndTruncate(); err != nil {
		t.Fatal(err)
	}
	c.start(lagging)
	put("late", base+7_200_000)
	c.waitCaughtUp()
	f := c.nodes[lagging].g()
	if fc, lc := f.TimerCursor(), l.g().TimerCursor(); fc != lc {
		t.Fatalf("follower cursor %+v, leader %+v", fc, lc)
	}
	// Its own "early" bucket is gone; "mid" came with the snapshot,
	// "late" was indexed like on the leader.
	fx, lx := f.TimerIndex(), l.g().TimerIndex()
	if _, ok := fx.Next(0, timerindex.BucketOf(base+3_600_000)-1); ok {
		t.Fatal("the follower kept a bucket the restored cursor passed")
	}
	fr, lr := timerRecords(t, fx), timerRecords(t, lx)
	if len(lr) != 2 || !maps.EqualFunc(fr, lr, slices.Equal) {
		t.Fatalf("timer records: follower %v, leader %v", fr, lr)
	}
	if _, ok := fr[timerindex.BucketOf(base+3_600_000)]; !ok {
		t.Fatalf("the follower lacks the mid bucket: %v", fr)
	}
}

// timerRecords returns every bucket's records of x.
func timerRecords(t *testing.T, x *timerindex.Index) map[int64][]timerindex.Record {
	t.Helper()
	out := map[int64][]timerindex.Record{}
	for b, ok := x.Next(0, math.MaxInt64); ok; b, ok = x.Next(b+1, math.MaxInt64) {
		recs, _, err := x.Read(b, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out[b] = recs
	}
	return out
}
