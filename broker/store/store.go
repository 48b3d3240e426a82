package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
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
	// FlushDiskType is SYNC_FLUSH or ASYNC_FLUSH.
	FlushDiskType FlushDiskType `prop:"flushDiskType"`
	// FlushIntervalCommitLog is the ASYNC_FLUSH period (500 ms).
	FlushIntervalCommitLog time.Duration `prop:"flushIntervalCommitLog"`
	// FlushCommitLogLeastPages is how many dirty 4 KiB pages an ASYNC_FLUSH
	// round waits for (4).
	FlushCommitLogLeastPages int `prop:"flushCommitLogLeastPages"`
	// FlushCommitLogThoroughInterval forces an ASYNC_FLUSH round even below
	// the page threshold (10 s).
	FlushCommitLogThoroughInterval time.Duration `prop:"flushCommitLogThoroughInterval"`
	// FlushIntervalConsumeQueue is how often ConsumeQueues, the index and
	// the checkpoint are flushed (1 s).
	FlushIntervalConsumeQueue time.Duration `prop:"flushIntervalConsumeQueue"`
	// SyncFlushTimeout bounds a SYNC_FLUSH wait (5 s); past it the put
	// returns FLUSH_DISK_TIMEOUT.
	SyncFlushTimeout time.Duration `prop:"syncFlushTimeout"`
	// GroupCommitMaxWait bounds how long a SYNC_FLUSH group commit waits
	// for the appenders of the previous group to return before syncing
	// (500 µs); 0 syncs as soon as anyone waits.
	GroupCommitMaxWait time.Duration `prop:"groupCommitMaxWait"`
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
	// TruncateCorruptCommitLog lets recovery drop everything from a damaged
	// entry below the durable checkpoint instead of refusing to start.
	TruncateCorruptCommitLog bool `prop:"truncateCorruptCommitLog"`

	// StoreHost is this broker's address, written into every message and
	// its msgId (set by the broker from its listen address).
	StoreHost netip.AddrPort
	// FS is the file system (nil: OSFS()); tests pass a FaultFS.
	FS storage.FS
	// Log receives structured logs (nil: zap.NewNop()).
	Log *zap.Logger
	// Now is the clock for store timestamps (nil: time.Now).
	Now func() time.Time
	// Raft, if set, puts the store in Raft mode (raftmode.go): the Raft log
	// store owns appends and recovery of the CommitLog's segments.
	Raft *RaftHooks
}

// DefaultConfig returns RocketMQ's defaults with the root under the user's
// home directory (~/store), like RocketMQ.
func DefaultConfig() Config {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return Config{
		StorePathRootDir:               filepath.Join(home, "store"),
		MappedFileSizeCommitLog:        1 << 30,
		MappedFileSizeConsumeQueue:     DefaultConsumeQueueUnits * CQUnitSize,
		FlushDiskType:                  AsyncFlush,
		FlushIntervalCommitLog:         500 * time.Millisecond,
		FlushCommitLogLeastPages:       4,
		FlushCommitLogThoroughInterval: 10 * time.Second,
		FlushIntervalConsumeQueue:      time.Second,
		SyncFlushTimeout:               5 * time.Second,
		GroupCommitMaxWait:             500 * time.Microsecond,
		MaxMessageSize:                 4 << 20,
		FileReservedTime:               72,
		DeleteWhen:                     "04",
		DiskMaxUsedSpaceRatio:          75,
		CleanResourceInterval:          10 * time.Second,
		MessageIndexEnable:             true,
		MaxHashSlotNum:                 DefaultMaxHashSlotNum,
		MaxIndexNum:                    DefaultMaxIndexNum,
		StoreHost:                      netip.MustParseAddrPort("127.0.0.1:10911"),
	}
}

// Validate checks the configuration and names the key at fault.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...))
	}
	switch {
	case c.StorePathRootDir == "":
		return bad("storePathRootDir", "must be set")
	case c.MaxMessageSize <= 0:
		return bad("maxMessageSize", "must be positive, got %d", c.MaxMessageSize)
	case c.MappedFileSizeCommitLog < c.MaxMessageSize+BlankHeaderSize:
		return bad("mappedFileSizeCommitLog", "%d cannot hold a message of maxMessageSize %d plus an %d-byte end-of-segment filler",
			c.MappedFileSizeCommitLog, c.MaxMessageSize, BlankHeaderSize)
	case c.MappedFileSizeConsumeQueue < CQUnitSize || c.MappedFileSizeConsumeQueue%CQUnitSize != 0:
		return bad("mappedFileSizeConsumeQueue", "must be a positive multiple of %d, got %d", CQUnitSize, c.MappedFileSizeConsumeQueue)
	case c.FlushDiskType != SyncFlush && c.FlushDiskType != AsyncFlush:
		return bad("flushDiskType", "must be SYNC_FLUSH or ASYNC_FLUSH, got %q", c.FlushDiskType)
	case c.FlushIntervalCommitLog <= 0:
		return bad("flushIntervalCommitLog", "must be positive")
	case c.FlushCommitLogLeastPages < 0:
		return bad("flushCommitLogLeastPages", "must not be negative")
	case c.FlushCommitLogThoroughInterval <= 0:
		return bad("flushCommitLogThoroughInterval", "must be positive")
	case c.FlushIntervalConsumeQueue <= 0:
		return bad("flushIntervalConsumeQueue", "must be positive")
	case c.SyncFlushTimeout <= 0:
		return bad("syncFlushTimeout", "must be positive")
	case c.FileReservedTime <= 0:
		return bad("fileReservedTime", "must be a positive number of hours, got %d", c.FileReservedTime)
	case c.MessageIndexEnable && (c.MaxHashSlotNum <= 0 || c.MaxIndexNum <= 0):
		return bad("maxHashSlotNum/maxIndexNum", "must be positive")
	}
	if err := c.retentionConfig().Validate(); err != nil {
		return err
	}
	return nil
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

// PutMessageStatus mirrors RocketMQ's PutMessageStatus.
type PutMessageStatus int

// Put statuses. The error returned with a non-OK status wraps the matching
// sentinel (ErrFlushDiskTimeout, ErrServiceNotAvailable, ErrMessageIllegal).
const (
	PutOK PutMessageStatus = iota
	PutFlushDiskTimeout
	PutServiceNotAvailable
	PutCreateMappedFileFailed
	PutMessageIllegal
	PutPropertiesSizeExceeded
	PutUnknownError
)

// String returns the RocketMQ name of the status.
func (s PutMessageStatus) String() string {
	return [...]string{"PUT_OK", "FLUSH_DISK_TIMEOUT", "SERVICE_NOT_AVAILABLE", "CREATE_MAPPED_FILE_FAILED",
		"MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED", "UNKNOWN_ERROR"}[s]
}

// putStatusOf classifies a put error.
func putStatusOf(err error) PutMessageStatus {
	switch {
	case err == nil:
		return PutOK
	case errors.Is(err, ErrFlushDiskTimeout):
		return PutFlushDiskTimeout
	case errors.Is(err, ErrMessageIllegal):
		return PutMessageIllegal
	case errors.Is(err, ErrServiceNotAvailable), errors.Is(err, ErrDiskFull), errors.Is(err, ErrStoreClosed):
		return PutServiceNotAvailable
	default:
		return PutUnknownError
	}
}

// PutMessageResult is the outcome of PutMessage(s).
type PutMessageResult struct {
	Status PutMessageStatus
	// MsgID, PhysicalOffset and QueueOffset describe the (first) message;
	// for a batch MsgID lists every id comma-separated, as RocketMQ does.
	MsgID          string
	PhysicalOffset int64
	QueueOffset    int64
	StoreTimestamp int64
	// Appended holds one entry per message.
	Appended []AppendResult
}

// MessageStore is the single-node store facade (RocketMQ
// DefaultMessageStore): CommitLog, flush, ConsumeQueues, index, dispatcher,
// retention, checkpoint and recovery.
type MessageStore struct {
	cfg Config
	log *zap.Logger
	fs  storage.FS

	cl      *CommitLog
	flush   *flushService
	cqs     *ConsumeQueueStore
	idx     *IndexService
	reput   *ReputService
	clean   *CleanService
	report  RecoveryReport
	ckptMu  sync.Mutex // serializes checkpoint writes
	closed  atomic.Bool
	quit    chan struct{}
	wg      sync.WaitGroup
	closeMu sync.Mutex
}

// Open opens (creating if needed) the store under cfg.StorePathRootDir,
// recovering after a crash: the CommitLog is scanned and its torn tail cut,
// ConsumeQueues are truncated to it and re-dispatched, then background
// flushing, dispatching, checkpointing and retention start.
func Open(cfg Config) (*MessageStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
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
	s := &MessageStore{cfg: cfg, log: cfg.Log, fs: cfg.FS, quit: make(chan struct{})}
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

func (s *MessageStore) open() error {
	cfg := &s.cfg
	if err := s.fs.MkdirAll(cfg.StorePathRootDir, 0o755); err != nil {
		return fmt.Errorf("store: create %s: %w", cfg.StorePathRootDir, err)
	}
	abnormal, err := fileExists(s.fs, s.abortPath())
	if err != nil {
		return err
	}
	ckpt, haveCkpt, err := readCheckpoint(s.fs, s.checkpointPath())
	if err != nil {
		s.log.Warn("checkpoint unreadable; verifying the whole CommitLog", zap.Error(err))
		abnormal, haveCkpt = true, false
	}
	if err := createAbortFile(s.fs, s.abortPath()); err != nil {
		return fmt.Errorf("store: create abort file: %w", err)
	}
	s.cl, err = newCommitLog(s.fs, commitLogConfig{
		Dir: cfg.commitLogDir(), FileSize: cfg.MappedFileSizeCommitLog, MaxMessageSize: cfg.MaxMessageSize,
		StoreHost: cfg.StoreHost, Now: cfg.Now, Buffered: cfg.FlushDiskType == SyncFlush && cfg.Raft == nil,
	}, s.log)
	if err != nil {
		return err
	}
	if cfg.Raft != nil {
		// The Raft log store recovers (and syncs) its own space.
		if err := cfg.Raft.OpenLog(s.cl.mfq); err != nil {
			return fmt.Errorf("store: open the Raft log over the CommitLog: %w", err)
		}
		s.report = RecoveryReport{End: s.cl.MaxOffset()}
	} else {
		s.report, err = s.cl.recover(abnormal, ckpt, haveCkpt, cfg.TruncateCorruptCommitLog)
		if err != nil {
			return err
		}
		// Recovered bytes may only be in the page cache (process crash): make
		// them durable before anything past them can be acknowledged.
		if err := s.cl.mfq.Flush(); err != nil {
			return fmt.Errorf("store: flush recovered CommitLog: %w", err)
		}
	}
	s.log.Info("CommitLog recovered", zap.Bool("abnormal", abnormal), zap.Int64("scanFrom", s.report.ScanFrom),
		zap.Int64("end", s.report.End), zap.Int64("droppedBytes", s.report.DroppedBytes))

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
	recheckFrom := int64(-1)
	if abnormal {
		// Units written after the crash point may be torn or point at
		// truncated messages: cut them and re-dispatch from where the
		// CommitLog scan started.
		recheckFrom = s.report.ScanFrom
		if haveCkpt {
			// Units of messages below the checkpoint's LogicsOffset were
			// durable; only later ones need checking and re-dispatching.
			recheckFrom = ckpt.LogicsOffset
		}
		// Called through a small interface so this file builds against
		// ConsumeQueueStore versions with and without the hook.
		if v, ok := any(s.cqs).(crashVerifier); ok {
			if _, err := v.VerifyAfterCrash(s.cl.mfq, recheckFrom); err != nil {
				return err
			}
		}
	}
	// Resume dispatching at the newest message any ConsumeQueue holds, or
	// earlier if the index lost files or abnormal recovery re-verified from
	// an earlier segment (same rule as ReputStartOffset; replays are
	// idempotent).
	start := s.cqs.MaxPhysicOffset()
	if s.idx != nil {
		if r := s.idx.RebuildFrom(); r >= 0 {
			start = min(start, r)
		}
	}
	if recheckFrom >= 0 && cfg.Raft == nil {
		start = min(start, recheckFrom)
	}
	start = max(s.cl.MinOffset(), min(start, s.cl.MaxOffset()))
	s.reput, err = NewReputService(ReputConfig{ConsumeQueues: s.cqs, Index: s.idx, Source: s.cl.mfq, StartOffset: start, Log: s.log})
	if err != nil {
		return err
	}
	if cfg.Raft == nil {
		// In Raft mode the FSM re-applies the log after its snapshot instead
		// (the reput scanner cannot walk Raft frames).
		if _, err := s.reput.DispatchUpTo(s.cl.MaxOffset()); err != nil {
			return fmt.Errorf("store: rebuild consume queues from CommitLog offset %d: %w", start, err)
		}
		next := map[topicQueueKey]int64{}
		for _, cq := range s.cqs.All() {
			next[topicQueueKey{cq.Topic(), cq.QueueID()}] = cq.MaxOffset()
		}
		s.cl.setQueueOffsets(next)
		s.reput.TrustFrom(s.cl.MaxOffset())
	}

	s.flush = newFlushService(flushConfig{
		Type: cfg.FlushDiskType, Interval: cfg.FlushIntervalCommitLog, LeastPages: cfg.FlushCommitLogLeastPages,
		ThoroughInterval: cfg.FlushCommitLogThoroughInterval, SyncTimeout: cfg.SyncFlushTimeout,
		GroupWait: cfg.GroupCommitMaxWait,
	}, s.cl, s.log)
	s.flush.physicTimestamp.Store(ckpt.PhysicMsgTimestamp)
	// Consumers see only what the flush mode promises: durable data under
	// SYNC_FLUSH, everything appended under ASYNC_FLUSH (RocketMQ).
	if cfg.FlushDiskType == SyncFlush {
		s.flush.onFlushed = func(int64) { s.reput.Notify() }
	} else {
		s.cl.onAppend = s.reput.Notify
	}
	var segments ExpiringFiles = s.cl.mfq
	if cfg.Raft != nil {
		segments = cfg.Raft.Segments
		if segments == nil {
			segments = noExpiry{s.cl.mfq}
		}
	}
	s.clean, err = NewCleanService(cfg.retentionConfig(), s.fs, cfg.commitLogDir(), segments, s.cqs, idxCleaner(s.idx), s.log)
	if err != nil {
		return err
	}
	if cfg.Raft == nil {
		s.flush.start()
		s.cl.startPrefault()
		s.reput.Start(s.visibleOffset)
	}
	s.clean.Start()
	s.wg.Add(1)
	go s.checkpointLoop()
	return nil
}

// crashVerifier is the ConsumeQueueStore hook that cuts units a crash tore.
type crashVerifier interface {
	VerifyAfterCrash(src SegmentSource, fromPhy int64) (int, error)
}

// idxCleaner avoids a typed-nil interface when the index is disabled.
func idxCleaner(idx *IndexService) PhyOffsetCleaner {
	if idx == nil {
		return nil
	}
	return idx
}

// visibleOffset is how far consumers may see the CommitLog.
func (s *MessageStore) visibleOffset() int64 {
	if s.cfg.Raft != nil {
		return s.cl.MaxOffset() // the Raft log store synced it
	}
	if s.cfg.FlushDiskType == SyncFlush {
		return s.flush.FlushedOffset()
	}
	return s.cl.MaxOffset()
}

// Recovery returns what recovery found at Open.
func (s *MessageStore) Recovery() RecoveryReport { return s.report }

// CommitLog exposes the CommitLog (Raft log store, admin tools).
func (s *MessageStore) CommitLog() *CommitLog { return s.cl }

// ConsumeQueues exposes the ConsumeQueue store.
func (s *MessageStore) ConsumeQueues() *ConsumeQueueStore { return s.cqs }

// Reput exposes the dispatcher (long polling registers OnNewMessage).
func (s *MessageStore) Reput() *ReputService { return s.reput }

// FlushedOffset returns the durable CommitLog offset.
func (s *MessageStore) FlushedOffset() int64 {
	if s.cfg.Raft != nil {
		return s.cl.MaxOffset()
	}
	return s.flush.FlushedOffset()
}

// FlushRounds returns how many CommitLog flushes wrote data since Open; with
// the number of appends it gives the group-commit batch size.
func (s *MessageStore) FlushRounds() int64 { return s.flush.syncs.Load() }

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
			if err := s.writeCheckpoint(); err != nil {
				s.clean.NoteWriteError(err)
				s.log.Warn("checkpoint failed", zap.Error(err))
			}
		}
	}
}

// writeCheckpoint flushes ConsumeQueues and the index, then records how far
// everything is durable.
func (s *MessageStore) writeCheckpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	c := Checkpoint{PhysicOffset: s.FlushedOffset(), PhysicMsgTimestamp: s.flush.physicTimestamp.Load(),
		LogicsOffset: s.reput.DispatchedOffset()} // read before the flush: all below is covered by it
	var err error
	if c.LogicsMsgTimestamp, err = s.cqs.Flush(); err != nil {
		return err
	}
	if s.idx != nil {
		if c.IndexMsgTimestamp, err = s.idx.Flush(); err != nil {
			return err
		}
	}
	return writeCheckpoint(s.fs, s.checkpointPath(), c)
}

// checkWritable says why writes are refused, if they are.
func (s *MessageStore) checkWritable() error {
	if s.closed.Load() {
		return fmt.Errorf("%w: %w", ErrServiceNotAvailable, ErrStoreClosed)
	}
	if s.cfg.Raft != nil {
		return fmt.Errorf("%w: the store is in Raft mode; messages are appended through the Raft group", ErrServiceNotAvailable)
	}
	if err := s.cl.writableErr(); err != nil {
		return err
	}
	if err := s.clean.CheckWritable(); err != nil {
		return fmt.Errorf("%w: %w", ErrServiceNotAvailable, err)
	}
	return nil
}

// PutMessage stores one message. Under SYNC_FLUSH it returns once the
// message is durable (shared fdatasync), unless the WAIT property is
// "false". A non-nil error wraps the sentinel matching Status; with
// FLUSH_DISK_TIMEOUT the result still names the stored message.
func (s *MessageStore) PutMessage(m *Message) (PutMessageResult, error) {
	return s.PutMessages([]*Message{m})
}

// PutMessages stores a batch contiguously (SEND_BATCH_MESSAGE).
func (s *MessageStore) PutMessages(msgs []*Message) (PutMessageResult, error) {
	if err := s.checkWritable(); err != nil {
		return PutMessageResult{Status: putStatusOf(err)}, err
	}
	res, end, err := s.cl.PutMessages(msgs)
	if err != nil {
		// A segment that could not be created or written for lack of space
		// sets the disk guard now, not at the next usage check.
		s.clean.NoteWriteError(err)
		return PutMessageResult{Status: putStatusOf(err)}, err
	}
	r := PutMessageResult{Status: PutOK, Appended: res}
	if len(res) > 0 {
		r.PhysicalOffset, r.QueueOffset, r.StoreTimestamp = res[0].PhysicalOffset, res[0].QueueOffset, res[0].StoreTimestamp
		r.MsgID = res[0].MsgID
		for _, a := range res[1:] {
			r.MsgID += "," + a.MsgID
		}
	}
	if s.cfg.FlushDiskType == SyncFlush {
		if len(msgs) > 0 && msgs[0].Property("WAIT") == "false" {
			s.flush.signal() // not waiting, but the buffered bytes must go out
			return r, nil
		}
		if err := s.flush.waitFlushed(end); err != nil {
			r.Status = putStatusOf(err)
			return r, err
		}
	}
	return r, nil
}

// AppendEncoded appends pre-encoded stored messages (see
// CommitLog.AppendEncoded) and, under SYNC_FLUSH, waits until they are
// durable. Queue offsets are left to the dispatcher.
func (s *MessageStore) AppendEncoded(batch []byte) ([]EntryPos, error) {
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	pos, end, err := s.cl.AppendEncoded(batch)
	if err != nil {
		return nil, err
	}
	if s.cfg.FlushDiskType == SyncFlush {
		if err := s.flush.waitFlushed(end); err != nil {
			return pos, err
		}
	}
	return pos, nil
}

// Close stops accepting writes, flushes everything, writes the checkpoint
// and removes the abort file (a clean shutdown), then closes the files. If
// the store had a write failure the abort file stays, so the next Open
// verifies the tail.
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
	if s.cfg.Raft == nil {
		s.flush.stop() // final CommitLog flush
		s.cl.stopPrefault()
		if _, err := s.reput.DispatchUpTo(s.visibleOffset()); err != nil {
			errs = append(errs, err)
		}
	}
	s.reput.Close()
	if err := s.cl.Failure(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %v", ErrStoreWriteFailed, err))
	}
	if len(errs) == 0 {
		if err := s.writeCheckpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := removeAbortFile(s.fs, s.abortPath()); err != nil {
			errs = append(errs, err)
		}
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
	if s.reput != nil && !s.closed.Load() {
		s.reput.Close()
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
