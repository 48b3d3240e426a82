package raftlog

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/storage"
)

// Damage below the recovery anchor.
//
// Open checks every frame from the checkpoint anchor on (corrupt.go); the
// closed segments before it are trusted, so a bit that rots there later
// would be served to consumers and to catching-up peers. ScrubSegment lets
// the owner verify them in the background, one closed segment per call,
// paced by the caller; ReadRange (catchup.go) checks every frame it hands
// out the same way. Both report damage as a *DamageError naming the file
// and offset: a damaged member must stop voting and serving, and the
// repair is the operator's wipe-and-catch-up (docs/operations.md), since
// a frame cannot be rewritten in place without its peers' bytes.

// ErrDamagedLog marks a frame that fails its checks in a part of the log
// that was already durable and acknowledged (DamageError unwraps to it).
var ErrDamagedLog = errors.New("raftlog: damaged frame in the acknowledged log")

// DamageError says where a frame of the acknowledged log failed its checks.
type DamageError struct {
	// Path and FileOffset locate the bad bytes' entry in its segment file;
	// Position is the same place in the log's file space.
	Path       string
	FileOffset int64
	Position   int64
	// AfterIndex is the raft index of the last good frame before it in the
	// same segment (0 if the damage is the segment's first entry).
	AfterIndex uint64
	// Cause is why the entry failed (ErrCorruptFrame and the check).
	Cause error
}

// Error implements error.
func (e *DamageError) Error() string {
	return fmt.Sprintf("raftlog: damaged log in %s at offset %d (log position %d, after raft index %d): %v; "+
		"this member does not serve, vote or lead with it. Repair: wipe this member and let it catch up from its peers (docs/operations.md)",
		e.Path, e.FileOffset, e.Position, e.AfterIndex, e.Cause)
}

// Unwrap returns ErrDamagedLog and the cause.
func (e *DamageError) Unwrap() []error { return []error{ErrDamagedLog, e.Cause} }

func damageAt(mf *storage.MappedFile, rel int, after uint64, cause error) *DamageError {
	return &DamageError{Path: mf.Path(), FileOffset: int64(rel), Position: mf.FileFromOffset() + int64(rel), AfterIndex: after, Cause: cause}
}

// scrubPaceBytes is how many verified bytes ScrubSegment reports to its
// pace callback at a time.
const scrubPaceBytes = 256 << 10

// ScrubSegment verifies every entry (frame CRC, blank filler) of the first
// closed segment that ends after position from, and returns the position
// after it, where the next call continues. A segment is closed once a later
// segment holds the last stored frame: nothing writes it again (the open
// segment's frames past the anchor are checked by Open). Segments wholly
// before the first retained index are skipped. ok is false when there is
// no such segment (the pass is over), or while a catch-up backfill is still
// filling the log's head. pace is called with each chunk of verified bytes
// (throttling; its error ends the call). Damage is a *DamageError.
func (s *LogStore) ScrubSegment(from int64, pace func(n int) error) (next int64, ok bool, err error) {
	mf, start, ok, err := s.scrubTarget(from)
	if err != nil || !ok {
		return from, false, err
	}
	defer mf.Release()
	end := mf.FileFromOffset() + int64(mf.Size())
	if err := scanSegment(mf, start, mf.Size(), pace); err != nil {
		if errors.Is(err, ErrDamagedLog) {
			return end, true, s.confirmDamage(mf, start, mf.Size())
		}
		return from, true, err
	}
	return end, true, nil
}

// confirmDamage scans [start, limit) of mf again with the writer lock held,
// so no append, suffix truncation or reset changes it meanwhile, and only
// if mf is still a retained segment holding no frame past the last stored
// one (a truncation that moved the tail back into it zeroes frames the
// unlocked scan may have seen half-zeroed). It returns the damage found
// then, nil if there is none (the bytes were in flux).
func (s *LogStore) confirmDamage(mf *storage.MappedFile, start, limit int) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	ok := !s.closed && !s.emptyLocked() && s.segQ.FindByOffset(mf.FileFromOffset()) == mf
	if ok && limit == mf.Size() {
		tailPos, err := s.slotLocked(s.tail)
		ok = err == nil && mf.FileFromOffset()+int64(mf.Size()) <= tailPos
	}
	s.mu.RUnlock()
	if !ok {
		return nil
	}
	return scanSegment(mf, start, limit, func(int) error { return nil })
}

// VerifySegmentAt verifies the entries of the segment holding position pos
// (closed or not; in the open one up to what is written), unpaced and with
// the writer lock held (appends wait): the check of a segment a reader
// found a damaged message in. Damage is a *DamageError.
func (s *LogStore) VerifySegmentAt(pos int64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	mf := s.segQ.FindByOffset(pos)
	start := 0
	if mf != nil && !s.emptyLocked() {
		if firstPos, err := s.slotLocked(s.first); err == nil && firstPos > mf.FileFromOffset() && firstPos < mf.FileFromOffset()+int64(mf.Size()) {
			start = int(firstPos - mf.FileFromOffset())
		}
	}
	if mf == nil || !mf.Retain() {
		s.mu.RUnlock()
		return fmt.Errorf("%w: no segment holds position %d", ErrLogMismatch, pos)
	}
	s.mu.RUnlock()
	defer mf.Release()
	return scanSegment(mf, start, mf.WrotePosition(), func(int) error { return nil })
}

// scanSegment checks the entries of mf from rel start on until limit (or
// zeros), calling pace with each scrubPaceBytes or so of checked bytes.
func scanSegment(mf *storage.MappedFile, start, limit int, pace func(n int) error) error {
	b := mf.Bytes()
	var last uint64
	paced := 0
	for rel := start; rel < limit; {
		kind, h, n, err := ScanEntry(b[rel:])
		if errors.Is(err, ErrEndOfData) {
			// Zeros: the end of what was written, unless anything but
			// zeros follows before limit (entries are appended in order
			// and a head a reset left empty lies before start), which
			// makes them a zeroed entry: a lost or zeroed write hides
			// the frames behind it from every other check.
			return checkZeros(mf, rel, limit, last, pace, paced)
		}
		if err != nil {
			return damageAt(mf, rel, last, err)
		}
		if kind == KindFrame {
			last = h.Index
		}
		rel += n
		paced += n
		if paced >= scrubPaceBytes {
			if err := pace(paced); err != nil {
				return err
			}
			paced = 0
		}
	}
	if paced > 0 {
		return pace(paced)
	}
	return nil
}

// scrubTarget finds and retains the segment ScrubSegment verifies, and
// where in it to start.
func (s *LogStore) scrubTarget(from int64) (*storage.MappedFile, int, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, 0, false, ErrClosed
	}
	if s.emptyLocked() || s.backfillOpen.Load() {
		return nil, 0, false, nil
	}
	firstPos, err := s.slotLocked(s.first)
	if err != nil {
		return nil, 0, false, err
	}
	tailPos, err := s.slotLocked(s.tail)
	if err != nil {
		return nil, 0, false, err
	}
	for _, mf := range s.segQ.Files() {
		segStart := mf.FileFromOffset()
		segEnd := segStart + int64(mf.Size())
		if segEnd <= from || segEnd <= firstPos {
			continue
		}
		if segEnd > tailPos {
			return nil, 0, false, nil // the open segment: the pass is over
		}
		if !mf.Retain() {
			return nil, 0, false, nil // being deleted by retention
		}
		start := 0
		if firstPos > segStart {
			start = int(firstPos - segStart)
		}
		return mf, start, true, nil
	}
	return nil, 0, false, nil
}

// checkZeros verifies that b[rel:limit] of mf holds only zeros (pacing
// like scanSegment, paced bytes already counted); a non-zero byte makes
// the zeros at rel damage.
func checkZeros(mf *storage.MappedFile, rel, limit int, last uint64, pace func(n int) error, paced int) error {
	b := mf.Bytes()
	for at := rel; at < limit; {
		end := min(at+scrubPaceBytes, limit)
		for _, c := range b[at:end] {
			if c != 0 {
				return damageAt(mf, rel, last, fmt.Errorf("%w: zeros where an entry should start, data follows within the segment", ErrCorruptFrame))
			}
		}
		paced += end - at
		at = end
		if paced >= scrubPaceBytes {
			if err := pace(paced); err != nil {
				return err
			}
			paced = 0
		}
	}
	if paced > 0 {
		return pace(paced)
	}
	return nil
}
