package broker

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/storage"
)

// TestQueuePinStepsOverMissingQueueFile: a pending position (a timer's,
// a delay level's, the transaction floor) in a ConsumeQueue file missing
// between others pins the CommitLog at the first unit after the gap. No
// message of the missing units can be read through the queue; pinned at
// 0, retention would remove nothing until the position passed the gap.
func TestQueuePinStepsOverMissingQueueFile(t *testing.T) {
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
	// The file of units [10, 20) is lost.
	if err := os.Remove(filepath.Join(dir, "consumequeue", "T", "0", storage.FileName(10*store.CQUnitSize))); err != nil {
		t.Fatal(err)
	}
	r := newFakeReplica(t, "127.0.0.1:10911", smallQueues)
	cq := r.st.ConsumeQueues().Get("T", 0)
	at := func(off int64) int64 {
		u, err := cq.Get(off)
		if err != nil {
			t.Fatal(err)
		}
		return u.PhyOffset
	}
	for _, c := range []struct{ q, want int64 }{{3, at(3)}, {13, at(20)}, {10, at(20)}, {19, at(20)}, {20, at(20)}, {34, at(34)}} {
		if got := queuePin(cq, c.q); got != c.want {
			t.Errorf("pin for a position at %d: %d, want %d", c.q, got, c.want)
		}
	}
}
