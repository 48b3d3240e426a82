package raftlog

import (
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// Deletion rules. hashicorp/raft calls DeleteRange for three reasons, and
// the store treats them differently because the log is the broker's message
// store:
//
//	(a) prefix compaction after a snapshot (min <= FirstIndex): only the
//	    logical FirstIndex moves; no byte is removed. Messages are deleted by
//	    the retention policy through DeleteSegmentsBefore, never by Raft. The
//	    Raft config sets TrailingLogs huge (see Config) so (a) normally never
//	    happens at all.
//	(b) suffix truncation of conflicting, uncommitted entries on a follower
//	    (min > FirstIndex, max >= LastIndex): the files are cut back to the
//	    END of entry min-1 (not to the position of min: a blank filler after
//	    min-1 must go too, or the new entry min could land in a different
//	    segment than on the leader), tail zeroed durably.
//	(c) everything, after InstallSnapshot on a monotonic store. The FSM's
//	    Restore has called RestoreFrom(position recorded in the snapshot);
//	    this DeleteRange first makes the log continue the snapshot (keeping
//	    it up to the snapshot index if it matches, else ResetAt(snapshot
//	    index+1, position)), then deletes the rest logically, so the next
//	    StoreLogs lands at exactly the leader's position (snapshot.go).

// DeleteRange deletes the inclusive range [min, max] under the rules above.
// Ranges outside the log are ignored, like raft.InmemStore does.
func (s *LogStore) DeleteRange(min, max uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	s.mu.RLock()
	first, tail, empty := s.first, s.tail, s.emptyLocked()
	s.mu.RUnlock()
	if p := s.pending; p != nil && !empty && min <= first && max >= tail {
		// Raft deleting everything right after a snapshot restore (rule c):
		// first make the log continue the snapshot, then delete what is left
		// logically as usual.
		s.pending = nil
		if err := s.ensureContinuityLocked(*p); err != nil {
			return err
		}
		s.mu.RLock()
		first, tail, empty = s.first, s.tail, s.emptyLocked()
		s.mu.RUnlock()
		max = tail
	}
	if empty || min > max || max < first || min > tail {
		return nil
	}
	switch {
	case min <= first:
		return s.deletePrefixLocked(max, tail)
	case max >= tail:
		return s.truncateSuffixLocked(min)
	default:
		return fmt.Errorf("%w: [%d, %d] inside [%d, %d]", ErrBadRange, min, max, first, tail)
	}
}

// deletePrefixLocked moves the logical first index past max (rule a).
func (s *LogStore) deletePrefixLocked(max, tail uint64) error {
	newFirst := min(max, tail) + 1
	s.mu.Lock()
	s.first = newFirst
	s.mu.Unlock()
	s.log.Info("raftlog: prefix deleted logically (bytes stay until retention)", zap.Uint64("firstIndex", newFirst))
	if err := s.checkpointLocked(); err != nil {
		return s.fail(fmt.Errorf("persist first index %d: %w", newFirst, err))
	}
	return nil
}

// truncateSuffixLocked removes min and everything after it (rule b).
func (s *LogStore) truncateSuffixLocked(min uint64) error {
	s.mu.RLock()
	first := s.first
	pos, h, err := s.locateLocked(min - 1)
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("truncate from index %d: %w", min, err)
	}
	end := pos + int64(h.Size)
	// Before any byte changes, record the truncation (meta.ZeroTo, the end
	// of the bytes it zeroes) with the anchor at the cut: min at end. Then
	// until the record is cleared below, every frame between the anchor and
	// ZeroTo is one the truncation removes, so recovery ends the log at the
	// cut and writes its unfinished zeros for real (meta.ZeroTo). The
	// anchor vouches for the slots before min and, without Sync, for the
	// frames before end: make them durable first, as a checkpoint does. The first index is the log's: s.meta may hold a
	// further anchor remembered from a failed meta write beside an older
	// first index (0, "the first frame found from the anchor", after a
	// reset or on a fresh log), which would drop entries from recovery.
	if !s.opts.Sync {
		if err := s.segQ.Flush(); err != nil {
			return s.fail(fmt.Errorf("truncate from index %d: sync log: %w", min, err))
		}
	}
	if err := s.idxQ.Flush(); err != nil {
		return s.fail(fmt.Errorf("truncate from index %d: sync index: %w", min, err))
	}
	m := meta{SegmentSize: int64(s.opts.SegmentSize), FirstIndex: first, AnchorIndex: min, AnchorPos: end, ZeroTo: s.nextPos}
	if err := s.writeMetaLocked(m); err != nil {
		if s.recordVisibleLocked() {
			// The rename happened: a restart would end the log at the
			// cut, so nothing may be stored past it.
			return s.fail(fmt.Errorf("record truncation from index %d: %w", min, err))
		}
		// Nothing changed yet; Raft fails this AppendEntries and retries.
		return fmt.Errorf("record truncation from index %d: %w", min, err)
	}
	s.mu.Lock()
	s.tail = min - 1
	s.recent.clear()
	s.mu.Unlock()
	// No reader can reach the removed range any more; zero it.
	if err := s.segQ.TruncateDirty(end); err != nil {
		return s.fail(fmt.Errorf("truncate log at %d: %w", end, err))
	}
	if err := s.idxQ.TruncateDirty(int64(min) * slotSize); err != nil {
		return s.fail(fmt.Errorf("truncate index at %d: %w", min, err))
	}
	s.nextIndex, s.nextPos = min, end
	// The zeros are durable: clear the record before any entry is stored
	// over the range, or a later recovery could take acknowledged entries
	// there for this truncation's leftovers. If the clearing fails, the
	// store stops; the reopen rewrites the zeros and clears it.
	m.ZeroTo = 0
	if err := s.writeMetaLocked(m); err != nil {
		return s.fail(fmt.Errorf("clear the record of the truncation from index %d: %w", min, err))
	}
	s.log.Info("raftlog: conflicting suffix truncated", zap.Uint64("fromIndex", min), zap.Int64("position", end))
	return nil
}

// recordVisibleLocked reports whether the meta file in place holds a cut
// in doubt (ZeroTo), or cannot be read: after a failed write of such a
// record, whether its rename happened.
func (s *LogStore) recordVisibleLocked() bool {
	m, _, err := readMeta(s.fsys, s.dir)
	return err != nil || m.ZeroTo != 0
}

// ResetAt empties the log and makes the next StoreLogs start at nextIndex
// at position nextPos (rule c): nextIndex is a snapshot index + 1 and
// nextPos the position after that index's frame on the leader (EndOf
// there), so positions stay identical across replicas. The FSM normally does
// not call it directly but RestoreFrom, which resets only when the log does
// not already continue the snapshot, and during a startup restore only a log
// holding no entries (SettleRestore). Every
// segment and index file is removed; the space before nextPos in its segment
// stays zero and is never scanned. A crash halfway is finished by Open.
func (s *LogStore) ResetAt(nextIndex uint64, nextPos int64) error {
	if nextIndex == 0 || nextPos < 0 {
		return fmt.Errorf("%w: ResetAt(%d, %d)", ErrInvalidConfig, nextIndex, nextPos)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	s.pending = nil
	return s.resetLocked(nextIndex, nextPos)
}

func (s *LogStore) resetLocked(nextIndex uint64, nextPos int64) error {
	if err := s.noteResetLocked(nextIndex, nextPos); err != nil {
		return s.fail(fmt.Errorf("reset: %w", err))
	}
	m := meta{SegmentSize: int64(s.opts.SegmentSize), AnchorIndex: nextIndex, AnchorPos: nextPos, ResetPending: true}
	if err := s.writeMetaLocked(m); err != nil {
		// The record may have reached the disk (a failed directory sync):
		// a crash would finish the reset at Open, so the log must not go on.
		return s.fail(fmt.Errorf("reset: %w", err))
	}
	s.mu.Lock()
	s.first, s.tail = 0, 0
	// The cache's own check does not catch this one: a reset to the cached
	// last index + 1 lets the next append continue the old run by index,
	// and a backfill then makes the indexes before it present again at the
	// leader's positions (GetLog and LocateHeader would answer stale ones).
	s.recent.clear()
	s.mu.Unlock()
	s.resetWarmLocked()
	if err := s.segQ.Destroy(); err != nil {
		return s.fail(fmt.Errorf("reset: remove segments: %w", err))
	}
	if err := s.idxQ.Destroy(); err != nil {
		return s.fail(fmt.Errorf("reset: remove index files: %w", err))
	}
	m.ResetPending = false
	if err := s.writeMetaLocked(m); err != nil {
		return s.fail(fmt.Errorf("reset: %w", err))
	}
	s.nextIndex, s.nextPos, s.sinceCkpt = nextIndex, nextPos, 0
	s.log.Info("raftlog: reset for snapshot", zap.Uint64("nextIndex", nextIndex), zap.Int64("nextPos", nextPos))
	return nil
}

// DeleteSegmentsBefore is the retention entry point: it removes the
// segments (and index files) that lie wholly before the frame of index,
// never the segment holding it or the newest one, and moves FirstIndex to
// the first entry left. It returns the new FirstIndex (0 if the log is
// empty). The caller (retention policy) must only pass an index the FSM has
// applied and a snapshot covers, so Raft never needs the deleted entries
// except to send a snapshot, which GetLog's raft.ErrLogNotFound triggers.
func (s *LogStore) DeleteSegmentsBefore(index uint64) (uint64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	first, tail, empty := s.first, s.tail, s.emptyLocked()
	s.mu.RUnlock()
	if empty || index <= first {
		if empty {
			return 0, nil
		}
		return first, nil
	}
	index = min(index, tail+1)
	limit := s.nextPos
	if index <= tail {
		s.mu.RLock()
		p, err := s.slotLocked(index)
		s.mu.RUnlock()
		if err != nil {
			return first, err
		}
		limit = p
	}
	files := s.segQ.Files()
	newMin := int64(-1)
	for i := 0; i < len(files)-1; i++ {
		end := files[i].FileFromOffset() + int64(files[i].Size())
		if end > limit {
			break
		}
		newMin = end
	}
	if newMin < 0 {
		return first, nil
	}
	// The first entry whose frame starts at or after newMin (positions grow
	// with the index, so binary search the slots).
	lo, hi := first, index
	s.mu.RLock()
	for lo < hi {
		mid := lo + (hi-lo)/2
		p, err := s.slotLocked(mid)
		if err != nil {
			s.mu.RUnlock()
			return first, err
		}
		if p >= newMin {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	s.mu.RUnlock()
	newFirst := lo
	// Persist the new first index before the files go, so a crash in between
	// never leaves a FirstIndex pointing into a removed segment. A failed
	// meta write (ENOSPC on a full disk, the usual reason retention runs
	// early) changed nothing: keep the old first index and let
	// the next retention pass retry. A failed flush of the log or index
	// files still stops the store (their durable state is unknown).
	if err := s.checkpointFirstLocked(newFirst); err != nil {
		if mw := (*metaWriteError)(nil); errors.As(err, &mw) {
			s.log.Warn("raftlog: retention could not persist the new first index; nothing deleted, retried at the next pass",
				zap.Uint64("firstIndex", newFirst), zap.Error(err))
			return first, fmt.Errorf("persist first index %d: %w", newFirst, err)
		}
		return first, s.fail(fmt.Errorf("persist first index %d: %w", newFirst, err))
	}
	s.mu.Lock()
	s.first = newFirst
	s.mu.Unlock()
	n, err := s.segQ.DeleteBefore(newMin)
	if err != nil {
		return newFirst, fmt.Errorf("delete segments before %d: %w", newMin, err)
	}
	if _, err := s.idxQ.DeleteBefore(int64(newFirst) * slotSize); err != nil {
		return newFirst, fmt.Errorf("delete index files before index %d: %w", newFirst, err)
	}
	s.log.Info("raftlog: retention removed segments", zap.Int("segments", n), zap.Int64("minPosition", newMin), zap.Uint64("firstIndex", newFirst))
	if newFirst > tail {
		return 0, nil
	}
	return newFirst, nil
}

// FirstIndexFrom returns the first present index whose frame starts at or
// after pos, or 0 if none does. Retention, which picks segments by time,
// turns a segment's end position into the index to pass to
// DeleteSegmentsBefore (capped by the snapshot index).
func (s *LogStore) FirstIndexFrom(pos int64) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if s.emptyLocked() {
		return 0, nil
	}
	lo, hi := s.first, s.tail+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		p, err := s.slotLocked(mid)
		if err != nil {
			return 0, err
		}
		if p >= pos {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > s.tail {
		return 0, nil
	}
	return lo, nil
}
