package store

import (
	"errors"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// dispatchUnit dispatches unit n of topic/queue 0 and returns its offset.
func dispatchUnit(t *testing.T, s *ConsumeQueueStore, topic string, n int64) int64 {
	t.Helper()
	u := unitN(n)
	req := &DispatchRequest{Topic: topic, CommitLogOffset: u.PhyOffset, MsgSize: u.Size, TagsCode: u.TagsCode}
	if err := s.Dispatch(req); err != nil {
		t.Fatalf("dispatch message %d: %v", n, err)
	}
	return req.ConsumeQueueOffset
}

// checkUnits fails unless topic's queue 0 is [0, len(want)) holding
// exactly the units of messages want.
func checkUnits(t *testing.T, s *ConsumeQueueStore, topic string, want ...int64) {
	t.Helper()
	cq := s.Get(topic, 0)
	if cq == nil {
		if len(want) == 0 {
			return
		}
		t.Fatalf("%s/0 missing, want %d units", topic, len(want))
	}
	if cq.MinOffset() != 0 || cq.MaxOffset() != int64(len(want)) {
		t.Fatalf("%s/0 is [%d, %d), want [0, %d)", topic, cq.MinOffset(), cq.MaxOffset(), len(want))
	}
	for i, n := range want {
		if u, err := cq.Get(int64(i)); err != nil || u != unitN(n) {
			t.Fatalf("%s/0 offset %d: %+v %v, want message %d", topic, i, u, err, n)
		}
	}
}

// A deleted topic's queues go; the topic created again starts at offset 0,
// and dispatching the deleted topic's messages again (the FSM re-applying
// its log after a restart, with the new topic's units already on disk)
// adds nothing, nor does re-applying the delete, also after a reopen.
func TestDeleteTopicAtDestroysQueuesAndKeepsThemDeleted(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 10)
		for n := int64(0); n < 15; n++ {
			dispatchUnit(t, s, "T", n)
		}
		dispatchUnit(t, s, "U", 15)
		old := s.Get("T", 0)
		held, err := old.Read(2, 3) // a pull reading the queue as it goes
		if err != nil {
			t.Fatal(err)
		}
		const deletedAt = 16 * 100 // the delete's entry ends after message 15
		if err := s.DeleteTopicAt("T", deletedAt); err != nil {
			t.Fatal(err)
		}
		if s.Get("T", 0) != nil || s.DeletedAt("T") != deletedAt || s.Get("U", 0) == nil {
			t.Fatalf("after delete: queue %v, deleted at %d", s.Get("T", 0), s.DeletedAt("T"))
		}
		if u := held.Unit(1); u != unitN(3) {
			t.Fatalf("a batch held across the delete changed: %+v", u)
		}
		held.Release()
		if _, err := old.Read(0, 1); err == nil {
			t.Fatal("the destroyed queue still reads")
		}
		if err := old.Backfill(0, nil); !errors.Is(err, ErrFileClosed) {
			t.Fatalf("backfill into the destroyed queue: %v", err)
		}
		for n := int64(20); n < 23; n++ {
			if off := dispatchUnit(t, s, "T", n); off != n-20 {
				t.Fatalf("message %d of the new topic at offset %d, want %d", n, off, n-20)
			}
		}
		checkUnits(t, s, "T", 20, 21, 22)

		replay := func(s *ConsumeQueueStore) {
			t.Helper()
			for n := int64(0); n < 15; n++ {
				if off := dispatchUnit(t, s, "T", n); off != -1 {
					t.Fatalf("deleted message %d dispatched again at offset %d", n, off)
				}
			}
			if err := s.DeleteTopicAt("T", deletedAt); err != nil {
				t.Fatal(err)
			}
			for n := int64(20); n < 23; n++ {
				if off := dispatchUnit(t, s, "T", n); off != n-20 {
					t.Fatalf("replayed message %d at offset %d, want %d", n, off, n-20)
				}
			}
			checkUnits(t, s, "T", 20, 21, 22)
		}
		replay(s)
		s.Close()
		s = openTestCQStore(t, fsys, dir, 10)
		if s.DeletedAt("T") != deletedAt || s.DeletedAt("U") != 0 {
			t.Fatalf("reopened: deleted %v", s.DeletedTopics())
		}
		replay(s)

		// A snapshot that knows of a later delete drops the queues.
		if err := s.RestoreDeletedTopics(map[string]int64{"T": 30 * 100, "U": 0}); err != nil {
			t.Fatal(err)
		}
		checkUnits(t, s, "T")
		if s.Get("U", 0) == nil {
			t.Fatal("a topic the snapshot did not delete lost its queue")
		}
		s.Close()
		s = openTestCQStore(t, fsys, dir, 10)
		defer s.Close()
		checkUnits(t, s, "T")
		if got := s.DeletedTopics(); len(got) != 1 || got["T"] != 30*100 {
			t.Fatalf("reopened: deleted %v", got)
		}
	})
}

// A crash after the delete was recorded and before the queues were
// destroyed: the store opened afterwards drops them, and the topic
// created again starts at offset 0.
func TestDeletedTopicQueuesLeftByCrashDropped(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 10)
		for n := int64(0); n < 15; n++ {
			dispatchUnit(t, s, "T", n)
		}
		dispatchUnit(t, s, "U", 15)
		if _, err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := storage.WriteFileAtomic(fsys, s.deletedTopicsPath(), []byte(`{"T":1600}`)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = openTestCQStore(t, fsys, dir, 10)
		defer s.Close()
		checkUnits(t, s, "T")
		checkUnits(t, s, "U", 15)
		if err := s.DeleteTopicAt("T", 1600); err != nil {
			t.Fatal(err)
		}
		if off := dispatchUnit(t, s, "T", 20); off != 0 {
			t.Fatalf("first message of the new topic at offset %d", off)
		}
		checkUnits(t, s, "T", 20)
	})
}

// A delete whose file removal fails is finished by doing it again: the
// files left are not taken for the topic created again.
func TestDeleteTopicAtFinishesAfterFailedRemove(t *testing.T) {
	fsys := storage.NewFaultFS(5)
	s := openTestCQStore(t, fsys, "/store", 10)
	defer s.Close()
	for n := int64(0); n < 25; n++ {
		dispatchUnit(t, s, "T", n)
	}
	failed := false
	fsys.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if op == storage.OpRemove && !failed {
			failed = true
			return errors.New("injected remove failure")
		}
		return nil
	})
	if err := s.DeleteTopicAt("T", 3000); err == nil {
		t.Fatal("delete with a failed remove succeeded")
	}
	fsys.SetFaultFunc(nil)
	if err := s.DeleteTopicAt("T", 3000); err != nil {
		t.Fatal(err)
	}
	checkUnits(t, s, "T")
	if off := dispatchUnit(t, s, "T", 30); off != 0 {
		t.Fatalf("first message of the new topic at offset %d", off)
	}
	checkUnits(t, s, "T", 30)
}
