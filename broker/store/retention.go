package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// RetentionConfig holds the retention and disk-guard knobs (RocketMQ's
// fileReservedTime, deleteWhen, diskMaxUsedSpaceRatio and the two fixed
// thresholds of DefaultMessageStore.CleanCommitLogService).
type RetentionConfig struct {
	// FileReservedTime is how long a CommitLog segment is kept after its last
	// write (fileReservedTime, hours in broker.conf; 72 h).
	FileReservedTime time.Duration
	// DeleteWhen lists the hours of the day (0–23, ";"-separated, e.g. "04"
	// or "04;05") at which expired segments are deleted when the disk is not
	// under pressure.
	DeleteWhen string
	// DiskMaxUsedSpaceRatio (percent, 75): above it expired segments are
	// deleted at once instead of waiting for DeleteWhen.
	DiskMaxUsedSpaceRatio int
	// CleanForciblyRatio (percent, 85): above it the oldest segments are
	// deleted even if not expired (RocketMQ's cleanImmediately).
	CleanForciblyRatio int
	// DiskFullRatio (percent, 90): above it writes are refused with
	// ErrDiskFull; reads go on. Writes resume once use is back at or below
	// CleanForciblyRatio (the gap keeps the flag from flapping). A write
	// that fails with ENOSPC sets the guard at once (NoteWriteError), and
	// it then holds for at least RecheckInterval even if use looks low
	// (quota, reserved blocks), so a disk that keeps failing is not retried
	// more often than that.
	DiskFullRatio int
	// CheckInterval is the period of the background check (10 s).
	CheckInterval time.Duration
	// RecheckInterval (500 ms) is how often disk use is re-read while
	// writes are refused, by the background loop and at most that often by
	// a refused write, so writes resume within about this long of space
	// coming back instead of at the next CheckInterval.
	// Only the cheap usage read runs this often; deletion keeps the
	// CheckInterval cadence.
	RecheckInterval time.Duration
	// MaxDeletePerRun bounds the segments deleted in one check, so a big
	// backlog is removed gradually instead of in one long stall (RocketMQ
	// deletes at most 10 per run).
	MaxDeletePerRun int
	// Now is the clock; nil means time.Now. Tests inject one to reach the
	// DeleteWhen hour and file ages.
	Now func() time.Time
}

// DefaultRetentionConfig returns RocketMQ's defaults.
func DefaultRetentionConfig() RetentionConfig {
	return RetentionConfig{
		FileReservedTime:      72 * time.Hour,
		DeleteWhen:            "04",
		DiskMaxUsedSpaceRatio: 75,
		CleanForciblyRatio:    85,
		DiskFullRatio:         90,
		CheckInterval:         10 * time.Second,
		RecheckInterval:       500 * time.Millisecond,
		MaxDeletePerRun:       10,
	}
}

// Validate checks the values and says which one is wrong.
func (c RetentionConfig) Validate() error {
	if c.FileReservedTime <= 0 {
		return fmt.Errorf("%w: fileReservedTime must be positive, got %v", ErrInvalidConfig, c.FileReservedTime)
	}
	if _, err := parseDeleteWhen(c.DeleteWhen); err != nil {
		return err
	}
	if c.DiskMaxUsedSpaceRatio < 10 || c.DiskMaxUsedSpaceRatio > 95 {
		return fmt.Errorf("%w: diskMaxUsedSpaceRatio must be within 10..95 percent, got %d", ErrInvalidConfig, c.DiskMaxUsedSpaceRatio)
	}
	if c.CleanForciblyRatio <= 0 || c.CleanForciblyRatio > 100 || c.DiskFullRatio <= 0 || c.DiskFullRatio > 100 ||
		c.CleanForciblyRatio > c.DiskFullRatio {
		return fmt.Errorf("%w: disk ratios must satisfy 0 < cleanForcibly (%d) <= diskFull (%d) <= 100",
			ErrInvalidConfig, c.CleanForciblyRatio, c.DiskFullRatio)
	}
	if c.CheckInterval <= 0 {
		return fmt.Errorf("%w: retention check interval must be positive, got %v", ErrInvalidConfig, c.CheckInterval)
	}
	if c.RecheckInterval <= 0 {
		// Above CheckInterval it is harmless: the full check comes first.
		return fmt.Errorf("%w: disk-full recheck interval must be positive, got %v", ErrInvalidConfig, c.RecheckInterval)
	}
	if c.MaxDeletePerRun <= 0 {
		return fmt.Errorf("%w: retention max deletions per run must be positive, got %d", ErrInvalidConfig, c.MaxDeletePerRun)
	}
	return nil
}

// parseDeleteWhen parses "04" or "04;05" into a set of hours.
func parseDeleteWhen(s string) (map[int]bool, error) {
	hours := map[int]bool{}
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		h, err := strconv.Atoi(part)
		if err != nil || h < 0 || h > 23 {
			return nil, fmt.Errorf("%w: deleteWhen %q: %q is not an hour 00..23", ErrInvalidConfig, s, part)
		}
		hours[h] = true
	}
	if len(hours) == 0 {
		return nil, fmt.Errorf("%w: deleteWhen %q names no hour (want e.g. \"04\" or \"04;05\")", ErrInvalidConfig, s)
	}
	return hours, nil
}

// ExpiringFiles is what retention needs from the CommitLog's segment queue
// (*MappedFileQueue has these methods): delete segments last written before
// a time, oldest first, and report the new minimum offset.
type ExpiringFiles interface {
	DeleteExpired(olderThan time.Time, keepLast int, maxDelete int) (int, error)
	MinOffset() int64
}

// PhyOffsetCleaner drops index files whose entries all point below the
// CommitLog's minimum offset (ConsumeQueueStore and IndexService).
type PhyOffsetCleaner interface {
	DeleteExpired(phyMinOffset int64) (int, error)
}

// CleanResult reports one retention check.
type CleanResult struct {
	// UsedRatio is the disk use seen before deleting, in [0, 1].
	UsedRatio float64
	// CommitLogDeleted, ConsumeQueueDeleted and IndexDeleted count removed files.
	CommitLogDeleted, ConsumeQueueDeleted, IndexDeleted int
	// DiskFull is the write guard after the check.
	DiskFull bool
}

// CleanService deletes expired CommitLog segments and the ConsumeQueue and
// index files that only point into deleted segments, and guards writes when
// the disk fills up. Files are destroyed through MappedFile reference
// counting, so a reader holding a slice keeps its mapping until it releases.
type CleanService struct {
	cfg       RetentionConfig
	hours     map[int]bool
	fsys      storage.FS
	diskPath  string
	commitLog ExpiringFiles
	cleaners  []PhyOffsetCleaner // [consume queues, index]; nil entries skipped
	log       *zap.Logger

	diskFull  atomic.Bool
	usedRatio atomic.Uint64 // math.Float64bits of the last ratio seen
	manual    atomic.Int32  // pending manual deletion requests
	// holdUntil (cfg.Now Unix nanoseconds): after an ENOSPC the guard is
	// not lifted before this, whatever the usage read says.
	holdUntil atomic.Int64
	// lastRecheck (cfg.Now Unix nanoseconds) rate-limits the usage re-reads
	// that refused writes trigger.
	lastRecheck atomic.Int64
	// wake tells the loop the guard was set between checks, so it switches
	// to RecheckInterval at once.
	wake chan struct{}

	mu         sync.Mutex // serializes RunOnce (background loop vs callers)
	lastPhyMin int64      // CommitLog minimum the cleaners last ran for; guarded by mu
	warned     bool       // a disk-pressure warning is out; guarded by mu

	startOnce sync.Once
	stop      context.CancelFunc
	done      chan struct{}
}

// NewCleanService builds the retention service. diskPath is where the
// CommitLog lives (its file system's usage is what the guards watch); cq and
// idx may be nil.
func NewCleanService(cfg RetentionConfig, fsys storage.FS, diskPath string, commitLog ExpiringFiles,
	cq, idx PhyOffsetCleaner, log *zap.Logger) (*CleanService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hours, _ := parseDeleteWhen(cfg.DeleteWhen)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &CleanService{
		cfg: cfg, hours: hours, fsys: fsys, diskPath: diskPath, commitLog: commitLog,
		cleaners: []PhyOffsetCleaner{cq, idx}, log: log, lastPhyMin: -1, wake: make(chan struct{}, 1),
	}, nil
}

// CheckWritable returns nil while writes are allowed and an error wrapping
// ErrDiskFull while disk use is above the full ratio or a write just failed
// with ENOSPC. The put path calls it before every append; while writes are
// allowed it is one atomic load. A refused write re-reads disk use, at most
// once per RecheckInterval, so the first write after space came back can
// already pass.
func (s *CleanService) CheckWritable() error {
	if !s.diskFull.Load() {
		return nil
	}
	s.maybeRecheck()
	if !s.diskFull.Load() {
		return nil
	}
	return fmt.Errorf("%w: disk use %.1f%% of %s is above diskFull ratio %d%%; writes resume below %d%% (delete data or add space)",
		ErrDiskFull, s.UsedRatio()*100, s.diskPath, s.cfg.DiskFullRatio, s.cfg.CleanForciblyRatio)
}

// DiskFull reports whether writes are currently refused.
func (s *CleanService) DiskFull() bool { return s.diskFull.Load() }

// NoteWriteError sets the write guard at once when err (the raw error of a
// file operation: a write, fallocate, sync, checkpoint or snapshot, or the
// store's ErrDiskFull that wraps one) says the disk has no room (ENOSPC,
// EDQUOT), rather than waiting for the next usage
// check to notice. It reports whether err was such an error. The guard then
// holds for at least RecheckInterval and lifts once use is at or below
// CleanForciblyRatio. Safe for concurrent use; cheap for other errors.
func (s *CleanService) NoteWriteError(err error) bool {
	if err == nil || (!storage.IsNoSpace(err) && !errors.Is(err, ErrDiskFull)) {
		return false
	}
	s.holdUntil.Store(s.cfg.Now().Add(s.cfg.RecheckInterval).UnixNano())
	if !s.diskFull.Swap(true) {
		s.log.Error("write failed for lack of disk space: refusing writes until space is freed",
			zap.String("path", s.diskPath), zap.Error(err), zap.Duration("recheckEvery", s.cfg.RecheckInterval))
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// maybeRecheck re-reads disk use for a refused write, at most once per
// RecheckInterval and never waiting for a running check (the put path must
// not stall behind a deletion).
func (s *CleanService) maybeRecheck() {
	now := s.cfg.Now().UnixNano()
	last := s.lastRecheck.Load()
	if now-last < int64(s.cfg.RecheckInterval) || !s.lastRecheck.CompareAndSwap(last, now) {
		return
	}
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	if _, _, _, err := s.checkDiskLocked(); err != nil {
		s.log.Debug("disk usage recheck failed", zap.Error(err))
	}
}

// recheck re-reads disk use for the background loop while the guard is set.
func (s *CleanService) recheck() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastRecheck.Store(s.cfg.Now().UnixNano())
	if _, _, _, err := s.checkDiskLocked(); err != nil {
		s.log.Warn("disk usage recheck failed", zap.Error(err))
	}
}

// UsedRatio is the disk use (0..1) seen by the last check.
func (s *CleanService) UsedRatio() float64 { return math.Float64frombits(s.usedRatio.Load()) }

// DeleteExpiredManually asks the next checks to delete expired segments now
// regardless of DeleteWhen (RocketMQ's executeDeleteFilesManually; 20 runs).
func (s *CleanService) DeleteExpiredManually() { s.manual.Store(20) }

// checkDisk reads disk use and updates the write guard; it reports whether
// expired files should go at once and whether unexpired ones must go too.
func (s *CleanService) checkDiskLocked() (ratio float64, spaceFull, forced bool, err error) {
	used, total, err := s.fsys.DiskUsage(s.diskPath)
	if err != nil {
		return 0, false, false, fmt.Errorf("retention: disk usage of %s: %w", s.diskPath, err)
	}
	if total > 0 {
		ratio = float64(used) / float64(total)
	}
	s.usedRatio.Store(math.Float64bits(ratio))
	pct := ratio * 100
	switch {
	case pct > float64(s.cfg.DiskFullRatio):
		if !s.diskFull.Swap(true) {
			s.log.Error("disk almost full: refusing writes until space is freed",
				zap.String("path", s.diskPath), zap.Float64("usedPercent", pct), zap.Int("diskFullRatio", s.cfg.DiskFullRatio))
		}
		forced = true
	case pct > float64(s.cfg.CleanForciblyRatio):
		forced = true
	case s.cfg.Now().UnixNano() < s.holdUntil.Load():
		// A write failed with ENOSPC moments ago; usage may look fine
		// (quota, reserved blocks, a racing writer): keep refusing until
		// the hold ends, then trust the usage read.
	default:
		if s.diskFull.Swap(false) {
			s.log.Info("disk space recovered: accepting writes again",
				zap.String("path", s.diskPath), zap.Float64("usedPercent", pct))
		}
	}
	spaceFull = pct > float64(s.cfg.DiskMaxUsedSpaceRatio)
	if spaceFull && !s.warned {
		s.log.Warn("disk use above diskMaxUsedSpaceRatio: deleting expired segments now",
			zap.String("path", s.diskPath), zap.Float64("usedPercent", pct), zap.Bool("forced", forced))
	}
	s.warned = spaceFull
	return ratio, spaceFull, forced, nil
}

// RunOnce performs one check: update the disk guard, delete CommitLog
// segments when it is time (DeleteWhen hour, disk above the max ratio, or a
// manual request), then drop ConsumeQueue and index files that point only
// below the CommitLog's minimum. The background loop calls it every
// CheckInterval; tests and admin commands call it directly.
func (s *CleanService) RunOnce() (CleanResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res CleanResult
	ratio, spaceFull, forced, err := s.checkDiskLocked()
	res.UsedRatio = ratio
	if err != nil {
		res.DiskFull = s.diskFull.Load()
		return res, err
	}
	now := s.cfg.Now()
	timeUp := s.hours[now.Hour()]
	manual := s.manual.Load() > 0
	if manual {
		s.manual.Add(-1)
	}
	if timeUp || spaceFull || manual || forced {
		olderThan := now.Add(-s.cfg.FileReservedTime)
		if forced {
			// Disk pressure beats retention time: any segment but the one
			// being written may go, oldest first.
			olderThan = now.Add(100 * 365 * 24 * time.Hour)
		}
		n, err := s.commitLog.DeleteExpired(olderThan, 1, s.cfg.MaxDeletePerRun)
		res.CommitLogDeleted = n
		if n > 0 {
			s.log.Info("deleted CommitLog segments", zap.Int("count", n), zap.Bool("forced", forced),
				zap.Bool("timeUp", timeUp), zap.Bool("spaceFull", spaceFull), zap.Bool("manual", manual))
		}
		if err != nil {
			res.DiskFull = s.diskFull.Load()
			return res, fmt.Errorf("retention: delete CommitLog segments: %w", err)
		}
		if n > 0 {
			// Re-read usage so freed space lifts the write guard now
			// rather than one interval later.
			if _, _, _, err := s.checkDiskLocked(); err != nil {
				s.log.Warn("disk usage after deletion", zap.Error(err))
			}
		}
	}
	if phyMin := s.commitLog.MinOffset(); phyMin != s.lastPhyMin {
		for i, c := range s.cleaners {
			if c == nil {
				continue
			}
			n, err := c.DeleteExpired(phyMin)
			if i == 0 {
				res.ConsumeQueueDeleted = n
			} else {
				res.IndexDeleted = n
			}
			if err != nil {
				res.DiskFull = s.diskFull.Load()
				return res, fmt.Errorf("retention: delete index files below offset %d: %w", phyMin, err)
			}
		}
		s.lastPhyMin = phyMin
	}
	res.DiskFull = s.diskFull.Load()
	return res, nil
}

// Start runs the periodic check in a goroutine until Close. Check errors are
// logged, never fatal: the next tick tries again.
func (s *CleanService) Start() {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.stop = cancel
		s.done = make(chan struct{})
		go func() {
			defer close(s.done)
			s.Run(ctx)
		}()
	})
}

// Run checks once, then every CheckInterval, until ctx is done. While
// writes are refused it also re-reads disk use every RecheckInterval, so
// the guard lifts soon after space comes back. The schedule uses the real
// clock (cfg.Now only decides ages, hours and the ENOSPC hold).
func (s *CleanService) Run(ctx context.Context) {
	lastFull := time.Now()
	lastProbe := lastFull // last usage read by this loop
	if _, err := s.RunOnce(); err != nil {
		s.log.Warn("retention check failed", zap.Error(err))
	}
	t := time.NewTimer(s.cfg.CheckInterval)
	defer t.Stop()
	for {
		wait := s.cfg.CheckInterval - time.Since(lastFull)
		if s.diskFull.Load() {
			// Relative to the last read, not to now: a stream of ENOSPC
			// wake-ups must not keep pushing the recheck out.
			wait = min(wait, s.cfg.RecheckInterval-time.Since(lastProbe))
		}
		t.Reset(max(wait, 0)) // Go >= 1.23 timers: Reset needs no drain
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			continue // the guard was just set: recompute the wait
		case <-t.C:
		}
		if time.Since(lastFull) >= s.cfg.CheckInterval {
			lastFull = time.Now()
			if _, err := s.RunOnce(); err != nil {
				s.log.Warn("retention check failed", zap.Error(err))
			}
		} else if s.diskFull.Load() {
			s.recheck()
		}
		lastProbe = time.Now()
	}
}

// Close stops the goroutine started by Start and waits for it.
func (s *CleanService) Close() {
	if s.stop != nil {
		s.stop()
		<-s.done
	}
}
