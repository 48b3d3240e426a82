package broker

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/broker/timerindex"
	"github.com/raftmq/raftmq/wire"
)

// dueTimer is a message as applyTimer leaves it: in the timer topic, due
// at dueMs, for topic's queue 0; body names it.
func dueTimer(topic, body string, dueMs int64) *store.Message {
	return &store.Message{Topic: wire.TopicTimer, Body: []byte(body), BornTimestamp: time.Now().UnixMilli(),
		BornHost: netip.MustParseAddrPort("127.0.0.1:50000"),
		Properties: map[string]string{wire.PropertyUniqKey: body, wire.PropertyTimerOutMs: strconv.FormatInt(dueMs, 10),
			wire.PropertyRealTopic: topic, wire.PropertyRealQueueID: "0"}}
}

// noTimerRounds keeps a cluster's own timer services idle: the test drives
// the rounds.
func noTimerRounds(c *BrokerConfig) { c.TimerCheckInterval = time.Hour }

// TestTimerCursorPastBucketEnd: a leader whose cursor bucket holds fewer
// records than the replicated cursor says were fired (its index diverged
// from the one of the leader that moved the cursor) moves on to the next
// due bucket. It kept proposing nothing, so no later timer message was
// delivered while it led.
func TestTimerCursorPastBucketEnd(t *testing.T) {
	pc := startRealCluster(t, noTimerRounds)
	l := pc.leader()
	g := pc.groups[l]
	ctx := context.Background()
	nowMs := time.Now().UnixMilli()
	b1, b2 := timerindex.BucketOf(nowMs-10_000), timerindex.BucketOf(nowMs-5_000)
	for _, m := range []*store.Message{dueTimer("TD", "fired-1", nowMs-10_000), dueTimer("TD", "fired-2", nowMs-10_000)} {
		if _, err := g.PutMessages(ctx, []*store.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	// The cursor says five records of b1 were fired; b1 holds two here.
	if err := g.UpdateTimerProgress(ctx, TimerProgress{From: g.TimerCursor(), To: TimerCursor{Bucket: b1}}); err != nil {
		t.Fatal(err)
	}
	if err := g.UpdateTimerProgress(ctx, TimerProgress{From: TimerCursor{Bucket: b1}, To: TimerCursor{Bucket: b1, Fired: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.PutMessages(ctx, []*store.Message{dueTimer("TD", "due-later", nowMs-5_000)}); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := g.TimerIndex().Read(b2, 0, 1); total != 1 {
		t.Fatalf("bucket %d holds %d records, want the later timer's", b2, total)
	}
	pc.nodes[l].timers.tick(time.Now())
	got := readTopic(t, g, "TD", 1)
	if len(got) != 1 || got["due-later"] == nil || got["due-later"].copies != 1 {
		t.Fatalf("TD holds %v after a round; want the later timer once (cursor %+v)", got, g.TimerCursor())
	}
	if cur := g.TimerCursor(); cur.Bucket <= b1 {
		t.Fatalf("cursor %+v still at bucket %d", cur, b1)
	}
}
