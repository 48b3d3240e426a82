package store

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/storage"
)

// fakeSegments is an ExpiringFiles of equal segments with modification times,
// for the policy tests; the integration test uses a real MappedFileQueue.
type fakeSegments struct {
	mods []time.Time // oldest first
	size int64
	min  int64
}

func (f *fakeSegments) DeleteExpired(olderThan time.Time, keepLast, maxDelete int) (int, error) {
	n := 0
	for len(f.mods) > keepLast && n < maxDelete && f.mods[0].Before(olderThan) {
		f.mods = f.mods[1:]
		f.min += f.size
		n++
	}
	return n, nil
}

func (f *fakeSegments) MinOffset() int64 { return f.min }

type fakeCleaner struct{ calls []int64 }

func (c *fakeCleaner) DeleteExpired(phyMin int64) (int, error) {
	c.calls = append(c.calls, phyMin)
	return 1, nil
}

type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

func newTestCleaner(t *testing.T, fs *storage.FaultFS, segs ExpiringFiles, clock *manualClock, cq, idx PhyOffsetCleaner) *CleanService {
	t.Helper()
	cfg := DefaultRetentionConfig()
	cfg.DeleteWhen = "04;05"
	cfg.Now = clock.Now
	s, err := NewCleanService(cfg, fs, "/store/commitlog", segs, cq, idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRetentionConfigValidate(t *testing.T) {
	if err := DefaultRetentionConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*RetentionConfig){
		func(c *RetentionConfig) { c.DeleteWhen = "25" },
		func(c *RetentionConfig) { c.DeleteWhen = "x;04" },
		func(c *RetentionConfig) { c.DeleteWhen = ";" },
		func(c *RetentionConfig) { c.FileReservedTime = 0 },
		func(c *RetentionConfig) { c.DiskMaxUsedSpaceRatio = 99 },
		func(c *RetentionConfig) { c.CleanForciblyRatio = 95 },
		func(c *RetentionConfig) { c.CheckInterval = 0 },
	} {
		c := DefaultRetentionConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("config %+v: err %v, want ErrInvalidConfig", c, err)
		}
	}
	h, err := parseDeleteWhen("04; 05")
	if err != nil || !h[4] || !h[5] || len(h) != 2 {
		t.Fatalf("parse: %v %v", h, err)
	}
}

func TestRetentionDeletesExpiredOnlyAtDeleteWhenHour(t *testing.T) {
	fs := storage.NewFaultFS(1)
	fs.SetDiskUsage(10, 100)
	clock := &manualClock{t: time.Date(2026, 1, 10, 3, 30, 0, 0, time.Local)}
	old := clock.t.Add(-100 * time.Hour)
	segs := &fakeSegments{mods: []time.Time{old, old, clock.t.Add(-time.Hour), clock.t}, size: 1000}
	cq, idx := &fakeCleaner{}, &fakeCleaner{}
	s := newTestCleaner(t, fs, segs, clock, cq, idx)

	res, err := s.RunOnce()
	if err != nil || res.CommitLogDeleted != 0 {
		t.Fatalf("03:30: %+v %v, want nothing deleted before the hour", res, err)
	}
	clock.t = clock.t.Add(time.Hour) // 04:30
	res, err = s.RunOnce()
	if err != nil || res.CommitLogDeleted != 2 || segs.min != 2000 {
		t.Fatalf("04:30: %+v %v min %d, want the 2 expired segments deleted", res, err, segs.min)
	}
	// The cleaners follow the CommitLog's new minimum (and ran once at start).
	if len(cq.calls) != 2 || cq.calls[1] != 2000 || len(idx.calls) != 2 || idx.calls[1] != 2000 {
		t.Fatalf("cleaner calls cq %v idx %v", cq.calls, idx.calls)
	}
	clock.t = clock.t.Add(time.Hour) // 05:30, nothing more is expired
	if res, _ := s.RunOnce(); res.CommitLogDeleted != 0 || len(cq.calls) != 2 {
		t.Fatalf("05:30: %+v, cleaner calls %v", res, cq.calls)
	}
}

func TestRetentionSpacePressure(t *testing.T) {
	fs := storage.NewFaultFS(1)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	old := clock.t.Add(-100 * time.Hour)
	fresh := clock.t.Add(-time.Minute)
	segs := &fakeSegments{mods: []time.Time{old, fresh, fresh, fresh, fresh}, size: 1000}
	s := newTestCleaner(t, fs, segs, clock, nil, nil)

	// 80 % (> 75): expired segments go at once although it is not 04:00,
	// unexpired ones stay.
	fs.SetDiskUsage(80, 100)
	res, err := s.RunOnce()
	if err != nil || res.CommitLogDeleted != 1 || len(segs.mods) != 4 || res.DiskFull {
		t.Fatalf("80%%: %+v %v", res, err)
	}
	// 87 % (> 85): unexpired segments go too, always keeping the last one.
	fs.SetDiskUsage(87, 100)
	res, err = s.RunOnce()
	if err != nil || res.CommitLogDeleted != 3 || len(segs.mods) != 1 || res.DiskFull {
		t.Fatalf("87%%: %+v %v", res, err)
	}
	if err := s.CheckWritable(); err != nil {
		t.Fatalf("writable at 87%%: %v", err)
	}
}

func TestRetentionDiskFullGuard(t *testing.T) {
	fs := storage.NewFaultFS(1)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	segs := &fakeSegments{mods: []time.Time{clock.t}, size: 1000}
	s := newTestCleaner(t, fs, segs, clock, nil, nil)

	fs.SetDiskUsage(95, 100)
	res, err := s.RunOnce()
	if err != nil || !res.DiskFull || !s.DiskFull() {
		t.Fatalf("95%%: %+v %v", res, err)
	}
	err = s.CheckWritable()
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("CheckWritable at 95%%: %v, want ErrDiskFull", err)
	}
	t.Logf("disk full error: %v", err)
	// 88 %: still above the resume threshold (85), writes stay refused.
	fs.SetDiskUsage(88, 100)
	if _, err := s.RunOnce(); err != nil || s.CheckWritable() == nil {
		t.Fatalf("88%%: writes must stay refused until <= 85%% (err %v)", err)
	}
	fs.SetDiskUsage(50, 100)
	if _, err := s.RunOnce(); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWritable(); err != nil {
		t.Fatalf("50%%: %v, want writes resumed", err)
	}
}

func TestRetentionManualDelete(t *testing.T) {
	fs := storage.NewFaultFS(1)
	fs.SetDiskUsage(10, 100)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	old := clock.t.Add(-100 * time.Hour)
	segs := &fakeSegments{mods: []time.Time{old, clock.t}, size: 1000}
	s := newTestCleaner(t, fs, segs, clock, nil, nil)
	if res, _ := s.RunOnce(); res.CommitLogDeleted != 0 {
		t.Fatalf("deleted without reason: %+v", res)
	}
	s.DeleteExpiredManually()
	if res, _ := s.RunOnce(); res.CommitLogDeleted != 1 {
		t.Fatalf("manual: %+v", res)
	}
}

func TestRetentionStartClose(t *testing.T) {
	fs := storage.NewFaultFS(1)
	fs.SetDiskUsage(95, 100)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	s := newTestCleaner(t, fs, &fakeSegments{mods: []time.Time{clock.t}}, clock, nil, nil)
	s.Start()
	testutil.WaitFor(t, 5*time.Second, "background check sets the disk-full guard", s.DiskFull)
	s.Close()
	goleak.VerifyNone(t)
}

// TestRetentionEndToEnd drives retention over a real segment queue, real
// ConsumeQueues and index files on the fault FS, with an injected clock and
// disk usage.
func TestRetentionEndToEnd(t *testing.T) {
	fsys := storage.NewFaultFS(11)
	clock := &manualClock{t: time.Date(2026, 1, 10, 3, 0, 0, 0, time.Local)}
	fsys.SetNow(clock.Now)
	fsys.SetDiskUsage(50, 100)
	l := newSegLog(t, fsys, "/store", 4096)
	msgs := fill(l, 200)
	f := newDispatchFixture(t, fsys, "/store", l, 0)
	l.dispatch(f.r, 0, l.mfq.MaxOffset())
	segs := l.mfq.Files()
	if len(segs) < 5 {
		t.Fatalf("only %d segments", len(segs))
	}
	// Every segment but the last two was last written 100 h ago.
	for i, mf := range segs {
		mod := clock.t.Add(-100 * time.Hour)
		if i >= len(segs)-2 {
			mod = clock.t.Add(-time.Hour)
		}
		if err := fsys.SetModTime(mf.Path(), mod); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultRetentionConfig()
	cfg.Now = clock.Now
	s, err := NewCleanService(cfg, fsys, "/store/commitlog", l.mfq, f.cqs, f.idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A consumer holds a batch of the oldest queue file and the first message.
	held, err := f.cqs.Get("A", 0).Read(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	heldMsg, err := segs[0].Read(0, msgs[0].size)
	if err != nil {
		t.Fatal(err)
	}

	if res, err := s.RunOnce(); err != nil || res.CommitLogDeleted != 0 {
		t.Fatalf("03:00: %+v %v", res, err)
	}
	clock.t = clock.t.Add(time.Hour) // 04:00, deleteWhen
	res, err := s.RunOnce()
	if err != nil || res.CommitLogDeleted != len(segs)-2 {
		t.Fatalf("04:00: %+v %v, want %d segments deleted", res, err, len(segs)-2)
	}
	phyMin := l.mfq.MinOffset()
	if phyMin != segs[len(segs)-2].FileFromOffset() {
		t.Fatalf("CommitLog min %d", phyMin)
	}
	if res.ConsumeQueueDeleted == 0 || res.IndexDeleted == 0 {
		t.Fatalf("no queue/index files deleted: %+v", res)
	}
	// Queues now start at their first message still in the CommitLog.
	for _, cq := range f.cqs.All() {
		if cq.MinOffset() < cq.MaxOffset() {
			u, err := cq.Get(cq.MinOffset())
			if err != nil || u.PhyOffset < phyMin {
				t.Fatalf("%s/%d min %d: %+v %v", cq.Topic(), cq.QueueID(), cq.MinOffset(), u, err)
			}
		}
		if cq.MinOffset() > 0 {
			if _, err := cq.Get(cq.MinOffset() - 1); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("offset below min readable: %v", err)
			}
		}
	}
	// Index entries that point into deleted segments are gone with their
	// files; the newest survive.
	if r := f.idx.QueryOffset("A", "k198", 10, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{msgs[198].phy}) {
		t.Fatalf("k198 after cleanup: %v", r.PhyOffsets)
	}
	if r := f.idx.QueryOffset("A", "k0", 10, 0, math.MaxInt64); len(r.PhyOffsets) != 0 {
		t.Fatalf("k0 should be gone with its index file: %v", r.PhyOffsets)
	}
	// The readers' views stay valid until released.
	if held.Unit(0).PhyOffset != msgs[0].phy || !segs[0].IsDestroyed() || segs[0].IsUnmapped() {
		t.Fatal("held views lost their mapping")
	}
	if _, _, err := CheckAndDecode(heldMsg.B); err != nil {
		t.Fatalf("held message: %v", err)
	}
	held.Release()
	heldMsg.Release()
	if !segs[0].IsUnmapped() {
		t.Fatal("segment still mapped after the last reader released it")
	}

	// Disk pressure: 87 % deletes even fresh segments, keeping the last.
	fsys.SetDiskUsage(87, 100)
	clock.t = clock.t.Add(6 * time.Hour)
	if res, err := s.RunOnce(); err != nil || res.CommitLogDeleted != 1 || len(l.mfq.Files()) != 1 {
		t.Fatalf("87%%: %+v %v, %d segments", res, err, len(l.mfq.Files()))
	}

	// 95 %: writes refused, reads go on.
	fsys.SetDiskUsage(95, 100)
	if _, err := s.RunOnce(); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWritable(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("writes at 95%%: %v", err)
	}
	last := msgs[199]
	cq := f.cqs.Get(last.topic, last.q)
	b, err := cq.Read(cq.MaxOffset()-1, 1)
	if err != nil {
		t.Fatalf("read while disk full: %v", err)
	}
	u := b.Unit(0)
	b.Release()
	seg := l.mfq.FindByOffset(u.PhyOffset)
	view, err := seg.Read(int(u.PhyOffset-seg.FileFromOffset()), int(u.Size))
	if err != nil {
		t.Fatalf("read CommitLog while disk full: %v", err)
	}
	if req, _, err := CheckAndDecode(view.B); err != nil || req.UniqKey != "U-B-1-199" {
		t.Fatalf("message while disk full: %+v %v", req, err)
	}
	view.Release()
	fsys.SetDiskUsage(40, 100)
	if _, err := s.RunOnce(); err != nil || s.CheckWritable() != nil {
		t.Fatalf("writes did not resume at 40%%: %v", s.CheckWritable())
	}
}

// enospc is what a file operation returns on a full disk.
var enospc = &os.PathError{Op: "write", Path: "/store/commitlog/00000000000000000000", Err: unix.ENOSPC}

func TestRetentionRecheckIntervalValidate(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		c := DefaultRetentionConfig()
		c.RecheckInterval = d
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("RecheckInterval %v: %v, want ErrInvalidConfig", d, err)
		}
	}
}

// A write failing with ENOSPC refuses writes at once, although the last
// usage read was low; the guard holds for RecheckInterval, then the next
// refused write re-reads usage and lets writes through.
func TestRetentionENOSPCSetsGuardAtOnce(t *testing.T) {
	fs := storage.NewFaultFS(1)
	fs.SetDiskUsage(50, 100)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	s := newTestCleaner(t, fs, &fakeSegments{mods: []time.Time{clock.t}}, clock, nil, nil)
	if _, err := s.RunOnce(); err != nil || s.DiskFull() {
		t.Fatalf("50%%: full=%v err=%v", s.DiskFull(), err)
	}
	if s.NoteWriteError(&os.PathError{Op: "write", Path: "x", Err: unix.EIO}) || s.NoteWriteError(nil) || s.DiskFull() {
		t.Fatal("EIO or nil must not set the disk guard")
	}
	if !s.NoteWriteError(fmt.Errorf("checkpoint: %w", enospc)) || !s.DiskFull() {
		t.Fatal("a wrapped ENOSPC must set the disk guard at once")
	}
	if err := s.CheckWritable(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("CheckWritable right after ENOSPC: %v, want ErrDiskFull", err)
	}
	// Neither a refused write nor a full check lifts it during the hold.
	clock.t = clock.t.Add(499 * time.Millisecond)
	if _, err := s.RunOnce(); err != nil || s.CheckWritable() == nil {
		t.Fatalf("guard lifted %v after ENOSPC, before RecheckInterval (err %v)", 499*time.Millisecond, err)
	}
	clock.t = clock.t.Add(time.Millisecond)
	if err := s.CheckWritable(); err != nil {
		t.Fatalf("usage 50%% one RecheckInterval after ENOSPC: %v, want writes resumed", err)
	}
	if s.DiskFull() {
		t.Fatal("guard still set after the write passed")
	}
}

// While the guard is set, refused writes re-read usage at most once per
// RecheckInterval, and the 90/85 hysteresis still applies to those reads.
func TestRetentionRefusedWriteRechecks(t *testing.T) {
	fs := storage.NewFaultFS(1)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	s := newTestCleaner(t, fs, &fakeSegments{mods: []time.Time{clock.t}}, clock, nil, nil)
	fs.SetDiskUsage(95, 100)
	if _, err := s.RunOnce(); err != nil || !s.DiskFull() {
		t.Fatalf("95%%: full=%v err=%v", s.DiskFull(), err)
	}
	if s.CheckWritable() == nil { // re-reads (first time), still 95 %
		t.Fatal("95%: write allowed")
	}
	fs.SetDiskUsage(50, 100)
	clock.t = clock.t.Add(100 * time.Millisecond)
	if s.CheckWritable() == nil {
		t.Fatal("usage re-read within RecheckInterval of the last one (want rate-limited)")
	}
	fs.SetDiskUsage(88, 100)
	clock.t = clock.t.Add(400 * time.Millisecond)
	if s.CheckWritable() == nil {
		t.Fatal("88%: writes must stay refused until <= 85%")
	}
	if got := s.UsedRatio(); math.Abs(got-0.88) > 1e-9 {
		t.Fatalf("refused write did not re-read usage: ratio %v, want 0.88", got)
	}
	fs.SetDiskUsage(85, 100)
	clock.t = clock.t.Add(500 * time.Millisecond)
	if err := s.CheckWritable(); err != nil {
		t.Fatalf("85%%: %v, want writes resumed", err)
	}
}

// The background loop re-reads usage every RecheckInterval while the guard
// is set: with a one-hour CheckInterval and no writes at all, the guard
// set by an ENOSPC lifts shortly after usage drops.
func TestRetentionLoopRechecksWhileFull(t *testing.T) {
	fs := storage.NewFaultFS(1)
	fs.SetDiskUsage(99, 100)
	cfg := DefaultRetentionConfig()
	cfg.CheckInterval = time.Hour
	cfg.RecheckInterval = 20 * time.Millisecond
	s, err := NewCleanService(cfg, fs, "/store/commitlog", &fakeSegments{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Close()
	testutil.WaitFor(t, 5*time.Second, "first check sets the guard at 99%", s.DiskFull)
	fs.SetDiskUsage(50, 100)
	start := time.Now()
	testutil.WaitFor(t, 2*time.Second, "guard lifted by the short recheck", func() bool { return !s.DiskFull() })
	t.Logf("guard lifted %v after usage dropped (RecheckInterval %v)", time.Since(start), cfg.RecheckInterval)

	// An ENOSPC between checks: set at once, lifted by the loop after the hold.
	start = time.Now()
	s.NoteWriteError(enospc)
	if !s.DiskFull() {
		t.Fatal("ENOSPC did not set the guard at once")
	}
	testutil.WaitFor(t, 2*time.Second, "guard lifted after the ENOSPC hold", func() bool { return !s.DiskFull() })
	if d := time.Since(start); d < cfg.RecheckInterval {
		t.Fatalf("guard lifted after %v, before the %v hold", d, cfg.RecheckInterval)
	}
}
