package store

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/storage"
)

// TestGroupCommitSharesSyncs checks that concurrent SYNC_FLUSH appends are
// covered by far fewer msyncs than appends.
func TestGroupCommitSharesSyncs(t *testing.T) {
	f := storage.NewFaultFS(1)
	var syncs atomic.Int64
	f.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if op == storage.OpMsync && strings.Contains(name, "commitlog") {
			syncs.Add(1)
		}
		return nil
	})
	s := openCore(t, coreConfig(f, "/s", SyncFlush))
	defer s.Close()
	base := syncs.Load()
	const writers, each = 16, 50
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.PutMessage(coreMsg("G", int32(w), strconv.Itoa(i))); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	n := syncs.Load() - base
	if n <= 0 || n >= writers*each {
		t.Fatalf("%d msyncs for %d appends", n, writers*each)
	}
	if s.FlushedOffset() != s.CommitLog().MaxOffset() {
		t.Fatalf("flushed %d of %d after all acks", s.FlushedOffset(), s.CommitLog().MaxOffset())
	}
	t.Logf("%d appends, %d msyncs", writers*each, n)
}

// TestSyncFlushEIO: a failed fdatasync fails the append, stops writes with a
// reason, and loses nothing acknowledged.
func TestSyncFlushEIO(t *testing.T) {
	f := storage.NewFaultFS(2)
	cfg := coreConfig(f, "/s", SyncFlush)
	s := openCore(t, cfg)
	for i := 0; i < 20; i++ {
		if _, err := s.PutMessage(coreMsg("T", 0, "ok-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	f.InjectError(storage.OpMsync, unix.EIO)
	r, err := s.PutMessage(coreMsg("T", 0, "doomed"))
	if !errors.Is(err, ErrStoreWriteFailed) || !errors.Is(err, ErrServiceNotAvailable) || r.Status != PutServiceNotAvailable {
		t.Fatalf("append during EIO: %v %v", r.Status, err)
	}
	if !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("error does not say why: %v", err)
	}
	f.InjectError(storage.OpMsync, nil)
	// Writes stay refused even though the disk "recovered": the tail's
	// durability is unknown after a failed fdatasync.
	if _, err := s.PutMessage(coreMsg("T", 0, "later")); !errors.Is(err, ErrStoreWriteFailed) {
		t.Fatalf("append after EIO: %v", err)
	}
	// Acknowledged messages stay readable; the failed one is never visible.
	waitDispatched20 := func(s *MessageStore) {
		testutil.WaitFor(t, 5*time.Second, "20 messages dispatched", func() bool { return s.GetMaxOffsetInQueue("T", 0) >= 20 })
	}
	waitDispatched20(s)
	got := pullAll(t, s, "T", 0)
	if len(got) != 20 || got[19] != "ok-19" {
		t.Fatalf("after EIO served %d: %v", len(got), got)
	}
	if err := s.Close(); !errors.Is(err, ErrStoreWriteFailed) {
		t.Fatalf("close after EIO: %v", err)
	}
	if ok, _ := fileExists(f, "/s/abort"); !ok {
		t.Fatal("abort file removed although the store failed")
	}
	s2 := openCore(t, cfg)
	defer s2.Close()
	waitDispatched20(s2)
	got = pullAll(t, s2, "T", 0)
	if len(got) < 20 || got[19] != "ok-19" {
		t.Fatalf("after restart served %d", len(got))
	}
}

// TestDiskFullOnNewSegment: ENOSPC when preallocating the next segment is a
// disk-full error, not a crash, and writes resume once space is back.
func TestDiskFullOnNewSegment(t *testing.T) {
	f := storage.NewFaultFS(3)
	cfg := coreConfig(f, "/s", SyncFlush)
	cfg.MappedFileSizeCommitLog = 256 << 10
	cfg.MaxMessageSize = 32 << 10
	s := openCore(t, cfg)
	defer s.Close()
	if _, err := s.PutMessage(coreMsg("T", 0, "first")); err != nil {
		t.Fatal(err)
	}
	used, _, _ := f.DiskUsage("/s")
	f.SetCapacity(int64(used) + 64<<10) // room for index/CQ growth, not a segment
	var err error
	n := 0
	for ; n < 100; n++ {
		if _, err = s.PutMessage(coreMsg("T", 0, strings.Repeat("x", 8<<10))); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrServiceNotAvailable) {
		t.Fatalf("after %d puts: %v", n, err)
	}
	if errors.Is(err, ErrStoreWriteFailed) {
		t.Fatalf("disk full must not stop the store for good: %v", err)
	}
	// The failed write set the disk guard at once (no wait for the next
	// usage check); it lifts within RecheckInterval once space is back.
	if !s.DiskFull() {
		t.Fatal("ENOSPC on a new segment did not set the disk guard")
	}
	f.SetCapacity(0)
	testutil.WaitFor(t, 5*time.Second, "put after freeing space", func() bool {
		_, err := s.PutMessage(coreMsg("T", 0, "after-space-freed"))
		return err == nil
	})
	testutil.WaitFor(t, 5*time.Second, "dispatch", func() bool { return s.GetMaxOffsetInQueue("T", 0) == int64(n+2) })
}

// TestDiskUsageGuard: above 90% use (as reported by statfs) writes are
// refused with SERVICE_NOT_AVAILABLE; reads go on.
func TestDiskUsageGuard(t *testing.T) {
	f := storage.NewFaultFS(4)
	s := openCore(t, coreConfig(f, "/s", AsyncFlush))
	defer s.Close()
	if _, err := s.PutMessage(coreMsg("T", 0, "before")); err != nil {
		t.Fatal(err)
	}
	f.SetDiskUsage(95, 100)
	testutil.WaitFor(t, 5*time.Second, "disk guard trips", func() bool {
		_, err := s.PutMessage(coreMsg("T", 0, "probe"))
		return errors.Is(err, ErrDiskFull) && errors.Is(err, ErrServiceNotAvailable)
	})
	r, err := s.PutMessage(coreMsg("T", 0, "refused"))
	if r.Status != PutServiceNotAvailable || !strings.Contains(err.Error(), "disk") {
		t.Fatalf("status %v err %v", r.Status, err)
	}
	f.ClearDiskUsage()
	testutil.WaitFor(t, 5*time.Second, "disk guard clears", func() bool {
		_, err := s.PutMessage(coreMsg("T", 0, "probe"))
		return err == nil
	})
	waitDispatched(t, s)
	if got := pullAll(t, s, "T", 0); len(got) == 0 || got[0] != "before" {
		t.Fatalf("reads during disk pressure: %v", got)
	}
}

// TestSyncFlushTimeout: a flush slower than syncFlushTimeout returns
// FLUSH_DISK_TIMEOUT with the message id filled in.
func TestSyncFlushTimeout(t *testing.T) {
	f := storage.NewFaultFS(5)
	cfg := coreConfig(f, "/s", SyncFlush)
	cfg.SyncFlushTimeout = 50 * time.Millisecond
	s := openCore(t, cfg)
	defer s.Close()
	release := make(chan struct{})
	var blocked atomic.Bool
	f.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if op == storage.OpMsync && strings.Contains(name, "commitlog") && blocked.CompareAndSwap(false, true) {
			<-release // a disk that hangs (the hook runs under the FS lock)
		}
		return nil
	})
	r, err := s.PutMessage(coreMsg("T", 0, "slow"))
	close(release)
	if !errors.Is(err, ErrFlushDiskTimeout) || r.Status != PutFlushDiskTimeout || r.MsgID == "" {
		t.Fatalf("slow flush: %+v %v", r, err)
	}
	testutil.WaitFor(t, 5*time.Second, "late flush completes", func() bool { return s.FlushedOffset() == s.CommitLog().MaxOffset() })
}

func TestAsyncFlushEventuallyDurable(t *testing.T) {
	f := storage.NewFaultFS(6)
	s := openCore(t, coreConfig(f, "/s", AsyncFlush))
	defer s.Close()
	for i := 0; i < 100; i++ {
		if _, err := s.PutMessage(coreMsg("T", 0, strings.Repeat("a", 200))); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "background flush", func() bool { return s.FlushedOffset() == s.CommitLog().MaxOffset() })
}

// TestWriteENOSPC: a write failing with ENOSPC (buffered SYNC_FLUSH group
// write) fails the append with a disk-full error and never crashes; the
// acknowledged messages stay readable.
func TestWriteENOSPC(t *testing.T) {
	f := storage.NewFaultFS(7)
	s := openCore(t, coreConfig(f, "/s", SyncFlush))
	for i := 0; i < 5; i++ {
		if _, err := s.PutMessage(coreMsg("T", 0, "ok-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	f.InjectError(storage.OpWrite, unix.ENOSPC)
	r, err := s.PutMessage(coreMsg("T", 0, "no-space"))
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrServiceNotAvailable) || r.Status != PutServiceNotAvailable {
		t.Fatalf("append on a full disk: %v %v", r.Status, err)
	}
	f.InjectError(storage.OpWrite, nil)
	testutil.WaitFor(t, 5*time.Second, "acked messages dispatched", func() bool { return s.GetMaxOffsetInQueue("T", 0) == 5 })
	if got := pullAll(t, s, "T", 0); len(got) != 5 {
		t.Fatalf("served %d", len(got))
	}
	s.Close()
}

// TestCloseAnswersEveryFlushRound: appenders blocked in group-commit rounds
// while the store closes are all answered at once (durable, or refused), none
// is left to run into syncFlushTimeout, and every acknowledged message is
// within the durable offset.
func TestCloseAnswersEveryFlushRound(t *testing.T) {
	f := storage.NewFaultFS(3)
	cfg := coreConfig(f, "/s", SyncFlush)
	cfg.SyncFlushTimeout = time.Minute
	s := openCore(t, cfg)
	const writers = 16
	var acked atomic.Int64 // highest acknowledged end offset
	var running atomic.Int64
	var timeouts atomic.Int64
	running.Store(writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			defer running.Add(-1)
			for i := 0; ; i++ {
				r, err := s.PutMessage(coreMsg("C", int32(w%4), strconv.Itoa(i)))
				if errors.Is(err, ErrFlushDiskTimeout) {
					timeouts.Add(1)
				}
				if err != nil {
					return
				}
				end := r.PhysicalOffset + int64(r.Appended[0].Size)
				for {
					cur := acked.Load()
					if end <= cur || acked.CompareAndSwap(cur, end) {
						break
					}
				}
			}
		}(w)
	}
	testutil.WaitFor(t, 10*time.Second, "appenders under way", func() bool { return s.FlushRounds() >= 20 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "every appender answered after Close", func() bool { return running.Load() == 0 })
	if n := timeouts.Load(); n > 0 {
		t.Fatalf("%d appends ran into syncFlushTimeout after Close", n)
	}
	if a, fl := acked.Load(), s.FlushedOffset(); a > fl {
		t.Fatalf("acknowledged up to %d, durable only %d", a, fl)
	}
}
