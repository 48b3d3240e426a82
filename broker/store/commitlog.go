package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// commitLogConfig is the part of Config the CommitLog uses.
type commitLogConfig struct {
	Dir            string
	FileSize       int
	MaxMessageSize int
	StoreHost      netip.AddrPort
	Now            func() time.Time
	// Buffered collects appends in memory and writes each flush group with
	// one pwrite (SYNC_FLUSH, see MappedFile.buffered).
	Buffered bool
}

// AppendResult describes one appended message.
type AppendResult struct {
	// PhysicalOffset is the message's offset in the CommitLog.
	PhysicalOffset int64
	// Size is the stored size in bytes.
	Size int32
	// StoreTimestamp is the time written into STORETIMESTAMP (ms).
	StoreTimestamp int64
	// QueueOffset is the ConsumeQueue offset the dispatcher will assign
	// (single-node put path only; -1 for pre-encoded appends).
	QueueOffset int64
	// MsgID is the offset message id.
	MsgID string
}

type topicQueueKey struct {
	topic   string
	queueID int32
}

// CommitLog is the append-only message log: a MappedFileQueue of segments
// named by start offset, with a single-writer put path (RocketMQ CommitLog).
// Flushing is done by the flush service (flush.go); recovery by recovery.go.
type CommitLog struct {
	cfg commitLogConfig
	log *zap.Logger
	mfq *storage.MappedFileQueue

	// mu is the put lock: one appender at a time, so physical offsets,
	// queue offsets and blank fillers are assigned in one order.
	mu sync.Mutex
	// queueOffsets is the next queue offset per topic/queue, mirroring what
	// the dispatcher assigns (appends are serialized and dispatched in
	// order). Guarded by mu.
	queueOffsets map[topicQueueKey]int64

	// lastStoreTimestamp is the STORETIMESTAMP of the newest append; the
	// flusher turns it into the checkpoint's physicMsgTimestamp.
	lastStoreTimestamp atomic.Int64

	// failure is the first write/flush error; once set, appends are refused.
	failure atomic.Pointer[error]
	// onAppend is called after every append outside the lock (wakes the
	// ASYNC dispatcher); may be nil.
	onAppend func()

	// The prefaulter prepares the bytes ahead of the writer on another core
	// (see prefaultLoop). prefaulted is the offset up to which that is done.
	prefaulted   atomic.Int64
	prefaultWake chan struct{}
	prefaultQuit chan struct{}
	prefaultDone chan struct{}
}

// Prefault geometry: keep prefaultAhead bytes ahead of the writer prepared
// (zeroAhead when zero-warming), in prefaultChunk steps. Populating a page
// for writing costs 2-3 µs, so at a few hundred MB/s the prefaulter needs a
// long lead to absorb scheduling delays on two busy cores: with 8 MiB the
// ASYNC writer still took a page fault on ~25 % of appends, with 64 MiB on
// under 7 %. Zero-warming writes and syncs each chunk: 1 MiB keeps one such
// sync short next to the group commit's, and 8 MiB ahead is ~60 ms of
// SYNC_FLUSH appends.
const (
	prefaultAhead = 64 << 20
	zeroAhead     = 8 << 20
	prefaultChunk = 1 << 20
)

// ahead is how far ahead of the writer the prefaulter works.
func (c *CommitLog) ahead() int64 {
	if c.cfg.Buffered {
		return zeroAhead
	}
	return prefaultAhead
}

// startPrefault starts the prefaulter goroutine; stopPrefault ends it.
func (c *CommitLog) startPrefault() {
	c.prefaultWake = make(chan struct{}, 1)
	c.prefaultQuit = make(chan struct{})
	c.prefaultDone = make(chan struct{})
	c.prefaulted.Store(c.MaxOffset())
	go c.prefaultLoop()
	c.kickPrefault(c.MaxOffset())
}

func (c *CommitLog) stopPrefault() {
	if c.prefaultQuit == nil {
		return
	}
	close(c.prefaultQuit)
	<-c.prefaultDone
	c.prefaultQuit = nil
}

// kickPrefault wakes the prefaulter when the writer at end gets close to the
// prepared offset.
func (c *CommitLog) kickPrefault(end int64) {
	if c.prefaultWake == nil || end+c.ahead()/2 < c.prefaulted.Load() {
		return
	}
	select {
	case c.prefaultWake <- struct{}{}:
	default:
	}
}

// prepareAhead readies [rel, rel+n) of mf for the writer. In buffered mode
// (SYNC_FLUSH: pwrite + a sync per group) it writes durable zeros there, so
// the group syncs find written extents; otherwise (appends through the
// mapping) it pre-faults the pages for writing. supported is false if the
// file system can do neither.
func (c *CommitLog) prepareAhead(mf *storage.MappedFile, rel, n int) (supported bool, err error) {
	if c.cfg.Buffered {
		return mf.WarmZeros(rel, n)
	}
	return mf.Prefault(rel, n)
}

func (c *CommitLog) prefaultLoop() {
	defer close(c.prefaultDone)
	for {
		select {
		case <-c.prefaultQuit:
			return
		case <-c.prefaultWake:
		}
		target := c.MaxOffset() + c.ahead()
		for p := max(c.prefaulted.Load(), c.MaxOffset()); p < target; {
			select {
			case <-c.prefaultQuit:
				return
			default:
			}
			mf := c.mfq.FindByOffset(p)
			if mf == nil {
				break // the next segment does not exist yet
			}
			rel := int(p - mf.FileFromOffset())
			n := min(prefaultChunk-rel%prefaultChunk, mf.Size()-rel)
			supported, err := c.prepareAhead(mf, rel, n)
			if !supported {
				return // this file system cannot prefault; stop for good
			}
			if err != nil {
				c.log.Debug("prefault failed", zap.Int64("offset", p), zap.Error(err))
				break
			}
			p += int64(n)
			c.prefaulted.Store(p)
		}
	}
}

func newCommitLog(fsys storage.FS, cfg commitLogConfig, log *zap.Logger) (*CommitLog, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	mfq, err := storage.OpenMappedFileQueue(fsys, cfg.Dir, cfg.FileSize)
	if err != nil {
		return nil, fmt.Errorf("commit log %s: %w", cfg.Dir, err)
	}
	mfq.SetBuffered(cfg.Buffered)
	return &CommitLog{cfg: cfg, log: log, mfq: mfq, queueOffsets: map[topicQueueKey]int64{}}, nil
}

// Queue returns the segment queue (reads, dispatch, retention).
func (c *CommitLog) Queue() *storage.MappedFileQueue { return c.mfq }

// MinOffset returns the first retained offset.
func (c *CommitLog) MinOffset() int64 { return c.mfq.MinOffset() }

// MaxOffset returns the end of the written data.
func (c *CommitLog) MaxOffset() int64 { return c.mfq.MaxOffset() }

// fail records the first write failure; later appends are refused with it.
func (c *CommitLog) fail(err error) {
	if c.failure.CompareAndSwap(nil, &err) {
		c.log.Error("CommitLog write failed: the store stops accepting writes; acknowledged data stays readable; restart after fixing the disk",
			zap.Error(err))
	}
}

// Failure returns the write failure that stopped the CommitLog, or nil.
func (c *CommitLog) Failure() error {
	if p := c.failure.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *CommitLog) writableErr() error {
	if err := c.Failure(); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrServiceNotAvailable, ErrStoreWriteFailed, err)
	}
	return nil
}

// setQueueOffsets replaces the queue offset table (after recovery, from the
// ConsumeQueues).
func (c *CommitLog) setQueueOffsets(next map[topicQueueKey]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queueOffsets = next
}

// transactional prepared and rolled-back messages take no queue offset
// (RocketMQ: they get no ConsumeQueue unit).
func takesQueueOffset(sysFlag int32) bool {
	t := sysFlag & SysFlagTransMask
	return t != SysFlagTransPrepared && t != SysFlagTransRollback
}

// segmentForLocked returns a segment with room for n bytes plus the blank
// header reserve, writing a blank filler over the rest of the current one
// when it does not fit.
func (c *CommitLog) segmentForLocked(n int) (*storage.MappedFile, error) {
	if n+BlankHeaderSize > c.cfg.FileSize {
		return nil, fmt.Errorf("%w: %d bytes do not fit a %d-byte CommitLog segment", ErrMessageIllegal, n, c.cfg.FileSize)
	}
	mf, err := c.mfq.LastOrCreate(0)
	if err != nil {
		return nil, c.createErr(err)
	}
	if rem := mf.Remaining(); n+BlankHeaderSize > rem {
		_, err := mf.AppendFunc(rem, func(dst []byte) error {
			binary.BigEndian.PutUint32(dst[offTotalSize:], uint32(rem))
			binary.BigEndian.PutUint32(dst[offMagic:], MagicBlank)
			return nil
		})
		if err != nil {
			return nil, err
		}
		// A full segment's pending bytes go to its file now, so readers and
		// MaxOffset never see a gap before the next segment.
		if err := mf.Commit(); err != nil {
			return nil, c.appendErr(err)
		}
		if mf, err = c.mfq.LastOrCreate(0); err != nil {
			return nil, c.createErr(err)
		}
	}
	return mf, nil
}

// appendErr classifies a failed write into a segment: no space is a
// disk-full refusal (writes resume when space is back); anything else stops
// the CommitLog for good.
func (c *CommitLog) appendErr(err error) error {
	if errors.Is(err, ErrDiskFull) {
		return fmt.Errorf("%w: %w", ErrServiceNotAvailable, err)
	}
	c.fail(err)
	return c.writableErr()
}

func (c *CommitLog) createErr(err error) error {
	if errors.Is(err, ErrDiskFull) {
		return fmt.Errorf("%w: new CommitLog segment: %w", ErrServiceNotAvailable, err)
	}
	c.fail(err)
	return fmt.Errorf("%w: %w: new CommitLog segment: %v", ErrServiceNotAvailable, ErrStoreWriteFailed, err)
}

func (c *CommitLog) checkSize(size int) error {
	if size > c.cfg.MaxMessageSize {
		return fmt.Errorf("%w: message of %d bytes exceeds maxMessageSize %d", ErrMessageIllegal, size, c.cfg.MaxMessageSize)
	}
	return nil
}

// PutMessage encodes m straight into the mapping (one copy of the body),
// assigning its physical offset, store timestamp, store host and queue
// offset (written into m too). It returns the result and the end offset the
// caller waits to be flushed for SYNC_FLUSH.
func (c *CommitLog) PutMessage(m *Message) (AppendResult, int64, error) {
	res, end, err := c.PutMessages([]*Message{m})
	if err != nil {
		return AppendResult{}, 0, err
	}
	return res[0], end, nil
}

// PutMessages appends a batch contiguously in one segment (a batch never
// straddles a segment), like a RocketMQ batch message. The batch's total
// size is limited by maxMessageSize.
func (c *CommitLog) PutMessages(msgs []*Message) ([]AppendResult, int64, error) {
	if len(msgs) == 0 {
		return nil, c.MaxOffset(), nil
	}
	props := make([]string, len(msgs))
	sizes := make([]int, len(msgs))
	total := 0
	for i, m := range msgs {
		m.StoreHost = c.cfg.StoreHost
		var n int
		var err error
		if m.EncodedProperties != "" {
			props[i] = m.EncodedProperties
			n, err = encodedSize(m, len(props[i])+crcPropLen)
		} else {
			props[i] = storedProperties(m.Properties)
			n, err = encodedSize(m, len(props[i]))
		}
		if err != nil {
			return nil, 0, err
		}
		sizes[i], total = n, total+n
	}
	if err := c.checkSize(total); err != nil {
		return nil, 0, err
	}
	res := make([]AppendResult, len(msgs))
	c.mu.Lock()
	if err := c.writableErr(); err != nil {
		c.mu.Unlock()
		return nil, 0, err
	}
	mf, err := c.segmentForLocked(total)
	if err != nil {
		c.mu.Unlock()
		return nil, 0, err
	}
	ts := c.cfg.Now().UnixMilli()
	base := mf.FileFromOffset() + int64(mf.AppendPosition())
	filled := false
	_, err = mf.AppendFunc(total, func(dst []byte) error {
		filled = true
		p := 0
		for i, m := range msgs {
			k := topicQueueKey{m.Topic, m.QueueID}
			m.PhysicalOffset = base + int64(p)
			m.StoreTimestamp = ts
			m.QueueOffset = c.queueOffsets[k]
			if takesQueueOffset(m.SysFlag) {
				c.queueOffsets[k]++
			}
			encodeWith(dst[p:p+sizes[i]], m, props[i], m.EncodedProperties != "")
			res[i] = AppendResult{PhysicalOffset: m.PhysicalOffset, Size: int32(sizes[i]), StoreTimestamp: ts, QueueOffset: m.QueueOffset}
			p += sizes[i]
		}
		return nil
	})
	c.lastStoreTimestamp.Store(ts)
	if err != nil {
		// Undo the queue offsets taken for messages that were not written.
		for _, m := range msgs {
			if filled && takesQueueOffset(m.SysFlag) {
				c.queueOffsets[topicQueueKey{m.Topic, m.QueueID}]--
			}
		}
		c.mu.Unlock()
		return nil, 0, c.appendErr(err)
	}
	c.mu.Unlock()
	for i := range res {
		res[i].MsgID = OffsetMsgID(c.cfg.StoreHost, res[i].PhysicalOffset)
	}
	c.kickPrefault(base + int64(total))
	if c.onAppend != nil {
		c.onAppend()
	}
	return res, base + int64(total), nil
}

// EntryPos is where AppendEncoded put one message.
type EntryPos struct {
	// PhysicalOffset is the message's offset in the CommitLog.
	PhysicalOffset int64
	// Size is its stored size.
	Size int32
}

// AppendEncoded appends a batch of messages already in stored format (e.g.
// one Raft entry's payload) with ONE copy (into the mapping, or under
// SYNC_FLUSH into the group's write buffer, written with one pwrite per
// flush), without re-encoding anything: each message's
// PHYSICALOFFSET and STORETIMESTAMP are filled in place in batch (the caller's
// buffer is modified, so it holds exactly the stored bytes) and its entry CRC
// resealed, then the batch is written as is. QUEUEOFFSET is left as written:
// queue offsets are assigned by the dispatcher (Raft Apply) and patched into
// read copies. The batch never straddles a segment. It returns each
// message's position and the batch end. The batch must come from
// AppendMessage (each entry carries the CRC property); it is checked
// structurally before anything is written.
func (c *CommitLog) AppendEncoded(batch []byte) ([]EntryPos, int64, error) {
	var pos []EntryPos
	for p := 0; p < len(batch); {
		l, err := checkMessage(batch[p:], false)
		if err != nil || l.magic == MagicBlank || !hasCRCProperty(batch[p:p+l.size]) {
			if err == nil {
				err = fmt.Errorf("entry at %d is a blank filler or lacks the CRC property", p)
			}
			return nil, 0, fmt.Errorf("%w: pre-encoded batch: %w", ErrMessageIllegal, err)
		}
		pos = append(pos, EntryPos{PhysicalOffset: int64(p), Size: int32(l.size)})
		p += l.size
	}
	if len(pos) == 0 {
		return nil, c.MaxOffset(), nil
	}
	if err := c.checkSize(len(batch)); err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writableErr(); err != nil {
		return nil, 0, err
	}
	mf, err := c.segmentForLocked(len(batch))
	if err != nil {
		return nil, 0, err
	}
	ts := c.cfg.Now().UnixMilli()
	base := mf.FileFromOffset() + int64(mf.AppendPosition())
	for i := range pos {
		rel := pos[i].PhysicalOffset
		pos[i].PhysicalOffset = base + rel
		patchStored(batch[rel:rel+int64(pos[i].Size)], base+rel, ts)
	}
	if _, err := mf.AppendBytes(batch); err != nil {
		return nil, 0, c.appendErr(err)
	}
	c.lastStoreTimestamp.Store(ts)
	c.kickPrefault(base + int64(len(batch)))
	if c.onAppend != nil {
		c.onAppend()
	}
	return pos, base + int64(len(batch)), nil
}

// Read returns a view of size bytes at a physical offset; the caller must
// Release it. It never crosses a segment or the written end.
func (c *CommitLog) Read(offset int64, size int) (*storage.Slice, error) {
	mf := c.mfq.FindByOffset(offset)
	if mf == nil {
		return nil, fmt.Errorf("%w: no CommitLog segment holds offset %d (min %d, max %d)", ErrOutOfRange, offset, c.MinOffset(), c.MaxOffset())
	}
	return mf.Read(int(offset-mf.FileFromOffset()), size)
}

// ReadMessage returns a view of the verified stored message at offset: its
// size from TOTALSIZE, magic, lengths, body and entry CRC checked. A damaged
// entry is ErrCorruptMessage and is never returned.
func (c *CommitLog) ReadMessage(offset int64) (*storage.Slice, error) {
	mf := c.mfq.FindByOffset(offset)
	if mf == nil {
		return nil, fmt.Errorf("%w: no CommitLog segment holds offset %d (min %d, max %d)", ErrOutOfRange, offset, c.MinOffset(), c.MaxOffset())
	}
	s, err := mf.ReadFrom(int(offset - mf.FileFromOffset()))
	if err != nil {
		return nil, err
	}
	l, err := checkMessage(s.B, true)
	if err == nil && l.magic == MagicBlank {
		err = fmt.Errorf("%w: blank filler at %d", ErrOutOfRange, offset)
	}
	if err != nil {
		s.Release()
		if errors.Is(err, ErrCorruptMessage) {
			c.log.Error("corrupt CommitLog entry not served", zap.Int64("offset", offset), zap.Error(err))
		}
		return nil, fmt.Errorf("CommitLog entry at %d: %w", offset, err)
	}
	s.B = s.B[:l.size:l.size]
	return s, nil
}

// ReadVerified returns a view of exactly size bytes at offset after checking
// the entry (used with sizes from the ConsumeQueue).
func (c *CommitLog) ReadVerified(offset int64, size int32) (*storage.Slice, error) {
	s, err := c.Read(offset, int(size))
	if err != nil {
		return nil, err
	}
	if err := c.verifyEntry(s.B, offset, size); err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

// verifyEntry checks that b is the intact message of size bytes stored at
// offset; damage is logged and returned wrapping ErrCorruptMessage.
func (c *CommitLog) verifyEntry(b []byte, offset int64, size int32) error {
	l, err := checkMessage(b, true)
	if err == nil && (l.magic == MagicBlank || l.size != int(size)) {
		err = fmt.Errorf("%w: entry size %d, ConsumeQueue says %d", ErrCorruptMessage, l.size, size)
	}
	if err == nil && int64(binary.BigEndian.Uint64(b[offPhysicalOffset:])) != offset {
		err = fmt.Errorf("%w: PHYSICALOFFSET field does not match %d", ErrCorruptMessage, offset)
	}
	if err != nil {
		c.log.Error("corrupt CommitLog entry not served", zap.Int64("offset", offset), zap.Error(err))
		return fmt.Errorf("CommitLog entry at %d: %w", offset, err)
	}
	return nil
}

// segmentCursor reads consecutive messages (a pull batch) while holding one
// reference on their segment, instead of a lookup, a refcount and a view
// per message. Call release when done.
type segmentCursor struct {
	cl *CommitLog
	mf *storage.MappedFile
}

func (sc *segmentCursor) release() {
	if sc.mf != nil {
		sc.mf.Release()
		sc.mf = nil
	}
}

// message returns the verified bytes of the message at offset; they alias
// the mapping and stay valid until release (or a read in another segment).
func (sc *segmentCursor) message(offset int64, size int32) ([]byte, error) {
	if sc.mf == nil || offset < sc.mf.FileFromOffset() || offset >= sc.mf.FileFromOffset()+int64(sc.mf.Size()) {
		sc.release()
		mf := sc.cl.mfq.FindByOffset(offset)
		if mf == nil || !mf.Retain() {
			return nil, fmt.Errorf("%w: no CommitLog segment holds offset %d", ErrOutOfRange, offset)
		}
		sc.mf = mf
	}
	pos := int(offset - sc.mf.FileFromOffset())
	if size < 0 || pos+int(size) > sc.mf.WrotePosition() {
		return nil, fmt.Errorf("%w: [%d,%d) past the written end of %s", ErrOutOfRange, offset, offset+int64(size), sc.mf.Path())
	}
	b := sc.mf.Bytes()[pos : pos+int(size) : pos+int(size)]
	if err := sc.cl.verifyEntry(b, offset, size); err != nil {
		return nil, err
	}
	return b, nil
}

// StoreTimeAt returns the STORETIMESTAMP of the message at offset (for
// time-based ConsumeQueue search).
func (c *CommitLog) StoreTimeAt(offset int64, size int32) (int64, error) {
	s, err := c.Read(offset, int(size))
	if err != nil {
		return 0, err
	}
	defer s.Release()
	if len(s.B) < minMessageSize {
		return 0, fmt.Errorf("%w: %d bytes at %d", ErrCorruptMessage, len(s.B), offset)
	}
	sysFlag := int32(binary.BigEndian.Uint32(s.B[offSysFlag:]))
	return int64(binary.BigEndian.Uint64(s.B[storeTimestampOffset(sysFlag):])), nil
}

// close closes the segments (flush first for a clean shutdown).
func (c *CommitLog) close() error { return c.mfq.Close() }
