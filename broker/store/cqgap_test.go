package store

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// TestStoreOpensConsumeQueueWithMissingFile: a ConsumeQueue file missing
// between others (lost on disk, or left by a removal that failed part-way)
// must not keep the store, and so the broker, from starting: the units are
// derived data, and RocketMQ loads such a queue too. The queue opens with
// both sides served; a pull in the gap moves to the next file
// (OFFSET_FOUND_NULL); new messages continue at the queue's old end; and
// a restart after a crash, which checks every unit against the CommitLog,
// steps over the gap too.
func TestStoreOpensConsumeQueueWithMissingFile(t *testing.T) {
	fsys := storage.NewFaultFS(3)
	cfg := storeConfig(fsys, "/s")
	cfg.MappedFileSizeConsumeQueue = 10 * CQUnitSize
	log := &segLog{}
	s := openTestStore(t, cfg, log)
	for i := 0; i < 35; i++ {
		s.put(coreMsg("T", 0, fmt.Sprint("m", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The file of units [10, 20) is lost.
	if err := fsys.Remove("/s/consumequeue/T/0/" + storage.FileName(10*CQUnitSize)); err != nil {
		t.Fatal(err)
	}
	reopen := func() *testStore {
		t.Helper()
		// Not re-dispatched: the FSM re-applies only what follows its
		// last snapshot, which a clean close takes.
		cfg.Raft = log.hooks()
		st, err := Open(cfg)
		if err != nil {
			t.Fatalf("open with a ConsumeQueue file missing: %v", err)
		}
		return &testStore{MessageStore: st, log: log}
	}
	check := func(s *testStore, end int64) {
		t.Helper()
		if lo, hi := s.GetMinOffsetInQueue("T", 0), s.GetMaxOffsetInQueue("T", 0); lo != 0 || hi != end {
			t.Fatalf("queue [%d, %d), want [0, %d)", lo, hi, end)
		}
		for _, c := range []struct {
			off, next int64
			status    GetMessageStatus
			n         int
		}{{0, 10, Found, 10}, {10, 20, OffsetFoundNull, 0}, {17, 20, OffsetFoundNull, 0}, {20, end, Found, int(end - 20)}} {
			r, err := s.GetMessage("g", "T", 0, c.off, 32, nil)
			if err != nil || r.Status != c.status || r.NextBeginOffset != c.next || len(r.Messages) != c.n {
				t.Fatalf("pull at %d: %v next %d, %d messages, err %v; want %v next %d, %d messages",
					c.off, r.Status, r.NextBeginOffset, len(r.Messages), err, c.status, c.next, c.n)
			}
			for i, off := range r.QueueOffsets {
				m, _, err := decodeUnchecked(r.Messages[i])
				if err != nil || string(m.Body) != fmt.Sprint("m", off) {
					t.Fatalf("pulled at %d: %v %v", off, m, err)
				}
			}
		}
	}
	s = reopen()
	check(s, 35)
	if r := s.put(coreMsg("T", 0, "m35"))[0]; r.ConsumeQueueOffset != 35 {
		t.Fatalf("a new message after reopening got offset %d, want 35", r.ConsumeQueueOffset)
	}
	check(s, 36)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash with no checkpoint: every unit is checked at open.
	f, err := fsys.OpenFile("/s/abort", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fsys.Remove("/s/checkpoint"); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	s = reopen()
	defer s.Close()
	check(s, 36)
}
