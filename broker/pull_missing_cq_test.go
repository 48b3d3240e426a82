package broker

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// TestPullInMissingConsumeQueueFileMovesOn: a pull at an offset in the
// queue's range that no ConsumeQueue file holds (OFFSET_FOUND_NULL) is
// answered as RocketMQ's PullMessageProcessor answers it: PULL_NOT_FOUND
// with the next file's first offset, which RocketMQ clients (and the SDK)
// take as their next offset. A long poll gets it at once, not after a
// hold: the consumer has messages to read where it moves to.
func TestPullInMissingConsumeQueueFileMovesOn(t *testing.T) {
	smallQueues := queueFileGap(t) // T/0: 35 messages, the file of units [10, 20) lost
	// Held pulls are looked at again only every 10 s here, so that one
	// held shows.
	tc, _ := startFakeProc(t, func(c *BrokerConfig) { c.PullHoldCheckInterval = 10 * time.Second }, smallQueues)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T", 1)
	for _, suspend := range []int64{0, 30_000} {
		start := time.Now()
		r := tc.call(addr, remoting.RequestPullMessage, pullExt("G", "T", 0, 13, suspend), nil)
		took := time.Since(start)
		var h wire.PullMessageResponseHeader
		if err := r.DecodeHeader(&h); err != nil {
			t.Fatal(err)
		}
		if r.Code != remoting.ResponsePullNotFound || h.NextBeginOffset != 20 {
			t.Fatalf("pull at 13 (suspend %d ms): code %d next begin offset %d; want PULL_NOT_FOUND (%d) next 20",
				suspend, r.Code, h.NextBeginOffset, remoting.ResponsePullNotFound)
		}
		if took >= notServedHold/2 {
			t.Fatalf("pull at 13 (suspend %d ms) answered after %v; want at once, not held", suspend, took)
		}
	}
	r := tc.call(addr, remoting.RequestPullMessage, pullExt("G", "T", 0, 20, 0), nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull at 20: code %d %s", r.Code, r.Remark)
	}
}

// queueFileGap stores 35 messages in T/0 through a fake replica whose
// ConsumeQueue files hold 10 units, closes it and removes the file of
// units [10, 20), a file lost between others. It returns the store
// options that open that directory again.
func queueFileGap(t *testing.T) func(*store.Config) {
	t.Helper()
	dir := t.TempDir()
	smallQueues := func(c *store.Config) {
		c.StorePathRootDir = dir
		c.MappedFileSizeConsumeQueue = 10 * store.CQUnitSize
	}
	first := newFakeReplica(t, "127.0.0.1:10911", smallQueues)
	var msgs []*store.Message
	for i := range 35 {
		msgs = append(msgs, &store.Message{Topic: "T", QueueID: 0, Body: []byte(fmt.Sprint("m", i)), BornTimestamp: 1,
			BornHost: netip.MustParseAddrPort("10.0.0.1:1000"), Properties: map[string]string{}})
	}
	if _, err := first.PutMessages(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	if err := first.st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "consumequeue", "T", "0", storage.FileName(10*store.CQUnitSize))); err != nil {
		t.Fatal(err)
	}
	return smallQueues
}

// TestQueryConsumeQueueAcrossMissingFile: QUERY_CONSUME_QUEUE (321, the
// admin's queryCq) over a range a lost ConsumeQueue file cuts answers as
// RocketMQ's: the units from the index up to the gap (the body gives each
// no offset, so they must be consecutive), and, at an index the lost file
// held, success with RocketMQ's remark for it ("Index 12 of 0@T is not
// exist!") and no units. A SYSTEM_ERROR would hide the units that are
// there.
func TestQueryConsumeQueueAcrossMissingFile(t *testing.T) {
	smallQueues := queueFileGap(t) // T/0: 35 messages, the file of units [10, 20) lost
	tc, _ := startFakeProc(t, nil, smallQueues)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T", 1)
	query := func(index, count int) (wire.QueryConsumeQueueResponseBody, string) {
		t.Helper()
		return tc.queryConsumeQueue(addr, "T", 0, int64(index), count)
	}
	if body, _ := query(5, 20); len(body.QueueData) != 5 || body.MaxQueueIndex != 35 {
		t.Fatalf("query from 5 across the gap: %d units, max %d; want the 5 units [5, 10), max 35", len(body.QueueData), body.MaxQueueIndex)
	}
	if body, remark := query(12, 5); len(body.QueueData) != 0 || remark != "Index 12 of 0@T is not exist!" {
		t.Fatalf("query in the gap: %d units, remark %q; want none and RocketMQ's remark", len(body.QueueData), remark)
	}
	if body, _ := query(20, 100); len(body.QueueData) != 15 {
		t.Fatalf("query from 20: %d units; want the 15 after the gap", len(body.QueueData))
	}
}
