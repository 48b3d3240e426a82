package store

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"go.uber.org/goleak"
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

func newTestCleaner(t *testing.T, fs *FaultFS, segs ExpiringFiles, clock *manualClock, cq, idx PhyOffsetCleaner) *CleanService {
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
	fs := NewFaultFS(1)
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
	fs := NewFaultFS(1)
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
	fs := NewFaultFS(1)
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
	fs := NewFaultFS(1)
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
	fs := NewFaultFS(1)
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
	fsys := NewFaultFS(11)
	clock := &manualClock{t: time.Date(2026, 1, 10, 3, 0, 0, 0, time.Local)}
	fsys.SetNow(clock.Now)
	fsys.SetDiskUsage(50, 100)
	l := newSegLog(t, fsys, "/store", 4096)
	msgs := fill(l, 200)
	f := newDispatchFixture(t, fsys, "/store", l, 0)
	if _, err := f.r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
		t.Fatal(err)
	}
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
