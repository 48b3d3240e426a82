package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// The raft index → position index.
//
// Choice: a fixed-width sidecar, not a scan at open. Slot i (8 bytes,
// big-endian frame position) lives at offset 8·i of the index
// MappedFileQueue, so a lookup is one 8-byte read and files are named, rolled
// and deleted exactly like segments. Slots are written on every append but
// flushed only at checkpoints; the meta anchor says below which index they
// are durable. Restart cost: validating two slots + rescanning (CRC-checking)
// the log written since the last checkpoint, at most about CheckpointBytes
// (64 MiB by default) after a crash, nothing after a clean Close. A pure
// rebuild-by-scan would read the whole retained log at every start (minutes
// for a 1 TiB CommitLog on a cold cache).

func putUint64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
func getUint64(b []byte) uint64    { return binary.BigEndian.Uint64(b) }

// recover rebuilds the in-memory state from the meta record and the files:
// finish an interrupted reset, validate the durable slots, rescan the log
// from the anchor (rewriting slots), and truncate the first bad frame and
// everything after it (a torn tail).
func (s *LogStore) recover(m meta) error {
	if m.ResetPending {
		s.log.Warn("raftlog: finishing a reset interrupted by a crash", zap.Uint64("nextIndex", m.AnchorIndex), zap.Int64("nextPos", m.AnchorPos))
		if err := s.segQ.Destroy(); err != nil {
			return err
		}
		if err := s.idxQ.Destroy(); err != nil {
			return err
		}
		m.ResetPending = false
		if err := writeMeta(s.fsys, s.dir, m); err != nil {
			return err
		}
	}
	s.meta = m
	var tail0 uint64 // last index known before the anchor
	if m.FirstIndex > 0 && m.AnchorIndex > 0 {
		tail0 = m.AnchorIndex - 1
	}
	// term is the term of the last entry kept (0 = unknown: a fresh or
	// just-reset log, or one whose entries before the anchor were all
	// deleted). A Raft log's terms never decrease, so a whole frame of the
	// next index but a lower term than the entry before it was never
	// stored after that entry: it is a failed batch's frame that a power
	// loss brought back where the cut could leave no record (ADR 0022).
	// The scan stops there as at a torn frame, and classifyStopLocked
	// judges it the same way.
	var term uint64
	if tail0 > 0 {
		if err := s.idxQ.TruncateDirty(int64(m.AnchorIndex) * slotSize); err != nil {
			return err
		}
		// Cheap consistency checks of the durable part: the last slot before
		// the anchor must point at a frame of that index ending at the anchor,
		// and the first slot at a frame of the first index.
		if m.FirstIndex <= tail0 {
			pos, h, err := s.locateLocked(tail0)
			if err != nil {
				return fmt.Errorf("%w: checkpointed index %d: %v", ErrLogMismatch, tail0, err)
			}
			if pos+int64(h.Size) != m.AnchorPos {
				return fmt.Errorf("%w: checkpointed index %d ends at %d, anchor says %d", ErrLogMismatch, tail0, pos+int64(h.Size), m.AnchorPos)
			}
			term = h.Term
			if _, _, err := s.locateLocked(m.FirstIndex); err != nil {
				return fmt.Errorf("%w: first index %d: %v", ErrLogMismatch, m.FirstIndex, err)
			}
		}
	} else if err := s.idxQ.Destroy(); err != nil {
		// No durable slots: rebuild them all from the scan.
		return err
	}
	if minOff := s.segQ.MinOffset(); len(s.segQ.Files()) > 0 && minOff > m.AnchorPos {
		return fmt.Errorf("%w: scan should start at %d but the first segment starts at %d", ErrLogMismatch, m.AnchorPos, minOff)
	}

	p, end := m.AnchorPos, m.AnchorPos
	expect, tail := m.AnchorIndex, tail0
	var firstScanned uint64
	var stopErr error
	frames := 0
	// A cut in doubt (meta.ZeroTo) ends the log at its anchor: every frame
	// past it is one the cut removes, whether the page cache or the disk
	// still holds it.
	for m.ZeroTo == 0 {
		mf := s.segQ.FindByOffset(p)
		if mf == nil {
			break
		}
		from := mf.FileFromOffset()
		kind, h, n, err := ScanEntry(mf.Bytes()[p-from:])
		if err != nil {
			if !errors.Is(err, ErrEndOfData) {
				stopErr = err
			}
			break
		}
		if kind == KindBlank {
			p = from + int64(mf.Size())
			continue
		}
		if expect != 0 && h.Index != expect {
			stopErr = fmt.Errorf("%w: frame at %d has index %d, expected %d", ErrCorruptFrame, p, h.Index, expect)
			break
		}
		if h.Term < term {
			stopErr = fmt.Errorf("%w: frame at %d of index %d has term %d, below term %d of the entry before it", ErrCorruptFrame, p, h.Index, h.Term, term)
			break
		}
		if err := s.putSlotLocked(h.Index, p); err != nil {
			return err
		}
		if firstScanned == 0 {
			firstScanned = h.Index
		}
		p += int64(n)
		end, tail, expect, term = p, h.Index, h.Index+1, h.Term
		frames++
	}
	if stopErr != nil {
		if cerr := s.classifyStopLocked(end, expect, stopErr); cerr != nil {
			s.log.Error("raftlog: corrupt frame with acknowledged frames after it; not truncating", zap.String("dir", s.dir), zap.Error(cerr))
			return cerr
		}
		s.log.Warn("raftlog: torn tail truncated",
			zap.String("dir", s.dir), zap.Int64("position", end), zap.Uint64("lastIndex", tail), zap.Error(stopErr))
	}
	if err := s.segQ.TruncateDirty(end); err != nil {
		return fmt.Errorf("truncate log at %d: %w", end, err)
	}
	if m.ZeroTo > end {
		if err := s.rewriteZerosLocked(end, m.ZeroTo); err != nil {
			return fmt.Errorf("rewrite zeros of a cut in [%d, %d): %w", end, m.ZeroTo, err)
		}
	}
	if m.ZeroTo != 0 {
		// Durable zeros now lie past the end: the record is spent. It must
		// be cleared before entries are stored over its range, or a later
		// recovery would end the log at the anchor and drop them, so a
		// failure refuses the open; the next open rewrites the zeros again.
		m.ZeroTo = 0
		if err := writeMeta(s.fsys, s.dir, m); err != nil {
			return fmt.Errorf("clear the record of a truncation: %w", err)
		}
		s.meta = m
	}
	first := m.FirstIndex
	if first == 0 {
		first = firstScanned
	}
	s.first, s.tail = first, tail
	s.nextIndex = m.AnchorIndex
	if tail > 0 {
		s.nextIndex = tail + 1
	}
	s.nextPos = end
	s.recovery = RecoveryReport{ScanFrom: m.AnchorPos, End: end, Frames: frames, StopErr: stopErr}
	s.log.Info("raftlog opened", zap.String("dir", s.dir), zap.Uint64("first", first), zap.Uint64("last", tail),
		zap.Int64("scannedFrom", m.AnchorPos), zap.Int64("end", end), zap.Int("framesScanned", frames))
	return nil
}

// rewriteZerosLocked writes durable zeros with pwrite over [from, to) of
// the present segments, past the end of the log: a cut (a truncation or a
// failed batch) recorded that range before zeroing it, and its zeros may be
// in the page cache only (meta.ZeroTo).
func (s *LogStore) rewriteZerosLocked(from, to int64) error {
	for _, mf := range s.segQ.Files() {
		start := mf.FileFromOffset()
		lo, hi := max(from, start), min(to, start+int64(mf.Size()))
		if lo >= hi {
			continue
		}
		if err := mf.RewriteZeros(int(lo-start), int(hi-start)); err != nil {
			return err
		}
	}
	s.log.Warn("raftlog: rewrote the zeros of a cut that may not have reached the disk",
		zap.String("dir", s.dir), zap.Int64("from", from), zap.Int64("to", to))
	return nil
}

// RecoveryReport says what Open found.
type RecoveryReport struct {
	// ScanFrom is the anchor position scanning started at.
	ScanFrom int64
	// End is the recovered end of the log (the next write position).
	End int64
	// Frames is how many frames were rescanned (0 after a clean Close).
	Frames int
	// StopErr is why scanning stopped before zeros (a torn or corrupt
	// frame, or one whose index or term cannot follow the entry before
	// it), or nil.
	StopErr error
}

// Recovery returns the report of the Open that created s.
func (s *LogStore) Recovery() RecoveryReport { return s.recovery }

// locateLocked returns the position and checked header (CRC included) of a
// present index.
func (s *LogStore) locateLocked(index uint64) (int64, FrameHeader, error) {
	return s.locateWithLocked(index, CheckFrame)
}

// locateWithLocked returns the position and the header of a present index
// as check reads it (CheckFrame, or DecodeFrameHeader without the CRC).
func (s *LogStore) locateWithLocked(index uint64, check func([]byte) (FrameHeader, error)) (int64, FrameHeader, error) {
	sl, pos, err := s.frameViewLocked(index)
	if err != nil {
		return 0, FrameHeader{}, err
	}
	defer sl.Release()
	h, err := check(sl.B)
	if err != nil {
		return pos, h, fmt.Errorf("index %d at %d: %w", index, pos, err)
	}
	if h.Index != index {
		return pos, h, fmt.Errorf("%w: slot of index %d points at position %d holding index %d", ErrLogMismatch, index, pos, h.Index)
	}
	return pos, h, nil
}

// Locate returns the frame position and header of a present index, or
// raft.ErrLogNotFound. The FSM uses it to learn where a command's data (and
// so each stored message) lives: h.DataOffset() bytes after pos. It must not
// read positions out of the raft.Log it is given: on the leader that is the
// in-memory copy, which PatchCommand never saw.
func (s *LogStore) Locate(index uint64) (pos int64, h FrameHeader, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.servableLocked(index); err != nil {
		return 0, h, err
	}
	return s.locateLocked(index)
}

// servableLocked is ErrClosed on a closed store, raft.ErrLogNotFound for an
// index outside [FirstIndex, LastIndex], else nil.
func (s *LogStore) servableLocked(index uint64) error {
	if s.closed {
		return ErrClosed
	}
	if !s.inRangeLocked(index) {
		return raft.ErrLogNotFound
	}
	return nil
}

// LocateHeader is Locate without the data CRC: the frame header's own
// checks (magic, version, lengths fitting the segment, the index) only.
// The FSM calls it for every entry it applies, to learn where the entry's
// messages live; it reads the messages from the raft.Log it is given, whose
// data GetLog verified (or which is the leader's own memory). A CRC pass
// here would sit on the leader's commit-to-answer path for every entry,
// and make a restart that re-applies the log read all of it twice.
func (s *LogStore) LocateHeader(index uint64) (pos int64, h FrameHeader, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.servableLocked(index); err != nil {
		return 0, h, err
	}
	if pos, h, ok := s.recent.locate(index); ok {
		return pos, h, nil
	}
	return s.locateWithLocked(index, DecodeFrameHeader)
}

// EndOf returns the position just after the frame of index: what a
// snapshot taken at index records as the next physical offset, for ResetAt
// on a follower that installs it.
func (s *LogStore) EndOf(index uint64) (int64, error) {
	pos, h, err := s.Locate(index)
	if err != nil {
		return 0, err
	}
	return pos + int64(h.Size), nil
}

// ReadFrame returns the position and a copy of the raw frame of index (for
// replica comparison and tools).
func (s *LogStore) ReadFrame(index uint64) (int64, []byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.servableLocked(index); err != nil {
		return 0, nil, err
	}
	sl, pos, err := s.frameViewLocked(index)
	if err != nil {
		return 0, nil, err
	}
	defer sl.Release()
	h, err := CheckFrame(sl.B)
	if err != nil {
		return pos, nil, err
	}
	return pos, append([]byte(nil), sl.B[:h.Size]...), nil
}

// NextPosition returns where the next frame will be written (before any
// blank filler): the end of the last frame, or the reset position.
func (s *LogStore) NextPosition() int64 {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.nextPos
}

// MinPosition returns the first retained position (start of the oldest
// segment).
func (s *LogStore) MinPosition() int64 { return s.segQ.MinOffset() }
