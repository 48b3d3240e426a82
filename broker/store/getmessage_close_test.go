package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// TestStorePullDuringCloseIsRetryable: a pull that passed the store's
// closed check reads on while Close closes the CommitLog's segments. The
// messages are still stored (closed, not removed): the pull must fail as
// the store being unavailable, which the consumer retries, not answer
// them as removed (MESSAGE_WAS_REMOVING with the offset moved past them),
// which makes the consumer skip them for good.
func TestStorePullDuringCloseIsRetryable(t *testing.T) {
	s := tenMessageStore(t)
	// Where Close is when the pull reads: the segments closed, the queues
	// not yet.
	if err := s.CommitLog().Queue().Close(); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetMessage("g", "T", 0, 0, 32, nil)
	if !errors.Is(err, ErrServiceNotAvailable) || !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("pull while the segments close: %v next %d, err %v; want ErrServiceNotAvailable (store closed)", r.Status, r.NextBeginOffset, err)
	}
}

// TestStorePullOfRemovedSegmentMovesOn: the other side of
// TestStorePullDuringCloseIsRetryable. Units whose segment retention
// removed under the pull are stepped over (MESSAGE_WAS_REMOVING, the
// offset past them), as RocketMQ does.
func TestStorePullOfRemovedSegmentMovesOn(t *testing.T) {
	s := tenMessageStore(t)
	if err := s.CommitLog().Queue().First().Destroy(); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetMessage("g", "T", 0, 0, 32, nil)
	if err != nil || r.Status != MessageWasRemoving || r.NextBeginOffset != 10 {
		t.Fatalf("pull of a removed segment: %v next %d, err %v; want MESSAGE_WAS_REMOVING next 10", r.Status, r.NextBeginOffset, err)
	}
}

// TestStoreTimeSearchDuringCloseFails: a search by time
// (SEARCH_OFFSET_BY_TIMESTAMP, a reset by time) that reads store times
// while Close closes the CommitLog's segments must fail, not take every
// message for removed and answer the queue's end: a consumer starting
// there, or a forced reset committing it, skips every message.
func TestStoreTimeSearchDuringCloseFails(t *testing.T) {
	s := tenMessageStore(t)
	if err := s.CommitLog().Queue().Close(); err != nil {
		t.Fatal(err)
	}
	if off, err := s.GetOffsetInQueueByTime("T", 0, 0); !errors.Is(err, ErrServiceNotAvailable) || !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("search by time while the segments close: offset %d, err %v; want ErrServiceNotAvailable (store closed)", off, err)
	}
	if ts, err := s.GetEarliestMessageTime("T", 0); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("earliest message time while the segments close: %d, err %v; want ErrStoreClosed", ts, err)
	}
}

// tenMessageStore opens a store holding ten messages in T/0, closed when
// the test ends.
func tenMessageStore(t *testing.T) *testStore {
	t.Helper()
	s := openTestStore(t, storeConfig(storage.NewFaultFS(1), "/s"), &segLog{})
	t.Cleanup(func() { _ = s.Close() })
	for i := 0; i < 10; i++ {
		s.put(coreMsg("T", 0, fmt.Sprint("m", i)))
	}
	return s
}

// TestStoreQueueReadsOnClosedStoreFail: Close empties the queue table, so
// a read that finds no queue once the store is closed may be of a queue
// that exists. Answered as a missing queue (offset 0), a pull would move
// its consumer back to the start and a reset or GET_MAX_OFFSET answer
// would commit 0: every such read fails as the store being unavailable.
func TestStoreQueueReadsOnClosedStoreFail(t *testing.T) {
	s := tenMessageStore(t)
	if lo, hi, err := s.QueueRange("T", 0); err != nil || lo != 0 || hi != 10 {
		t.Fatalf("open store: range [%d, %d) err %v; want [0, 10)", lo, hi, err)
	}
	if lo, hi, err := s.QueueRange("U", 0); err != nil || lo != 0 || hi != 0 {
		t.Fatalf("open store, no such queue: range [%d, %d) err %v; want [0, 0) and no error", lo, hi, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if lo, hi, err := s.QueueRange("T", 0); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("closed store: range [%d, %d) err %v; want ErrStoreClosed", lo, hi, err)
	}
	if off, err := s.GetUpperOffsetInQueueByTime("T", 0, 0); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("closed store: upper offset by time %d err %v; want ErrStoreClosed", off, err)
	}
	if off, err := s.GetOffsetInQueueByTime("T", 0, 0); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("closed store: offset by time %d err %v; want ErrStoreClosed", off, err)
	}
}
