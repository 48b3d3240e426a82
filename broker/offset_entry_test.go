package broker

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLargeOffsetFlushIsSplit: the coalescer proposes every queued commit
// in one CommitOffsets call, and a leader whose flushes stalled (a slow
// quorum) can hold as many as there are group/topic/queue triples. Proposed
// as one entry, a set larger than a CommitLog segment could never be
// written (every flush failed, and the commits were dropped), and one of
// more than maxCommandItems commits would be committed and then refused by
// every member's decoder, stopping every FSM for good. CommitOffsets splits
// the set into entries of at most maxOffsetEntryBytes.
func TestLargeOffsetFlushIsSplit(t *testing.T) {
	c := newTestCluster(t, clusterOpts{segmentSize: 1 << 20})
	l := c.leader()
	group, topic := strings.Repeat("G", 200), strings.Repeat("T", 100)
	const n = 6000 // about 1.9 MB encoded: more than a segment
	commits := make([]OffsetCommit, n)
	for i := range commits {
		commits[i] = OffsetCommit{Group: group, Topic: topic, QueueID: int32(i), Offset: int64(i) + 1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.g().CommitOffsets(ctx, commits); err != nil {
		t.Fatalf("CommitOffsets of %d commits: %v", n, err)
	}
	c.waitCaughtUp()
	for _, node := range c.nodes {
		offs := node.g().State().ConsumerOffsets()[topic+"@"+group]
		if len(offs) != n || offs[0] != 1 || offs[n-1] != n {
			t.Fatalf("%s holds %d of the %d offsets", node.id, len(offs), n)
		}
	}
	// The byte bound keeps every entry's count below what decoders take:
	// a commit encodes to at least 4 bytes.
	if maxOffsetEntryBytes/4 >= maxCommandItems {
		t.Fatalf("maxOffsetEntryBytes %d admits entries of more than maxCommandItems (%d) commits", maxOffsetEntryBytes, maxCommandItems)
	}
}
