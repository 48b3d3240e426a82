package raftlog

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Options configures a LogStore. The zero value of every field but
// SegmentSize takes the default below.
type Options struct {
	// FS is the file-system seam (default storage.OSFS()); tests pass a
	// storage.FaultFS to simulate crashes.
	FS storage.FS
	// SegmentSize is the size of every log segment (RocketMQ's
	// mappedFileSizeCommitLog). It must be equal on all members of a group,
	// because positions depend on it, and it must not change for an existing
	// log. Default 1 GiB.
	SegmentSize int
	// IndexFileSize is the size of each index file, a multiple of 8 (one
	// 8-byte slot per raft index). Default 4 MiB (512 Ki entries per file).
	IndexFileSize int
	// Sync makes StoreLogs durable before it returns (SYNC_FLUSH): one msync
	// (MS_SYNC, an fdatasync of the range) per segment the batch touched.
	// Raft's safety rests on it; turn it off only for ASYNC_FLUSH brokers
	// that accept losing a suffix on power loss.
	Sync bool
	// CheckpointBytes is how much log may be appended between index
	// checkpoints (index files flushed + meta anchor moved). Recovery after
	// a crash rescans at most about this much log. Default 64 MiB.
	CheckpointBytes int64
	// PatchCommand, if set, is called for every LogCommand entry with the
	// entry's data already copied into the mapping (data) and the physical
	// position of its first byte (dataPos), before the frame CRC is computed.
	// The broker uses it to write PHYSICALOFFSET (and STORETIMESTAMP from
	// AppendedAt) into the stored messages of a batch. It must be a
	// deterministic and idempotent function of (entry, dataPos): followers may
	// receive already-patched data from the leader's GetLog, or unpatched data
	// from a leader-side log cache, and must end with identical bytes.
	PatchCommand func(l *raft.Log, data []byte, dataPos int64) error
	// WarmAhead, if positive, keeps this many bytes ahead of the writer
	// overwritten with durable zeros, in WarmChunk steps (default 1 MiB),
	// from a background goroutine through FS (warm.go): appends then land
	// on written extents and their syncs need no extent conversion and
	// journal commit. For Sync logs on a real file system; 0 = off.
	WarmAhead int
	// WarmChunk is the warmer's step (one pwrite run + fdatasync).
	WarmChunk int
	// CacheBytes bounds the entries of the latest appends kept in memory
	// for GetLog (Raft reads each new entry back on the leader and on every
	// follower; see recentLogs). Default 8 MiB; negative turns it off.
	CacheBytes int
	// Logger receives recovery and failure reports (default zap.NewNop()).
	Logger *zap.Logger
	// MaxBatchEntries is the most entries one sync makes durable (Raft's
	// MaxAppendEntries; default 64; a longer StoreLogs call is synced in
	// steps of it): recovery tells a torn batch from damage to acknowledged
	// frames by it (corrupt.go).
	MaxBatchEntries int
}

const (
	defaultSegmentSize     = 1 << 30
	defaultIndexFileSize   = 4 << 20
	defaultCheckpointBytes = 64 << 20
	slotSize               = 8
	// Directory names under the LogStore's directory.
	segmentDirName = "commitlog"
	indexDirName   = "raftindex"
)

func (o *Options) withDefaults() (Options, error) {
	r := *o
	if r.FS == nil {
		r.FS = storage.OSFS()
	}
	if r.SegmentSize == 0 {
		r.SegmentSize = defaultSegmentSize
	}
	if r.IndexFileSize == 0 {
		r.IndexFileSize = defaultIndexFileSize
	}
	if r.CheckpointBytes == 0 {
		r.CheckpointBytes = defaultCheckpointBytes
	}
	if r.CacheBytes == 0 {
		r.CacheBytes = defaultCacheBytes
	}
	if r.WarmChunk <= 0 {
		r.WarmChunk = defaultWarmChunk
	}
	if r.Logger == nil {
		r.Logger = zap.NewNop()
	}
	if r.SegmentSize < 4096 {
		return r, fmt.Errorf("%w: SegmentSize %d is below 4096", ErrInvalidConfig, r.SegmentSize)
	}
	if r.IndexFileSize < slotSize || r.IndexFileSize%slotSize != 0 {
		return r, fmt.Errorf("%w: IndexFileSize %d is not a positive multiple of %d", ErrInvalidConfig, r.IndexFileSize, slotSize)
	}
	return r, nil
}

// LogStore is a raft.LogStore (and raft.MonotonicLogStore) whose entries are
// frames in a MappedFileQueue: the broker's CommitLog file space. Every
// replica lays the same entries out at the same positions, so a stored
// message's physical offset is the same everywhere.
//
// Index: raft index i → frame position lives in 8-byte slots of a second
// MappedFileQueue (slot i at offset 8·i), written with every append but
// flushed only at checkpoints. The meta file records an anchor (position,
// index) below which the slots are durable; Open rescans the log from the
// anchor only, so restart cost is bounded by CheckpointBytes of log, not by
// the log size.
//
// Locks: wmu serializes writers (StoreLogs, DeleteRange, ResetAt,
// DeleteSegmentsBefore, Checkpoint, Close) and is held across their I/O. mu
// guards the published range (first, tail, closed); readers hold it shared
// for the whole read so that a truncation (which takes it exclusively before
// zeroing bytes) never changes bytes under them. Order: wmu before mu.
type LogStore struct {
	opts Options
	fsys storage.FS
	dir  string
	log  *zap.Logger
	segQ *storage.MappedFileQueue
	idxQ *storage.MappedFileQueue
	// ownsSegQ is false for OpenOnQueue: the CommitLog facade closes it.
	ownsSegQ bool
	// prevWindow is the batch window recorded by the process that opened
	// the log before this one (0: none recorded); set before recovery.
	prevWindow int

	wmu sync.Mutex
	// Guarded by wmu.
	nextIndex uint64 // index the next StoreLogs must start with; 0 = any (fresh log)
	nextPos   int64  // end of the last frame: where the next one goes (or the reset position)
	meta      meta   // last meta written
	sinceCkpt int64  // log bytes appended since the last checkpoint
	// unsyncedFrom is where the frames WriteLogs left unsynced begin;
	// -1 when there are none. unsyncedIndex is the first of their entries.
	unsyncedFrom  int64
	unsyncedIndex uint64
	// unrecordedCut is the cut of a failed unsynced batch whose meta
	// record could not be written; Close zeroes the batch
	// (unsyncedFailedLocked).
	unrecordedCut *meta
	batchPos      []int64 // frame positions of the batch being written (scratch)
	// pending is the snapshot position recorded by RestoreFrom, applied by
	// the next restore-shaped operation (snapshot.go).
	pending *SnapshotPosition
	// backfill is the record of entries missing before a snapshot reset
	// (catchup.go), nil when none; backfillGen counts resets.
	backfill    *BackfillState
	backfillGen uint64
	// backfillOpen mirrors backfill != nil for lock-free readers.
	backfillOpen atomic.Bool

	mu sync.RWMutex
	// Guarded by mu (written with wmu held too).
	first  uint64 // logical first index; the log is empty if first == 0 or first > tail
	tail   uint64 // last index physically present; 0 = none
	closed bool
	recent recentLogs

	// warm is the segment warmer's state (warm.go), guarded by wmu;
	// warmCond (on wmu) signals a released claim.
	warm     warmState
	warmCond sync.Cond

	failure atomic.Pointer[error]
	// rollback is where Recover cuts back to when the failure was a
	// StoreLogs batch (nil otherwise); guarded by wmu.
	rollback *rollbackPoint
	recovery RecoveryReport // set once by Open
}

var (
	_ raft.LogStore          = (*LogStore)(nil)
	_ raft.MonotonicLogStore = (*LogStore)(nil)
)

// Open opens (creating if needed) the log in dir: segments under
// dir/commitlog, index files under dir/raftindex, the meta file in dir. It
// recovers from a crash by rescanning the log from the durable anchor,
// checking every frame's CRC and truncating a torn tail.
func Open(dir string, opts Options) (*LogStore, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	segQ, err := storage.OpenMappedFileQueue(o.FS, filepath.Join(dir, segmentDirName), o.SegmentSize)
	if err != nil {
		return nil, err
	}
	s, err := openOn(segQ, dir, o)
	if err != nil {
		segQ.Close()
		return nil, err
	}
	s.ownsSegQ = true
	return s, nil
}

// OpenOnQueue opens the log over an existing segment queue — the CommitLog
// facade's, in Raft mode — keeping the index files and meta in dir. The
// queue's file size must equal opts.SegmentSize. The LogStore then owns
// appends to and recovery of that queue (it truncates a torn tail at Open);
// Close does not close the queue, its owner does.
func OpenOnQueue(segQ *storage.MappedFileQueue, dir string, opts Options) (*LogStore, error) {
	if opts.SegmentSize == 0 {
		opts.SegmentSize = segQ.FileSize()
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if segQ.FileSize() != o.SegmentSize {
		return nil, fmt.Errorf("%w: segment queue %s has file size %d, options say %d", ErrInvalidConfig, segQ.Dir(), segQ.FileSize(), o.SegmentSize)
	}
	return openOn(segQ, dir, o)
}

func openOn(segQ *storage.MappedFileQueue, dir string, o Options) (*LogStore, error) {
	s := &LogStore{opts: o, fsys: o.FS, dir: dir, log: o.Logger, segQ: segQ, recent: recentLogs{maxBytes: o.CacheBytes}, unsyncedFrom: -1}
	if err := storage.MkdirAllDurable(s.fsys, dir); err != nil {
		return nil, err
	}
	// A crash between a meta or backfill write's create and rename leaves
	// its temporary file; nothing writes them while the log is closed.
	for _, name := range []string{metaFileName, backfillFileName, windowFileName} {
		if err := storage.RemoveTempFiles(s.fsys, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	m, ok, err := readMeta(s.fsys, dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		m = meta{SegmentSize: int64(o.SegmentSize)}
	}
	if m.SegmentSize != int64(o.SegmentSize) {
		return nil, fmt.Errorf("%w: log in %s was written with segment size %d, configured %d (positions depend on it; it must not change)",
			ErrInvalidConfig, dir, m.SegmentSize, o.SegmentSize)
	}
	if s.idxQ, err = storage.OpenMappedFileQueue(s.fsys, filepath.Join(dir, indexDirName), o.IndexFileSize); err != nil {
		return nil, err
	}
	if s.prevWindow, err = readWindow(s.fsys, dir); err != nil {
		s.idxQ.Close()
		return nil, err
	}
	if err := s.recover(m); err != nil {
		s.idxQ.Close()
		return nil, fmt.Errorf("raftlog %s: %w", dir, err)
	}
	if err := s.recordWindow(); err != nil {
		s.idxQ.Close()
		return nil, err
	}
	if err := s.loadBackfill(); err != nil {
		s.idxQ.Close()
		return nil, err
	}
	// Frames go to the segments by pwrite (one per touched segment and
	// batch), not by copying into the mapping: with a sync per batch, every
	// page written through the mapping is write-protected again by the
	// writeback and costs a fault plus page_mkwrite on the next touch, which
	// makes it slower than pwrite+sync of the same bytes (BENCHMARKS.md).
	// Readers keep using the mapping: on Linux a MAP_SHARED mapping and the
	// file's page cache are the same pages.
	segQ.SetBuffered(true)
	s.wmu.Lock()
	s.startWarmer()
	s.wmu.Unlock()
	return s, nil
}

// IsMonotonic reports true: indexes are dense, and after a snapshot restore
// Raft deletes everything instead of leaving a gap (raft.MonotonicLogStore).
func (s *LogStore) IsMonotonic() bool { return true }

// FirstIndex returns the first index present, 0 for an empty log.
func (s *LogStore) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if s.emptyLocked() {
		return 0, nil
	}
	return s.first, nil
}

// LastIndex returns the last index present, 0 for an empty log.
func (s *LogStore) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if s.emptyLocked() {
		return 0, nil
	}
	return s.tail, nil
}

func (s *LogStore) emptyLocked() bool { return s.first == 0 || s.first > s.tail }

// inRangeLocked reports whether index is present.
func (s *LogStore) inRangeLocked(index uint64) bool {
	return !s.emptyLocked() && index >= s.first && index <= s.tail
}

// GetLog reads the entry at index into l. A missing index returns exactly
// raft.ErrLogNotFound. The frame's CRC is verified and data is copied once
// out of the mapping.
func (s *LogStore) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.servableLocked(index); err != nil {
		return err
	}
	if c := s.recent.get(index); c != nil {
		*l = *c
		return nil
	}
	sl, pos, err := s.frameViewLocked(index)
	if err != nil {
		return err
	}
	defer sl.Release()
	if _, err := DecodeFrame(sl.B, l); err != nil {
		// Only stored (and, under Sync, synced) frames are read: a check
		// that fails is damage, named by file and offset.
		if mf := s.segQ.FindByOffset(pos); mf != nil {
			return damageAt(mf, int(pos-mf.FileFromOffset()), index-1, fmt.Errorf("index %d: %w", index, err))
		}
		return fmt.Errorf("raftlog: index %d at position %d: %w", index, pos, err)
	}
	if l.Index != index {
		return fmt.Errorf("%w: slot of index %d points at position %d holding index %d", ErrLogMismatch, index, pos, l.Index)
	}
	return nil
}

// StoreLog stores one entry (see StoreLogs).
func (s *LogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends the entries, which must have consecutive indexes
// following the last one, as frames at the next positions: a blank filler
// closes a segment when the next frame does not fit. With Options.Sync the
// batch is durable before it returns: one msync per touched segment (the
// group commit Raft's durability rests on); without it the frames are
// written to the files (buffered segments, see openOn) but not synced.
// Entries become visible to GetLog only after that.
func (s *LogStore) StoreLogs(logs []*raft.Log) error { return s.storeLogs(logs, false) }

// WriteLogs is the leader's half of StoreLogs (raft.ParallelLogStore): the
// entries are written and readable when it returns, and with Options.Sync
// the last window of them (see writeBatchLocked) stays unsynced until
// SyncLogs, so the leader's msync runs while Raft replicates them. At most
// one such batch is unsynced at a time: every other writer, including the
// next WriteLogs, makes it durable first (writableLocked).
func (s *LogStore) WriteLogs(logs []*raft.Log) error { return s.storeLogs(logs, true) }

// SyncLogs makes every entry WriteLogs wrote durable. Raft counts the
// leader toward an entry's commit quorum only once it returns nil. A failed
// sync stops the store until a reopen (unsyncedFailedLocked).
func (s *LogStore) SyncLogs(uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writableLocked()
}

// syncUnsyncedLocked makes the batch WriteLogs left unsynced durable.
func (s *LogStore) syncUnsyncedLocked() error {
	if s.unsyncedFrom < 0 {
		return nil
	}
	if err := s.syncFromLocked(s.unsyncedFrom); err != nil {
		return s.unsyncedFailedLocked(err)
	}
	s.unsyncedFrom = -1
	return nil
}

// unsyncedFailedLocked handles a failed sync of the batch WriteLogs left
// unsynced. Unlike a failed StoreLogs batch (batchFailedLocked), its
// entries are published and Raft counts them in its last index, so the
// store stops until a reopen, which rebuilds Raft's view from the log
// (Recover refuses). The entries stay readable until then: a leader whose
// GetLog said "not found" for them would send its followers an older
// snapshot, whose restore deletes entries they committed. A failed
// write-back leaves the bytes in the page cache marked clean, and a
// process restart that served them would let later acknowledged entries
// follow a batch a power loss then tears; so the cut is recorded in the
// meta file now (ZeroTo, as cutBatchLocked records it), and the reopen
// ends the log at the batch and zeroes it. When the record cannot be
// written either, Close zeroes the batch where it is (nothing reads it any
// more by then), as cutBatchLocked falls back to; only a process that dies
// before Close keeps the batch. Close does not write the record again: a
// failed index msync is reported once, and a second one would return nil
// for slots that never reached the disk.
func (s *LogStore) unsyncedFailedLocked(err error) error {
	m := meta{SegmentSize: int64(s.opts.SegmentSize), AnchorIndex: s.unsyncedIndex, AnchorPos: s.unsyncedFrom, ZeroTo: s.nextPos}
	s.unsyncedFrom = -1
	ferr := s.fail(err)
	if rerr := s.recordCutLocked(m); rerr != nil {
		s.unrecordedCut = &m
		s.log.Error("raftlog: the cut of a batch whose sync failed could not be recorded; Close zeroes the batch",
			zap.String("dir", s.dir), zap.Uint64("index", m.AnchorIndex), zap.Int64("position", m.AnchorPos), zap.Error(rerr))
	}
	return ferr
}

// zeroUnrecordedCutLocked is Close's part in a failed batch's cut that
// the meta file did not record (unsyncedFailedLocked): the batch's bytes
// are zeroed where they are, so a restart that reads them from the page
// cache ends the log before them. Called once the store is closed to
// readers.
func (s *LogStore) zeroUnrecordedCutLocked() error {
	m := s.unrecordedCut
	if m == nil {
		return nil
	}
	s.unrecordedCut = nil
	if err := s.segQ.TruncateDirty(m.AnchorPos); err != nil {
		return fmt.Errorf("raftlog: zero the batch from index %d (position %d) whose sync failed: %w", m.AnchorIndex, m.AnchorPos, err)
	}
	return nil
}

func (s *LogStore) storeLogs(logs []*raft.Log, deferSync bool) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.waitWarmLocked(logs)
	if err := s.writableLocked(); err != nil {
		return err
	}
	if deferSync {
		// Before the write: a checkpoint after it would sync the batch
		// (checkpointFirstLocked) and could not report that sync failing.
		s.checkpointIfDueLocked()
	}
	if p := s.pending; p != nil {
		// A fresh follower's first entries after InstallSnapshot (Raft does
		// not delete an empty log), or the first append after a startup
		// restore; any other index means the restore is behind us.
		s.pending = nil
		if logs[0].Index == p.Index+1 {
			if err := s.ensureContinuityLocked(*p); err != nil {
				return err
			}
		}
	}
	if err := s.checkBatchLocked(logs); err != nil {
		return err
	}
	startPos := s.nextPos
	if err := s.writeBatchLocked(logs, startPos, deferSync); err != nil {
		return s.batchFailedLocked(rollbackPoint{index: logs[0].Index, pos: startPos}, err)
	}
	last := logs[len(logs)-1].Index
	s.mu.Lock()
	if s.tail == 0 && (s.first == 0 || s.first > logs[0].Index) {
		s.first = logs[0].Index
	}
	s.tail = last
	s.recent.add(logs, s.batchPos)
	s.mu.Unlock()
	s.nextIndex = last + 1
	s.kickWarmerLocked()
	s.sinceCkpt += s.nextPos - startPos
	if !deferSync {
		s.checkpointIfDueLocked()
	}
	return nil
}

// checkpointIfDueLocked checkpoints once CheckpointBytes of log were
// appended since the last checkpoint. A failure leaves the entries as they
// are, durable; only the restart shortcut is behind.
func (s *LogStore) checkpointIfDueLocked() {
	if s.sinceCkpt < s.opts.CheckpointBytes {
		return
	}
	if err := s.checkpointLocked(); err != nil {
		s.log.Error("raftlog checkpoint failed; restart will rescan more log", zap.Error(err))
	}
}

// commitChunkBytes is how many buffered frame bytes a batch writes to its
// segment at a time (see writeBatchLocked); well under the size up to which
// a segment recycles its pending buffer.
const commitChunkBytes = 1 << 20

// writeBatchLocked appends the frames and index slots of logs at startPos
// and makes them durable (Sync) or readable (no Sync, or deferSync: the
// last window is left for syncUnsyncedLocked).
func (s *LogStore) writeBatchLocked(logs []*raft.Log, startPos int64, deferSync bool) error {
	s.batchPos = s.batchPos[:0]
	window := s.batchWindow()
	syncFrom, syncIndex := startPos, logs[0].Index
	for i, l := range logs {
		mf, pos, err := s.appendFrameLocked(l)
		if err != nil {
			return fmt.Errorf("append index %d: %w", l.Index, err)
		}
		if err := s.putSlotLocked(l.Index, pos); err != nil {
			return fmt.Errorf("index slot %d: %w", l.Index, err)
		}
		s.batchPos = append(s.batchPos, pos)
		// A buffered segment holds the batch's frames in memory until the
		// commit below. A follower's AppendEntries can carry megabytes;
		// writing them out in chunks keeps the pending buffer small enough
		// to be recycled instead of regrown (copied, freshly allocated)
		// for every batch. Nothing is published before the batch is done.
		if mf.AppendPosition()-mf.WrotePosition() >= commitChunkBytes {
			if err := mf.Commit(); err != nil {
				return fmt.Errorf("write %s: %w", mf.Path(), err)
			}
		}
		// Recovery takes valid frames a window of entries or more past a
		// torn one for acknowledged (corrupt.go), so a power loss may tear
		// no more than that: a longer call (a leader configured with a
		// larger raftMaxAppendEntries) is made durable window by window.
		if s.opts.Sync && (i+1)%window == 0 && i+1 < len(logs) {
			if err := s.syncFromLocked(syncFrom); err != nil {
				return err
			}
			syncFrom, syncIndex = s.nextPos, logs[i+1].Index
		}
	}
	if !s.opts.Sync {
		return s.commitFromLocked(startPos)
	}
	if deferSync {
		if err := s.commitFromLocked(syncFrom); err != nil {
			return err
		}
		s.unsyncedFrom, s.unsyncedIndex = syncFrom, syncIndex
		return nil
	}
	return s.syncFromLocked(syncFrom)
}

// rollbackPoint is the state before a StoreLogs batch: its first index and
// the position its first frame (or blank) went to, and end, the furthest
// position the batch's bytes reached (its cut zeroes [pos, end)).
type rollbackPoint struct {
	index uint64
	pos   int64
	end   int64
	// recorded is set once the meta record of the cut is durable (see
	// cutBatchLocked).
	recorded bool
}

// batchFailedLocked handles a failed StoreLogs batch. Nothing
// of the batch was published (tail, cache), so the log is exactly as before
// it once the files are cut back to rp: segments zeroed durably from rp.pos
// (the same cut as a conflict truncation), index slots from rp.index, later
// files removed. A disk-full error from fallocate or pwrite (storage.ErrDiskFull;
// never from msync) is then just returned: Raft's AppendEntries fails and the
// leader retries, and the next batch after space returns succeeds. Any other
// error (EIO on write or sync), or a failed cut, stops the store; the batch
// is cut at once as far as the disk allows (cutBatchLocked), and Recover
// finishes the cut and clears the stop.
func (s *LogStore) batchFailedLocked(rp rollbackPoint, err error) error {
	if errors.Is(err, storage.ErrDiskFull) {
		rerr := s.rollbackLocked(rp)
		if rerr == nil {
			s.log.Warn("raftlog: batch refused for lack of disk space; log cut back to the last stored entry",
				zap.Uint64("nextIndex", rp.index), zap.Int64("position", rp.pos), zap.Error(err))
			return err
		}
		err = fmt.Errorf("%w (cutting the batch back failed: %v)", err, rerr)
	}
	rp.end = max(rp.end, s.nextPos)
	s.rollback = &rp
	ferr := s.fail(err)
	if cerr := s.cutBatchLocked(&rp); cerr != nil {
		s.log.Warn("raftlog: failed batch not yet cut back durably; Recover retries",
			zap.String("dir", s.dir), zap.Uint64("nextIndex", rp.index), zap.Int64("position", rp.pos), zap.Error(cerr))
	}
	return ferr
}

// rollbackLocked cuts segments and index files back to rp and moves the
// write position there; the next StoreLogs must start at rp.index.
func (s *LogStore) rollbackLocked(rp rollbackPoint) error {
	if err := s.segQ.TruncateDirty(rp.pos); err != nil {
		return fmt.Errorf("truncate log at %d: %w", rp.pos, err)
	}
	if err := s.idxQ.TruncateDirty(int64(rp.index) * slotSize); err != nil {
		return fmt.Errorf("truncate index at %d: %w", rp.index, err)
	}
	s.nextPos = rp.pos
	return nil
}

// cutBatchLocked cuts back a batch whose write or sync failed, in the order
// a conflict truncation uses: record, zero, sync, clear. A failed sync
// leaves the batch's bytes in the page cache, where a process restart would
// read them as stored entries although they may never reach the disk (Linux
// marks pages whose writeback failed clean), and zeros written over them
// the same way may stay in the page cache only, so a power loss could bring
// the batch back behind later entries. So, before any byte changes, the cut
// is recorded in the meta file (meta.ZeroTo, anchored at rp): from then on
// Open ends the log at rp and rewrites the zeros whatever the page cache
// shows. The zeros are then written through the mapping and synced, written
// again with pwrite and synced (pages a failed writeback marked clean are
// not written back by a sync of the mapping), and the record is cleared.
// If the record cannot be written, the page cache is zeroed all the same,
// so a process restart does not serve the batch. It may be called again
// (Recover) and goes on from the last step that failed.
func (s *LogStore) cutBatchLocked(rp *rollbackPoint) error {
	m := meta{SegmentSize: int64(s.opts.SegmentSize), AnchorIndex: s.nextIndex, AnchorPos: rp.pos, ZeroTo: rp.end}
	if !rp.recorded && rp.end > rp.pos {
		if err := s.recordCutLocked(m); err != nil {
			_ = s.segQ.TruncateDirty(rp.pos)
			return fmt.Errorf("record the cut of the failed batch from index %d: %w", rp.index, err)
		}
		rp.recorded = true
	}
	if err := s.rollbackLocked(*rp); err != nil {
		return err
	}
	if rp.end > rp.pos {
		if err := s.rewriteZerosLocked(rp.pos, rp.end); err != nil {
			return fmt.Errorf("rewrite zeros in [%d, %d): %w", rp.pos, rp.end, err)
		}
	}
	if rp.recorded {
		// The store is stopped since the record was written, so s.meta is
		// still that record.
		m = s.meta
		m.ZeroTo = 0
		if err := s.writeMetaLocked(m); err != nil {
			return fmt.Errorf("clear the record of the cut from index %d: %w", rp.index, err)
		}
		rp.recorded = false
	}
	return nil
}

// recordCutLocked writes m (the anchor at a cut and ZeroTo) with the log's
// first index, once the slots before the anchor (and, without Sync, the
// frames before it) are durable: the anchor vouches for them.
func (s *LogStore) recordCutLocked(m meta) error {
	if !s.opts.Sync {
		if err := s.segQ.Flush(); err != nil {
			return fmt.Errorf("sync log: %w", err)
		}
	}
	if err := s.idxQ.Flush(); err != nil {
		return fmt.Errorf("sync index: %w", err)
	}
	s.mu.RLock()
	m.FirstIndex = s.first
	s.mu.RUnlock()
	return s.writeMetaLocked(m)
}

// Recover clears a stop caused by a failed StoreLogs batch: it finishes
// cutting the files back to the state before that batch (cutBatchLocked:
// the batch's bytes zeroed durably, whatever reached the page cache or the
// disk), which is exactly the state Raft last saw acknowledged, and lets
// writes continue. It returns nil if the store is not stopped, the cut's
// error if it fails again (the store stays stopped; call again later), and
// ErrStoreFailed if the stop came from elsewhere (reset, truncation,
// checkpoint flush): that needs a reopen, whose recovery rescans the log.
func (s *LogStore) Recover() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	f := s.Failure()
	if f == nil {
		return nil
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if s.rollback == nil {
		return fmt.Errorf("%w: %v (not a StoreLogs batch: reopen the store)", ErrStoreFailed, f)
	}
	if err := s.cutBatchLocked(s.rollback); err != nil {
		return fmt.Errorf("raftlog recover: %w", err)
	}
	s.log.Warn("raftlog: stopped log recovered in place: failed batch cut back, writes accepted again",
		zap.String("dir", s.dir), zap.Uint64("nextIndex", s.rollback.index), zap.Int64("position", s.rollback.pos), zap.NamedError("failure", f))
	s.rollback = nil
	s.failure.Store(nil)
	return nil
}

// syncFromLocked makes every segment written since position from durable:
// one msync per segment. That includes a segment that only received a blank
// filler: if its filler were lost, recovery would stop at the zeros there
// and never reach the acknowledged frames in the next segment.
func (s *LogStore) syncFromLocked(from int64) error {
	for _, mf := range s.segQ.Files() {
		if mf.FileFromOffset()+int64(mf.Size()) <= from {
			continue
		}
		if _, err := mf.Flush(); err != nil {
			return fmt.Errorf("sync %s: %w", mf.Path(), err)
		}
	}
	return nil
}

// commitFromLocked writes the buffered frames of every segment written
// since position from to the files without syncing (no Options.Sync), so
// they are readable through the mapping when StoreLogs returns.
func (s *LogStore) commitFromLocked(from int64) error {
	for _, mf := range s.segQ.Files() {
		if mf.FileFromOffset()+int64(mf.Size()) <= from {
			continue
		}
		if err := mf.Commit(); err != nil {
			return fmt.Errorf("write %s: %w", mf.Path(), err)
		}
	}
	return nil
}

// checkBatchLocked validates indexes and sizes before anything is written,
// so a refused batch leaves no trace.
func (s *LogStore) checkBatchLocked(logs []*raft.Log) error {
	want := s.nextIndex
	for i, l := range logs {
		if (i > 0 || want != 0) && l.Index != want {
			return fmt.Errorf("%w: got index %d, want %d (after InstallSnapshot the FSM must call ResetAt)", ErrIndexGap, l.Index, want)
		}
		if l.Index == 0 {
			return fmt.Errorf("%w: index 0 is not a raft index", ErrIndexGap)
		}
		want = l.Index + 1
		if n := EncodedSize(l); n+BlankHeaderSize > s.opts.SegmentSize {
			return fmt.Errorf("%w: index %d needs %d bytes, segment size is %d", ErrFrameTooLarge, l.Index, n, s.opts.SegmentSize)
		}
	}
	return nil
}

// appendFrameLocked writes one frame at nextPos (after a blank filler if it
// does not fit the current segment) and returns the segment and position.
func (s *LogStore) appendFrameLocked(l *raft.Log) (*storage.MappedFile, int64, error) {
	n := EncodedSize(l)
	mf, err := s.segmentForLocked(n)
	if err != nil {
		return nil, 0, err
	}
	pos := mf.FileFromOffset() + int64(mf.AppendPosition())
	dataOff := FrameHeaderSize + len(l.Extensions)
	_, err = mf.AppendFunc(n, func(dst []byte) error {
		encodeFrameBody(dst, l)
		if s.opts.PatchCommand != nil && l.Type == raft.LogCommand && len(l.Data) > 0 {
			if err := s.opts.PatchCommand(l, dst[dataOff:dataOff+len(l.Data)], pos+int64(dataOff)); err != nil {
				return fmt.Errorf("patch command: %w", err)
			}
		}
		sealFrame(dst)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	s.nextPos = pos + int64(n)
	return mf, pos, nil
}

// segmentForLocked returns the segment the next n-byte frame goes into,
// writing a blank filler over the rest of the current segment if the frame
// plus a blank header's reserve does not fit (RocketMQ's END_FILE_MIN_BLANK_LENGTH
// rule, so the placement is the same on every replica).
func (s *LogStore) segmentForLocked(n int) (*storage.MappedFile, error) {
	mf, err := s.segmentAtLocked(s.nextPos)
	if err != nil {
		return nil, err
	}
	if rem := mf.Remaining(); n+BlankHeaderSize > rem {
		if _, err := mf.AppendFunc(rem, func(dst []byte) error {
			// A buffered segment hands out recycled buffer space: clear
			// it so no stale bytes reach the file behind the blank.
			clear(dst)
			putBlank(dst)
			return nil
		}); err != nil {
			return nil, err
		}
		s.nextPos = mf.FileFromOffset() + int64(mf.Size())
		if mf, err = s.segmentAtLocked(s.nextPos); err != nil {
			return nil, err
		}
	}
	return mf, nil
}

// segmentAtLocked returns the segment whose write position is pos, creating
// it (and moving its write position up to pos after a reset) if needed.
func (s *LogStore) segmentAtLocked(pos int64) (*storage.MappedFile, error) {
	mf := s.segQ.Last()
	if mf == nil || mf.IsFull() {
		var err error
		if mf, err = s.segQ.LastOrCreate(pos); err != nil {
			return nil, err
		}
	}
	if err := alignWrite(mf, pos); err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	return mf, nil
}

// alignWrite makes mf's write position pos. Moving it forward is only valid
// over never-written space (a new file after a reset); anything else means
// the in-memory state and the files disagree.
func alignWrite(mf *storage.MappedFile, pos int64) error {
	from := mf.FileFromOffset()
	end := from + int64(mf.AppendPosition())
	if end == pos {
		return nil
	}
	if pos > end && pos < from+int64(mf.Size()) {
		mf.SetWrotePosition(int(pos - from))
		return nil
	}
	return fmt.Errorf("%w: next write at %d but %s ends at %d", ErrLogMismatch, pos, mf.Path(), end)
}

// putSlotLocked appends the index slot for index (its frame position).
func (s *LogStore) putSlotLocked(index uint64, pos int64) error {
	off := int64(index) * slotSize
	mf := s.idxQ.Last()
	if mf == nil || mf.IsFull() {
		var err error
		if mf, err = s.idxQ.LastOrCreate(off); err != nil {
			return err
		}
	}
	if err := alignWrite(mf, off); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	_, err := mf.AppendFunc(slotSize, func(dst []byte) error {
		putUint64(dst, uint64(pos))
		return nil
	})
	return err
}

// slotLocked returns the frame position of a present index.
func (s *LogStore) slotLocked(index uint64) (int64, error) {
	off := int64(index) * slotSize
	mf := s.idxQ.FindByOffset(off)
	if mf == nil {
		return 0, fmt.Errorf("%w: no index file holds index %d", ErrLogMismatch, index)
	}
	sl, err := mf.Read(int(off-mf.FileFromOffset()), slotSize)
	if err != nil {
		return 0, fmt.Errorf("%w: index %d: %v", ErrLogMismatch, index, err)
	}
	defer sl.Release()
	return int64(getUint64(sl.B)), nil
}

// frameViewLocked returns a refcounted view from the frame of index to the
// end of its segment's written data, and the frame position.
func (s *LogStore) frameViewLocked(index uint64) (*storage.Slice, int64, error) {
	pos, err := s.slotLocked(index)
	if err != nil {
		return nil, 0, err
	}
	mf := s.segQ.FindByOffset(pos)
	if mf == nil {
		return nil, pos, fmt.Errorf("%w: index %d at position %d: no segment holds it", ErrLogMismatch, index, pos)
	}
	sl, err := mf.ReadFrom(int(pos - mf.FileFromOffset()))
	if err != nil {
		return nil, pos, fmt.Errorf("%w: index %d at position %d: %v", ErrLogMismatch, index, pos, err)
	}
	return sl, pos, nil
}

// writableLocked returns the error that refuses writes, if any, after
// making a batch WriteLogs left unsynced durable: every writer but
// WriteLogs's own append (truncations, resets, checkpoint anchors, a synced
// StoreLogs whose answer vouches for the whole log) assumes the frames
// before nextPos are durable, and a WriteLogs that finds the previous batch
// still unsynced keeps at most one batch exposed to a power loss.
func (s *LogStore) writableLocked() error {
	if p := s.failure.Load(); p != nil {
		return fmt.Errorf("%w: %v", ErrStoreFailed, *p)
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return s.syncUnsyncedLocked()
}

// fail records the first write failure and returns err wrapped so callers
// see ErrStoreFailed.
func (s *LogStore) fail(err error) error {
	if s.failure.CompareAndSwap(nil, &err) {
		s.log.Error("raftlog write failed: the log refuses writes until Recover or a reopen (both cut the unsynced tail)",
			zap.String("dir", s.dir), zap.Error(err))
	}
	return fmt.Errorf("%w: %w", ErrStoreFailed, err)
}

// Failure returns the write failure that stopped the store, or nil.
func (s *LogStore) Failure() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Close checkpoints (so the next Open scans nothing) and closes the files.
// A failed store is closed without a checkpoint.
func (s *LogStore) Close() error {
	s.stopWarmer()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	var first error
	if s.Failure() == nil {
		first = s.checkpointLocked() // its sync of an unsynced batch may fail too
	}
	s.mu.Lock()
	s.closed = true
	s.recent.clear()
	s.mu.Unlock()
	if err := s.zeroUnrecordedCutLocked(); err != nil && first == nil {
		first = err
	}
	if s.ownsSegQ {
		if err := s.segQ.Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := s.idxQ.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// Checkpoint flushes the log and the index files and moves the meta anchor
// to the end of the log, so a restart rescans nothing. StoreLogs does it on
// its own every CheckpointBytes; the broker may call it from its flush
// service or before a snapshot.
func (s *LogStore) Checkpoint() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	return s.checkpointLocked()
}

func (s *LogStore) checkpointLocked() error {
	s.mu.RLock()
	first := s.first
	s.mu.RUnlock()
	return s.checkpointFirstLocked(first)
}

// checkpointFirstLocked is checkpointLocked recording first as the first
// index (retention persists a new first index before publishing it). A
// failed meta write returns a *metaWriteError.
func (s *LogStore) checkpointFirstLocked(first uint64) error {
	s.sinceCkpt = 0
	s.mu.RLock()
	tail := s.tail
	s.mu.RUnlock()
	if tail == 0 {
		return nil // fresh or just reset: the meta record already anchors the start
	}
	// Order: log durable, then the slots, then the anchor that vouches for them.
	if err := s.syncUnsyncedLocked(); err != nil {
		return err
	}
	if !s.opts.Sync {
		if err := s.segQ.Flush(); err != nil {
			return err
		}
	}
	if err := s.idxQ.Flush(); err != nil {
		return err
	}
	m := meta{SegmentSize: int64(s.opts.SegmentSize), FirstIndex: first, AnchorIndex: tail + 1, AnchorPos: s.nextPos}
	return s.writeMetaLocked(m)
}

// metaWriteError marks a failed meta-file write: the files of the log are
// untouched by it, so callers that changed nothing else can keep going.
type metaWriteError struct{ err error }

func (e *metaWriteError) Error() string { return "write meta: " + e.err.Error() }
func (e *metaWriteError) Unwrap() error { return e.err }

func (s *LogStore) writeMetaLocked(m meta) error {
	if err := writeMeta(s.fsys, s.dir, m); err != nil {
		// The rename may have happened (a failed directory sync): the disk
		// holds the old or the new record. Remember the further anchor, so
		// a later truncation below it moves the anchor back either way.
		if m.AnchorIndex > s.meta.AnchorIndex {
			s.meta.AnchorIndex, s.meta.AnchorPos = m.AnchorIndex, m.AnchorPos
		}
		return &metaWriteError{err: err}
	}
	s.meta = m
	return nil
}
