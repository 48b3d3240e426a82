package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// Config configures a MessageStore. Fields tagged `prop` are loaded from
// broker.conf under RocketMQ's key names (internal/config); durations given
// as bare integers are milliseconds, as in RocketMQ.
type Config struct {
	// StorePathRootDir holds checkpoint, abort, consumequeue/ and index/.
	StorePathRootDir string `prop:"storePathRootDir"`
	// StorePathCommitLog is the CommitLog directory; "" means
	// StorePathRootDir/commitlog.
	StorePathCommitLog string `prop:"storePathCommitLog"`
	// MappedFileSizeCommitLog is the CommitLog segment size (1 GiB). Must be
	// equal on all members of a Raft group.
	MappedFileSizeCommitLog int `prop:"mappedFileSizeCommitLog"`
	// MappedFileSizeConsumeQueue is the ConsumeQueue file size in bytes
	// (300,000 units × 20 bytes); a multiple of 20.
	MappedFileSizeConsumeQueue int `prop:"mappedFileSizeConsumeQueue"`
	// FlushDiskType is SYNC_FLUSH or ASYNC_FLUSH: whether the Raft log
	// store fdatasyncs every append before it is acknowledged (the broker
	// passes it to raftlog's Options.Sync).
	FlushDiskType FlushDiskType `prop:"flushDiskType"`
	// FlushIntervalConsumeQueue is how often ConsumeQueues, the index files
	// no longer written and the checkpoint are flushed (1 s); the live
	// index file is flushed at snapshots, catch-ups and close.
	FlushIntervalConsumeQueue time.Duration `prop:"flushIntervalConsumeQueue"`
	// MaxMessageSize limits one stored message or batch (4 MiB).
	MaxMessageSize int `prop:"maxMessageSize"`
	// FileReservedTime is how many hours CommitLog segments are kept (72).
	FileReservedTime int `prop:"fileReservedTime"`
	// DeleteWhen is the hour(s) of day expired segments are deleted ("04").
	DeleteWhen string `prop:"deleteWhen"`
	// DiskMaxUsedSpaceRatio (percent, 75): above it expired segments go at once.
	DiskMaxUsedSpaceRatio int `prop:"diskMaxUsedSpaceRatio"`
	// CleanResourceInterval is the retention check period (10 s).
	CleanResourceInterval time.Duration `prop:"cleanResourceInterval"`
	// DiskFullRecheckInterval is how often disk use is re-read while writes
	// are refused for lack of space (500 ms), so writes resume soon after
	// space comes back; 0 keeps the default.
	DiskFullRecheckInterval time.Duration `prop:"diskFullRecheckInterval"`
	// MessageIndexEnable turns the key index on (true).
	MessageIndexEnable bool `prop:"messageIndexEnable"`
	// MaxHashSlotNum and MaxIndexNum size an index file (5M slots, 20M entries).
	MaxHashSlotNum int `prop:"maxHashSlotNum"`
	MaxIndexNum    int `prop:"maxIndexNum"`
	// AccessMessageInMemoryMaxRatio (percent of physical memory, 40): a
	// message less than this far behind the CommitLog's end counts as
	// recent, for QueueStartsRecently.
	AccessMessageInMemoryMaxRatio int `prop:"accessMessageInMemoryMaxRatio"`

	// StoreHost is this broker's address, written into every message and
	// its msgId (set by the broker from its listen address).
	StoreHost netip.AddrPort
	// FS is the file system (nil: OSFS()); tests pass a FaultFS.
	FS storage.FS
	// Log receives structured logs (nil: zap.NewNop()).
	Log *zap.Logger
	// Now is the clock for store timestamps (nil: time.Now).
	Now func() time.Time
	// Raft connects the store to its Raft log (raftmode.go): the Raft log
	// store owns appends to and recovery of the CommitLog's segments.
	// Required by Open.
	Raft *RaftHooks
}

// FlushDiskType selects when appends become durable (RocketMQ flushDiskType).
type FlushDiskType string

// Flush disk types.
const (
	// SyncFlush acknowledges an append only after an fdatasync covering it.
	SyncFlush FlushDiskType = "SYNC_FLUSH"
	// AsyncFlush acknowledges without waiting for the disk.
	AsyncFlush FlushDiskType = "ASYNC_FLUSH"
)

// DefaultConfig returns RocketMQ's defaults with the root under the user's
// home directory (~/store), like RocketMQ.
func DefaultConfig() Config {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return Config{
		StorePathRootDir:              filepath.Join(home, "store"),
		MappedFileSizeCommitLog:       1 << 30,
		MappedFileSizeConsumeQueue:    DefaultConsumeQueueUnits * CQUnitSize,
		FlushDiskType:                 AsyncFlush,
		FlushIntervalConsumeQueue:     time.Second,
		MaxMessageSize:                4 << 20,
		FileReservedTime:              72,
		DeleteWhen:                    "04",
		DiskMaxUsedSpaceRatio:         75,
		CleanResourceInterval:         10 * time.Second,
		MessageIndexEnable:            true,
		MaxHashSlotNum:                DefaultMaxHashSlotNum,
		MaxIndexNum:                   DefaultMaxIndexNum,
		AccessMessageInMemoryMaxRatio: 40,
		StoreHost:                     netip.MustParseAddrPort("127.0.0.1:10911"),
	}
}

// Validate checks the configuration and names the key at fault.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...))
	}
	if c.StorePathRootDir == "" {
		errs = append(errs, bad("storePathRootDir", "must be set"))
	}
	if c.MaxMessageSize <= 0 {
		errs = append(errs, bad("maxMessageSize", "must be positive, got %d", c.MaxMessageSize))
	}
	if c.MappedFileSizeCommitLog < c.MaxMessageSize+wire.BlankHeaderSize {
		errs = append(errs, bad("mappedFileSizeCommitLog", "%d cannot hold a message of maxMessageSize %d plus an %d-byte end-of-segment filler",
			c.MappedFileSizeCommitLog, c.MaxMessageSize, wire.BlankHeaderSize))
	}
	if c.MappedFileSizeConsumeQueue < CQUnitSize || c.MappedFileSizeConsumeQueue%CQUnitSize != 0 {
		errs = append(errs, bad("mappedFileSizeConsumeQueue", "must be a positive multiple of %d, got %d", CQUnitSize, c.MappedFileSizeConsumeQueue))
	}
	if c.FlushDiskType != SyncFlush && c.FlushDiskType != AsyncFlush {
		errs = append(errs, bad("flushDiskType", "must be SYNC_FLUSH or ASYNC_FLUSH, got %q", c.FlushDiskType))
	}
	if c.FlushIntervalConsumeQueue <= 0 {
		errs = append(errs, bad("flushIntervalConsumeQueue", "must be positive"))
	}
	if c.FileReservedTime <= 0 {
		errs = append(errs, bad("fileReservedTime", "must be a positive number of hours, got %d", c.FileReservedTime))
	}
	if c.AccessMessageInMemoryMaxRatio < 0 || c.AccessMessageInMemoryMaxRatio > 100 {
		errs = append(errs, bad("accessMessageInMemoryMaxRatio", "must be a percentage from 0 to 100, got %d", c.AccessMessageInMemoryMaxRatio))
	}
	if c.MessageIndexEnable && (c.MaxHashSlotNum <= 0 || c.MaxIndexNum <= 0) {
		errs = append(errs, bad("maxHashSlotNum/maxIndexNum", "must be positive"))
	}
	if err := c.retentionConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Config) commitLogDir() string {
	if c.StorePathCommitLog != "" {
		return c.StorePathCommitLog
	}
	return filepath.Join(c.StorePathRootDir, "commitlog")
}

func (c *Config) retentionConfig() RetentionConfig {
	r := DefaultRetentionConfig()
	r.FileReservedTime = time.Duration(c.FileReservedTime) * time.Hour
	r.DeleteWhen = c.DeleteWhen
	r.DiskMaxUsedSpaceRatio = c.DiskMaxUsedSpaceRatio
	if c.CleanResourceInterval > 0 {
		r.CheckInterval = c.CleanResourceInterval
	}
	if c.DiskFullRecheckInterval > 0 {
		r.RecheckInterval = c.DiskFullRecheckInterval
	}
	r.Now = c.Now
	return r
}

// MessageStore is the store facade (RocketMQ DefaultMessageStore) of one
// Raft group member: the CommitLog's segments (written by the Raft log
// store), ConsumeQueues, index, dispatcher, retention and checkpoint.
type MessageStore struct {
	cfg Config
	log *zap.Logger
	fs  storage.FS

	cl    *CommitLog
	cqs   *ConsumeQueueStore
	idx   *IndexService
	reput *ReputService
	clean *CleanService
	// physicTimestamp is the checkpoint's PhysicMsgTimestamp as read at
	// Open; nothing here advances it, it is written back unchanged.
	physicTimestamp int64
	// recentBytes is accessMessageInMemoryMaxRatio of physical memory
	// (QueueStartsRecently).
	recentBytes int64
	ckptMu      sync.Mutex // serializes checkpoint writes
	closed      atomic.Bool
	quit        chan struct{}
	wg          sync.WaitGroup
	closeMu     sync.Mutex
}

// Open opens (creating if needed) the store under cfg.StorePathRootDir: the
// Raft log store is opened over the CommitLog's segments (cfg.Raft.OpenLog,
// which recovers them), ConsumeQueues are cut to the CommitLog's end and,
// after a crash, their units past the checkpoint are verified; then
// checkpointing and retention start. Messages reach the ConsumeQueues when
// the Raft FSM dispatches them (Reput().DispatchRequests), also when it
// re-applies the log after a restart.
func Open(cfg Config) (*MessageStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Raft == nil || cfg.Raft.OpenLog == nil {
		return nil, fmt.Errorf("%w: the store needs its Raft log (Config.Raft.OpenLog)", ErrInvalidConfig)
	}
	if cfg.FS == nil {
		cfg.FS = storage.OSFS()
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &MessageStore{cfg: cfg, log: cfg.Log, fs: cfg.FS, quit: make(chan struct{}),
		recentBytes: physicalMemory() / 100 * int64(cfg.AccessMessageInMemoryMaxRatio)}
	if err := s.open(); err != nil {
		s.closeParts()
		return nil, err
	}
	return s, nil
}

func (s *MessageStore) abortPath() string { return filepath.Join(s.cfg.StorePathRootDir, "abort") }
func (s *MessageStore) checkpointPath() string {
	return filepath.Join(s.cfg.StorePathRootDir, "checkpoint")
}

// rootDirs are the directories the store's files live under: the root and,
// when configured elsewhere, the CommitLog's.
func (s *MessageStore) rootDirs() []string {
	dirs := []string{s.cfg.StorePathRootDir}
	if cl := s.cfg.commitLogDir(); !isUnder(cl, s.cfg.StorePathRootDir) {
		dirs = append(dirs, cl)
	}
	return dirs
}

// isUnder reports whether path is dir or lies beneath it.
func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (s *MessageStore) open() error {
	cfg := &s.cfg
	if err := storage.MkdirAllDurable(s.fs, cfg.StorePathRootDir); err != nil {
		return fmt.Errorf("store: create %s: %w", cfg.StorePathRootDir, err)
	}
	abnormal, err := fileExists(s.fs, s.abortPath())
	if err != nil {
		return err
	}
	// Nothing writes the checkpoint before the flush loop starts.
	if err := storage.RemoveTempFiles(s.fs, s.checkpointPath()); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	ckpt, haveCkpt, err := readCheckpoint(s.fs, s.checkpointPath())
	if err != nil {
		s.log.Warn("checkpoint unreadable; verifying every ConsumeQueue unit", zap.Error(err))
		abnormal, haveCkpt = true, false
	}
	// A kill between a mkdir or a file's creation and the sync of its
	// parent leaves a name nothing syncs again; make the names below the
	// root durable before anything acknowledged comes to rest under them
	// (all of them after an unclean stop, see SyncNames).
	for _, dir := range s.rootDirs() {
		if err := storage.SyncNames(s.fs, dir, abnormal); err != nil {
			return fmt.Errorf("store: make the names under %s durable: %w", dir, err)
		}
	}
	if err := createAbortFile(s.fs, s.abortPath()); err != nil {
		return fmt.Errorf("store: create abort file: %w", err)
	}
	s.physicTimestamp = ckpt.PhysicMsgTimestamp
	s.cl, err = newCommitLog(s.fs, cfg.commitLogDir(), cfg.MappedFileSizeCommitLog, s.log)
	if err != nil {
		return err
	}
	// The Raft log store recovers (and syncs) its own space.
	if err := cfg.Raft.OpenLog(s.cl.mfq); err != nil {
		return fmt.Errorf("store: open the Raft log over the CommitLog: %w", err)
	}
	s.log.Info("CommitLog opened", zap.Bool("abnormal", abnormal), zap.Int64("min", s.cl.MinOffset()),
		zap.Int64("end", s.cl.MaxOffset()))

	s.cqs = NewConsumeQueueStore(s.fs, filepath.Join(cfg.StorePathRootDir, "consumequeue"),
		cfg.MappedFileSizeConsumeQueue/CQUnitSize, s.log)
	if err := s.cqs.Load(); err != nil {
		return err
	}
	if err := s.cqs.TruncateDirtyLogicFiles(s.cl.MaxOffset()); err != nil {
		return err
	}
	if err := s.cqs.CorrectMinOffset(s.cl.MinOffset()); err != nil {
		return err
	}
	if cfg.MessageIndexEnable {
		s.idx = NewIndexService(s.fs, filepath.Join(cfg.StorePathRootDir, "index"), cfg.MaxHashSlotNum, cfg.MaxIndexNum, cfg.Now, s.log)
		if err := s.idx.Load(!abnormal, ckpt.IndexMsgTimestamp); err != nil {
			return err
		}
	}
	if abnormal {
		// Units written after the checkpoint may be torn or point at
		// truncated messages: cut them. The FSM re-applies the log after its
		// snapshot, which re-adds them (dispatching is idempotent).
		recheckFrom := int64(0)
		if haveCkpt {
			// Units of messages below the checkpoint's LogicsOffset were
			// durable; only later ones need checking.
			recheckFrom = ckpt.LogicsOffset
		}
		if _, err := s.cqs.VerifyAfterCrash(s.cl.mfq, recheckFrom); err != nil {
			return err
		}
	}
	start := ReputStartOffset(s.cqs, s.idx, s.cl.MinOffset(), s.cl.MaxOffset())
	s.reput, err = NewReputService(ReputConfig{ConsumeQueues: s.cqs, Index: s.idx, StartOffset: start})
	if err != nil {
		return err
	}
	segments := cfg.Raft.Segments
	if segments == nil {
		segments = noExpiry{s.cl.mfq}
	}
	s.clean, err = NewCleanService(cfg.retentionConfig(), s.fs, cfg.commitLogDir(), segments, s.cqs, idxCleaner(s.idx), s.log)
	if err != nil {
		return err
	}
	s.clean.Start()
	s.wg.Add(1)
	go s.checkpointLoop()
	return nil
}

// idxCleaner avoids a typed-nil interface when the index is disabled.
func idxCleaner(idx *IndexService) PhyOffsetCleaner {
	if idx == nil {
		return nil
	}
	return idx
}

// CommitLog exposes the CommitLog (Raft log store, admin tools).
func (s *MessageStore) CommitLog() *CommitLog { return s.cl }

// ConsumeQueues exposes the ConsumeQueue store.
func (s *MessageStore) ConsumeQueues() *ConsumeQueueStore { return s.cqs }

// Reput exposes the dispatcher (long polling registers OnNewMessage).
func (s *MessageStore) Reput() *ReputService { return s.reput }

// DispatchedOffset returns the CommitLog offset up to which messages are in
// their ConsumeQueues.
func (s *MessageStore) DispatchedOffset() int64 { return s.reput.DispatchedOffset() }

func (s *MessageStore) checkpointLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.FlushIntervalConsumeQueue)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			if err := s.writeCheckpoint(false); err != nil {
				s.clean.NoteWriteError(err)
				s.log.Warn("checkpoint failed", zap.Error(err))
			}
		}
	}
}

// writeCheckpoint flushes ConsumeQueues and the index (its live file only
// if liveIndex, see IndexService.FlushSealed), then records how far
// everything is durable.
func (s *MessageStore) writeCheckpoint(liveIndex bool) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	// PhysicOffset is informational (Checkpoint): a leader applies entries
	// its followers made durable before its own sync returns, so the end
	// can be past what this disk holds; Open cuts ConsumeQueues back to the
	// CommitLog the Raft log store recovered.
	c := Checkpoint{PhysicOffset: s.cl.MaxOffset(), PhysicMsgTimestamp: s.physicTimestamp,
		LogicsOffset: s.reput.DispatchedOffset()} // read before the flush: all below is covered by it
	var err error
	if c.LogicsMsgTimestamp, err = s.cqs.Flush(); err != nil {
		return err
	}
	if s.idx != nil {
		flush := s.idx.FlushSealed
		if liveIndex {
			flush = s.idx.Flush
		}
		if c.IndexMsgTimestamp, err = flush(); err != nil {
			return err
		}
	}
	return writeCheckpoint(s.fs, s.checkpointPath(), c)
}

// Close stops retention and checkpointing, flushes ConsumeQueues and the
// index, writes the checkpoint and removes the abort file (a clean
// shutdown), then closes the files. If the checkpoint cannot be written the
// abort file stays, so the next Open verifies the tail.
func (s *MessageStore) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	close(s.quit)
	s.wg.Wait()
	s.clean.Close()
	var errs []error
	if err := s.writeCheckpoint(true); err != nil {
		errs = append(errs, err)
	} else if err := removeAbortFile(s.fs, s.abortPath()); err != nil {
		errs = append(errs, err)
	}
	if err := s.closeParts(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closeParts closes whatever was opened (also after a failed Open).
func (s *MessageStore) closeParts() error {
	var errs []error
	if s.clean != nil && !s.closed.Load() {
		s.clean.Close()
	}
	if s.idx != nil {
		errs = append(errs, s.idx.Close())
	}
	if s.cqs != nil {
		errs = append(errs, s.cqs.Close())
	}
	if s.cl != nil {
		errs = append(errs, s.cl.close())
	}
	return errors.Join(errs...)
}

// physicalMemory returns the machine's physical memory in bytes (0 if it
// cannot be read: then only an empty queue counts as starting recently).
func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
