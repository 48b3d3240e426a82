package broker

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// lockTableSize counts the group maps and the entries the lock table holds.
func lockTableSize(l *lockManager) (groups, entries int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.table {
		groups++
		entries += len(g)
	}
	return groups, entries
}

// TestLockExpiredPruned: expired entries leave the table, with their
// group's map, once lock rounds run after them (a sweep over every group
// at most once per TTL, and the locking group's own entries on each of its
// calls), while live ones stay; an unlock that frees a group's last queue
// drops its map.
func TestLockExpiredPruned(t *testing.T) {
	ttl := time.Minute
	now := time.Unix(1_700_000_000, 0)
	l := newLockManager(ttl, func() time.Time { return now })
	b := func(q int32) wire.MessageQueue { return wire.MessageQueue{Topic: "B", BrokerName: "b", QueueID: q} }
	gone := make([]wire.MessageQueue, 8)
	for i := range gone {
		gone[i] = wire.MessageQueue{Topic: "A", BrokerName: "b", QueueID: int32(i)}
	}
	expect := func(what string, groups, entries int) {
		t.Helper()
		if g, n := lockTableSize(l); g != groups || n != entries {
			t.Fatalf("%s: table holds %d groups, %d entries; want %d, %d", what, g, n, groups, entries)
		}
	}
	if got := l.tryLockBatch("gone", "departed@1", gone); len(got) != len(gone) {
		t.Fatalf("locked %d of %d", len(got), len(gone))
	}
	if got := l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0), b(1)}); len(got) != 2 {
		t.Fatalf("locked %d of 2", len(got))
	}
	expect("start", 2, 10)

	// live renews within the TTL; departed never comes back.
	now = now.Add(ttl / 2)
	l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0), b(1)})
	now = now.Add(ttl/2 + time.Second)
	l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0)})
	expect("after departed@1's locks expired", 1, 2)

	// The sweep ran just now; live's queue 1 expires before the next one
	// is due and goes on live's next call.
	now = now.Add(ttl / 2)
	l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0)})
	expect("after live's queue 1 expired", 1, 1)

	l.unlockBatch("live", "c@1", []wire.MessageQueue{b(0)})
	expect("after the last unlock", 0, 0)
}
