package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Backfill: the entries before a snapshot reset, fetched from a peer.
//
// A log reset for a snapshot (rule c of delete.go) starts at S+1 at the
// leader's position P and holds nothing before it, while the leader still
// retains older segments (messages consumers may not have read). The reset
// writes a backfill record (BackfillState); the broker then fetches the
// peer's bytes of [StartPos, P) — the peer's first retained frame up to the
// end of S — and hands them to BackfillWrite in order. Positions are equal
// on every replica, so the bytes land exactly where the peer has them:
// files before the first segment are prepended, and the zeros before P in
// the reset segment are overwritten. Nothing reads that range yet:
// BackfillCommit checks every frame (CRC, consecutive indexes from
// StartIndex ending with S exactly at P), writes their index slots, and
// only then lowers the first index. A crash or a lost peer in between
// loses nothing: BackfillBegin finds the valid frames already written and
// resumes after them.

const (
	backfillFileName = "raftlog.backfill"
	backfillMagic    = 0x524C4246 // "RLBF"
	// magic, flags, next index, next pos, start index, start pos, crc
	backfillSize = 4 + 4 + 8 + 8 + 8 + 8 + 4
)

// BackfillState is what a reset log lacks and how far fetching it got.
type BackfillState struct {
	// NextIndex and NextPos are where the log continued after the reset:
	// the snapshot index + 1 and the end of the snapshot entry's frame.
	NextIndex uint64
	NextPos   int64
	// StartIndex and StartPos are the first entry being fetched (the
	// peer's first retained one); 0 before BackfillBegin.
	StartIndex uint64
	StartPos   int64
	// Committed is set once the entries are part of the log; what remains
	// is the broker's part (its queues), after which BackfillFinish
	// removes the record.
	Committed bool
}

func (b BackfillState) encode() []byte {
	out := make([]byte, backfillSize)
	be := binary.BigEndian
	be.PutUint32(out[0:], backfillMagic)
	if b.Committed {
		be.PutUint32(out[4:], 1)
	}
	be.PutUint64(out[8:], b.NextIndex)
	be.PutUint64(out[16:], uint64(b.NextPos))
	be.PutUint64(out[24:], b.StartIndex)
	be.PutUint64(out[32:], uint64(b.StartPos))
	be.PutUint32(out[40:], crc32.Checksum(out[:40], castagnoli))
	return out
}

func decodeBackfill(b []byte) (BackfillState, error) {
	be := binary.BigEndian
	if len(b) != backfillSize || be.Uint32(b[0:]) != backfillMagic || be.Uint32(b[40:]) != crc32.Checksum(b[:40], castagnoli) {
		return BackfillState{}, fmt.Errorf("%w: backfill record", ErrCorruptMeta)
	}
	return BackfillState{
		Committed: be.Uint32(b[4:])&1 != 0,
		NextIndex: be.Uint64(b[8:]), NextPos: int64(be.Uint64(b[16:])),
		StartIndex: be.Uint64(b[24:]), StartPos: int64(be.Uint64(b[32:])),
	}, nil
}

// loadBackfill reads the backfill record at Open (none: nil).
func (s *LogStore) loadBackfill() error {
	path := filepath.Join(s.dir, backfillFileName)
	f, err := s.fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, backfillSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return err
	}
	st, err := decodeBackfill(b[:n])
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	s.backfill = &st
	s.backfillOpen.Store(true)
	return nil
}

func (s *LogStore) writeBackfillLocked(st BackfillState) error {
	if err := storage.WriteFileAtomic(s.fsys, filepath.Join(s.dir, backfillFileName), st.encode()); err != nil {
		return fmt.Errorf("raftlog: write backfill record: %w", err)
	}
	s.backfill = &st
	s.backfillOpen.Store(true)
	return nil
}

// noteResetLocked records, at a reset for a snapshot, that the entries
// before nextIndex are missing. Any backfill in progress ends: its files
// were just removed.
func (s *LogStore) noteResetLocked(nextIndex uint64, nextPos int64) error {
	s.backfillGen++
	return s.writeBackfillLocked(BackfillState{NextIndex: nextIndex, NextPos: nextPos})
}

// Backfill returns the backfill record and a generation that changes with
// every reset; ok is false when the log lacks nothing it knows of.
func (s *LogStore) Backfill() (st BackfillState, gen uint64, ok bool) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.backfill == nil {
		return st, s.backfillGen, false
	}
	return *s.backfill, s.backfillGen, true
}

// BackfillPending reports whether the log lacks entries before a snapshot
// reset (or its owner has not finished with them): the member then holds
// fewer copies of old data than the group promises and must not lead.
// It takes no lock (Raft's vote requests ask it).
func (s *LogStore) BackfillPending() bool { return s.backfillOpen.Load() }

// ErrBackfillStale is returned by the backfill calls after a reset (a new
// snapshot install) replaced the record they were working on.
var ErrBackfillStale = errors.New("raftlog: backfill superseded by a newer snapshot reset")

func (s *LogStore) checkBackfillLocked(gen uint64) error {
	if err := s.writableLocked(); err != nil {
		return err
	}
	if s.backfill == nil || gen != s.backfillGen {
		return ErrBackfillStale
	}
	return nil
}

// BackfillBegin starts (or resumes) fetching from the peer's first
// retained entry startIndex at startPos and returns the position to fetch
// from: startPos, or the end of the valid frames a previous attempt wrote.
func (s *LogStore) BackfillBegin(gen, startIndex uint64, startPos int64) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.checkBackfillLocked(gen); err != nil {
		return 0, err
	}
	st := *s.backfill
	if st.Committed {
		return st.NextPos, nil
	}
	if startIndex == 0 || startIndex >= st.NextIndex || startPos < 0 || startPos >= st.NextPos {
		return 0, fmt.Errorf("%w: backfill from index %d at %d, log resumes at index %d at %d", ErrInvalidConfig, startIndex, startPos, st.NextIndex, st.NextPos)
	}
	if st.StartIndex != startIndex || st.StartPos != startPos {
		st.StartIndex, st.StartPos = startIndex, startPos
		if err := s.writeBackfillLocked(st); err != nil {
			return 0, err
		}
		return startPos, nil
	}
	end, _, _ := s.scanBackfillLocked(st, nil)
	return end, nil
}

// scanBackfillLocked walks the frames written from st.StartPos and returns
// where the valid, consecutive ones end and the last index; slot, if set,
// is called for each frame. It stops at NextPos.
func (s *LogStore) scanBackfillLocked(st BackfillState, slot func(index uint64, pos int64) error) (end int64, last uint64, err error) {
	p, expect := st.StartPos, st.StartIndex
	end = p
	for p < st.NextPos {
		mf := s.segQ.FindByOffset(p)
		if mf == nil {
			break
		}
		from := mf.FileFromOffset()
		kind, h, n, serr := ScanEntry(mf.Bytes()[p-from:])
		if serr != nil {
			break
		}
		if kind == KindBlank {
			p = from + int64(mf.Size())
			end = p
			continue
		}
		if h.Index != expect || p+int64(n) > st.NextPos {
			break
		}
		if slot != nil {
			if err := slot(h.Index, p); err != nil {
				return end, last, err
			}
		}
		p += int64(n)
		end, last, expect = p, h.Index, h.Index+1
	}
	return end, last, nil
}

// BackfillWrite writes b, the peer's bytes at position pos of the range
// being backfilled, into the log's file space and makes it durable. The
// files are found (or prepended) under the write lock; the copy and its
// sync run without it, so appends are never held up: nothing else touches
// that range until BackfillCommit.
func (s *LogStore) BackfillWrite(gen uint64, pos int64, b []byte) error {
	type part struct {
		mf  *storage.MappedFile
		rel int
		b   []byte
	}
	var parts []part
	defer func() {
		for _, p := range parts {
			p.mf.Release()
		}
	}()
	s.wmu.Lock()
	err := s.backfillPartsLocked(gen, pos, b, func(mf *storage.MappedFile, rel int, b []byte) {
		parts = append(parts, part{mf: mf, rel: rel, b: b})
	})
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := p.mf.WriteAtDurable(p.b, p.rel); err != nil {
			return fmt.Errorf("raftlog: backfill write %s: %w", p.mf.Path(), err)
		}
	}
	return nil
}

// backfillPartsLocked finds (prepending as needed) the segments b goes
// to and hands each retained segment and its part of b to add.
func (s *LogStore) backfillPartsLocked(gen uint64, pos int64, b []byte, add func(mf *storage.MappedFile, rel int, b []byte)) error {
	if err := s.checkBackfillLocked(gen); err != nil {
		return err
	}
	st := *s.backfill
	if st.Committed || st.StartIndex == 0 || pos < st.StartPos || pos+int64(len(b)) > st.NextPos {
		return fmt.Errorf("%w: backfill write [%d, %d) outside [%d, %d)", ErrInvalidConfig, pos, pos+int64(len(b)), st.StartPos, st.NextPos)
	}
	if s.segQ.Last() == nil {
		// Nothing stored since the reset: create the segment the log
		// continues in, as the next StoreLogs would.
		if s.nextPos != st.NextPos {
			return fmt.Errorf("%w: empty log continues at %d, backfill record says %d", ErrLogMismatch, s.nextPos, st.NextPos)
		}
		if _, err := s.segmentAtLocked(st.NextPos); err != nil {
			return fmt.Errorf("raftlog: backfill: %w", err)
		}
	}
	if err := s.segQ.PrependTo(pos); err != nil {
		return fmt.Errorf("raftlog: backfill: %w", err)
	}
	for len(b) > 0 {
		mf := s.segQ.FindByOffset(pos)
		if mf == nil || !mf.Retain() {
			return fmt.Errorf("%w: backfill: no segment holds %d", ErrLogMismatch, pos)
		}
		rel := int(pos - mf.FileFromOffset())
		n := min(len(b), mf.Size()-rel)
		add(mf, rel, b[:n])
		pos += int64(n)
		b = b[n:]
	}
	return nil
}

// BackfillCommit checks the backfilled frames (every CRC, indexes from
// StartIndex to NextIndex-1, the last one ending exactly at NextPos),
// writes their index slots durably and moves the first index down to
// StartIndex: from then on the entries are part of the log.
func (s *LogStore) BackfillCommit(gen uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.checkBackfillLocked(gen); err != nil {
		return err
	}
	st := *s.backfill
	if st.Committed {
		return nil
	}
	s.mu.RLock()
	first, tail := s.first, s.tail
	s.mu.RUnlock()
	empty := tail == 0
	switch {
	case empty && (s.nextIndex != st.NextIndex || s.nextPos != st.NextPos):
		return fmt.Errorf("%w: backfill commit with an empty log continuing at index %d at %d, want %d at %d",
			ErrLogMismatch, s.nextIndex, s.nextPos, st.NextIndex, st.NextPos)
	case !empty && first != st.NextIndex:
		return fmt.Errorf("%w: backfill commit with the log at [%d, %d], want it to start at %d", ErrLogMismatch, first, tail, st.NextIndex)
	}
	end, last, _ := s.scanBackfillLocked(st, nil)
	if end != st.NextPos || last != st.NextIndex-1 {
		return fmt.Errorf("%w: backfilled frames end at %d with index %d, want %d with index %d", ErrCorruptFrame, end, last, st.NextPos, st.NextIndex-1)
	}
	if s.idxQ.Last() == nil {
		// As putSlotLocked would for the next index.
		off := int64(st.NextIndex) * slotSize
		mf, err := s.idxQ.LastOrCreate(off)
		if err != nil {
			return fmt.Errorf("raftlog: backfill index: %w", err)
		}
		if err := alignWrite(mf, off); err != nil {
			return fmt.Errorf("raftlog: backfill index: %w", err)
		}
	}
	if err := s.idxQ.PrependTo(int64(st.StartIndex) * slotSize); err != nil {
		return fmt.Errorf("raftlog: backfill index: %w", err)
	}
	var buf [slotSize]byte
	if _, _, err := s.scanBackfillLocked(st, func(index uint64, pos int64) error {
		off := int64(index) * slotSize
		mf := s.idxQ.FindByOffset(off)
		if mf == nil {
			return fmt.Errorf("%w: no index file holds index %d", ErrLogMismatch, index)
		}
		putUint64(buf[:], uint64(pos))
		return mf.WriteAt(buf[:], int(off-mf.FileFromOffset()))
	}); err != nil {
		return s.fail(fmt.Errorf("backfill index slots: %w", err))
	}
	// Files wholly before the log's old start are complete now: readable
	// to their end.
	for _, q := range []struct {
		q   *storage.MappedFileQueue
		end int64
	}{{s.segQ, st.NextPos}, {s.idxQ, int64(st.NextIndex) * slotSize}} {
		for _, mf := range q.q.Files() {
			if mf.FileFromOffset()+int64(mf.Size()) <= q.end && mf.WrotePosition() < mf.Size() {
				mf.SetWrotePosition(mf.Size())
			}
		}
	}
	if err := s.idxQ.Flush(); err != nil {
		return s.fail(fmt.Errorf("backfill index flush: %w", err))
	}
	if empty {
		// The anchor vouches for the slots just written, up to the snapshot
		// entry; the log then holds [StartIndex, NextIndex-1].
		m := meta{SegmentSize: int64(s.opts.SegmentSize), FirstIndex: st.StartIndex, AnchorIndex: st.NextIndex, AnchorPos: st.NextPos}
		if err := s.writeMetaLocked(m); err != nil {
			return fmt.Errorf("raftlog: backfill: persist first index %d: %w", st.StartIndex, err)
		}
		s.mu.Lock()
		s.first, s.tail = st.StartIndex, st.NextIndex-1
		s.mu.Unlock()
	} else {
		if err := s.checkpointFirstLocked(st.StartIndex); err != nil {
			return fmt.Errorf("raftlog: backfill: persist first index %d: %w", st.StartIndex, err)
		}
		s.mu.Lock()
		s.first = st.StartIndex
		s.mu.Unlock()
	}
	st.Committed = true
	if err := s.writeBackfillLocked(st); err != nil {
		return err
	}
	s.log.Info("raftlog: backfill committed", zap.Uint64("firstIndex", st.StartIndex), zap.Int64("fromPos", st.StartPos),
		zap.Uint64("upToIndex", st.NextIndex-1), zap.Int64("bytes", st.NextPos-st.StartPos))
	return nil
}

// BackfillFinish removes the backfill record: the owner has everything it
// needs (or the peers had nothing older to give).
func (s *LogStore) BackfillFinish(gen uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.checkBackfillLocked(gen); err != nil {
		return err
	}
	if err := s.fsys.Remove(filepath.Join(s.dir, backfillFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("raftlog: remove backfill record: %w", err)
	}
	if err := s.fsys.SyncDir(s.dir); err != nil {
		return fmt.Errorf("raftlog: remove backfill record: %w", err)
	}
	s.backfill = nil
	s.backfillOpen.Store(false)
	return nil
}

// ReadRange copies the whole entries (frames, a segment's blank filler) of
// the log's file space that start at pos and end within n bytes of it (at
// least one entry, however long), stopping at the end of pos's segment and
// at the end of written data: what a peer catching up fetches. Only
// committed data below the caller's snapshot position is asked for, so the
// bytes are stable. Every frame is checked (CRC) before it is copied: a
// damaged one is never handed out; the error is a *DamageError naming the
// file and offset, unless it is the first entry and carries no entry magic
// at all (pos is not an entry boundary: ErrLogMismatch).
func (s *LogStore) ReadRange(pos int64, n int) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	mf := s.segQ.FindByOffset(pos)
	if mf == nil {
		return nil, fmt.Errorf("%w: no segment holds position %d (retained from %d)", ErrLogMismatch, pos, s.segQ.MinOffset())
	}
	rel := int(pos - mf.FileFromOffset())
	limit := mf.WrotePosition() - rel
	if min(n, limit) <= 0 {
		return nil, fmt.Errorf("%w: position %d is past the written data", ErrLogMismatch, pos)
	}
	sl, err := mf.Read(rel, limit)
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	// The blank filler runs to the segment's end, which may lie past the
	// written position the slice stops at.
	seg := mf.Bytes()[rel:]
	end := 0
	for end < limit && end < n {
		kind, _, size, err := ScanEntry(seg[end:])
		if errors.Is(err, ErrEndOfData) {
			break
		}
		if err != nil {
			if end == 0 && !entryMagicAt(seg) {
				return nil, fmt.Errorf("%w: position %d is not an entry boundary: %v", ErrLogMismatch, pos, err)
			}
			return nil, damageAt(mf, rel+end, 0, err)
		}
		if (end > 0 && end+size > n) || (kind == KindFrame && end+size > limit) {
			break
		}
		end = min(end+size, limit)
	}
	if end == 0 {
		return nil, fmt.Errorf("%w: no entry at position %d", ErrLogMismatch, pos)
	}
	return append([]byte(nil), sl.B[:end]...), nil
}

// entryMagicAt reports whether b starts with a frame or blank filler
// header's magic.
func entryMagicAt(b []byte) bool {
	if len(b) < BlankHeaderSize {
		return false
	}
	m := binary.BigEndian.Uint32(b[offMagic:])
	return m == FrameMagic || m == BlankMagic
}

// FirstPosition returns the first index and its frame position (0, 0 for
// an empty log): where a peer catching up starts fetching.
func (s *LogStore) FirstPosition() (uint64, int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, 0, ErrClosed
	}
	if s.emptyLocked() {
		return 0, 0, nil
	}
	pos, err := s.slotLocked(s.first)
	return s.first, pos, err
}
