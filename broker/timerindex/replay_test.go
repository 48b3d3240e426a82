package timerindex

import (
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// A little Raft log of timer effects, applied the way broker/timer_fsm.go
// does: a message entry indexes its records in max(their bucket, the
// cursor's); a progress entry moves the cursor by compare-and-set and, to a
// later bucket, advances the files; an entry at or below Applied changes
// only the cursor.
type logEntry struct {
	recs     []Record // a message entry
	from, to cursor   // a progress entry (recs nil)
	done     int64
}

type cursor struct{ bucket, fired int64 }

func msgEntry(bucket int64, offsets ...int64) logEntry {
	rs := make([]Record, len(offsets))
	for i, o := range offsets {
		rs[i] = Record{DeliverMs: bucket*BucketMs + o, QueueOffset: o}
	}
	return logEntry{recs: rs}
}

// buckets lists the buckets a message entry appends to, as the FSM passes
// them to Begin.
func (e logEntry) buckets(cur cursor) []int64 {
	var out []int64
	for _, r := range e.recs {
		if b := max(BucketOf(r.DeliverMs), cur.bucket); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// replay applies entries first..len(log) (1-based Raft indexes) from cur,
// the cursor of the snapshot at first-1, and returns the cursor at the end.
func replay(t *testing.T, x *Index, log []logEntry, first int, cur cursor) cursor {
	t.Helper()
	must(t, x.DropBelow(cur.bucket)) // what a snapshot's Restore does
	for i := first; i <= len(log); i++ {
		e := log[i-1]
		if e.recs == nil {
			if cur != e.from {
				continue
			}
			cur = e.to
			if e.to.bucket != e.from.bucket && uint64(i) > x.Applied() {
				must(t, x.Begin(uint64(i)))
				must(t, x.Advance(e.from.bucket, e.done, e.to.bucket))
				must(t, x.SetApplied(uint64(i)))
			}
			continue
		}
		if uint64(i) <= x.Applied() {
			continue
		}
		must(t, x.Begin(uint64(i), e.buckets(cur)...))
		for _, r := range e.recs {
			must(t, x.Append(max(BucketOf(r.DeliverMs), cur.bucket), []Record{r}))
		}
		must(t, x.SetApplied(uint64(i)))
	}
	return cur
}

// pending returns the queue offsets the leader would still deliver from
// cur: the cursor bucket's records after the fired ones, then every later
// bucket's, in order.
func pending(t *testing.T, x *Index, cur cursor) []int64 {
	t.Helper()
	var out []int64
	for b, ok := x.Next(cur.bucket, 1<<40); ok; b, ok = x.Next(b+1, 1<<40) {
		from := int64(0)
		if b == cur.bucket {
			from = cur.fired
		}
		got, _, err := x.Read(b, from, 1<<20)
		must(t, err)
		out = append(out, offsetsOf(got)...)
	}
	return out
}

// timerLog: 1, 2 and 4 are delivered from bucket 10; 5 (bucket 10) and 6
// (bucket 12) arrive after the leader looked, so the advance to bucket 20
// moves them there; 7 is late for bucket 15 and goes to 20; 8 is due later.
var timerLog = []logEntry{
	1: msgEntry(10, 1, 2),
	2: msgEntry(20, 3),
	3: msgEntry(10, 4),
	// snapshot here: index 3, cursor {10, 0}
	4: {from: cursor{10, 0}, to: cursor{10, 3}},
	5: msgEntry(10, 5),
	6: msgEntry(12, 6),
	7: {from: cursor{10, 3}, to: cursor{20, 0}, done: 3},
	8: msgEntry(15, 7),
	9: msgEntry(30, 8),
}[1:]

const timerLogSnapshot = 3

var timerLogPending = []int64{3, 5, 6, 7, 8}

// A process restart (the page cache survives): the applied mark is exact,
// so re-applying the log after the snapshot writes nothing twice.
func TestIndexRestartReappliesNothingTwice(t *testing.T) {
	dir := t.TempDir()
	x, err := Open(storage.OSFS(), dir, nil)
	must(t, err)
	replay(t, x, timerLog[:timerLogSnapshot], 1, cursor{})
	must(t, x.Sync()) // the snapshot's Persist
	replay(t, x, timerLog, timerLogSnapshot+1, cursor{10, 0})
	must(t, x.Close())

	y := open(t, storage.OSFS(), dir)
	if y.Applied() != uint64(len(timerLog)) {
		t.Fatalf("applied after restart %d, want %d", y.Applied(), len(timerLog))
	}
	cur := replay(t, y, timerLog, timerLogSnapshot+1, cursor{10, 0})
	if got := pending(t, y, cur); !slices.Equal(got, timerLogPending) {
		t.Fatalf("pending after restart %v, want %v", got, timerLogPending)
	}
}

// A mark without a boot id (written before it had one) is read as before.
func TestIndexLegacyMark(t *testing.T) {
	dir := t.TempDir()
	x := open(t, storage.OSFS(), dir)
	must(t, x.Close())
	old := binary.LittleEndian.AppendUint64(nil, 42)
	old = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, castagnoli))
	must(t, storage.WriteFileAtomic(storage.OSFS(), filepath.Join(dir, appliedName), old))
	y := open(t, storage.OSFS(), dir)
	if y.Applied() != 42 {
		t.Fatalf("applied %d from a legacy mark", y.Applied())
	}
}
