package store

import (
	"fmt"
)

// Backfill puts units at logical offsets [from, from+len(units)) in front of
// the queue: a member that installed a snapshot restarted the queue at the
// leader's next offset (StartQueueAt) with blanks before it, and once it has
// fetched the CommitLog before that point it takes the peer's units for it
// (queue offsets are identical on every replica). from+len(units) must be
// the queue's MinOffset, units must be in CommitLog order and end before
// the queue's first unit. The bytes are durable before MinOffset moves down
// to from, so readers never see a unit that is not there.
func (cq *ConsumeQueue) Backfill(from int64, units []CQUnit) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	minLogic := cq.minLogic.Load()
	if len(units) == 0 {
		return nil
	}
	if from < 0 || from+int64(len(units)) != minLogic {
		return fmt.Errorf("consume queue %s/%d: backfill [%d, %d) does not end at the queue's minimum %d: %w",
			cq.topic, cq.queueID, from, from+int64(len(units)), minLogic, ErrCorruptFile)
	}
	prevEnd := int64(-1)
	for i, u := range units {
		if !u.valid() || u.IsBlank() || u.PhyOffset < prevEnd {
			return fmt.Errorf("consume queue %s/%d: backfill unit %+v at %d: %w", cq.topic, cq.queueID, u, from+int64(i), ErrCorruptFile)
		}
		prevEnd = u.end()
	}
	if minLogic < cq.maxLogic.Load() {
		if next, err := cq.unitAt(minLogic); err == nil && !next.IsBlank() && prevEnd > next.PhyOffset {
			return fmt.Errorf("consume queue %s/%d: backfill ends at physical offset %d, after the queue's first unit at %d: %w",
				cq.topic, cq.queueID, prevEnd, next.PhyOffset, ErrCorruptFile)
		}
	}
	// Every crash point must leave blanks, then units in CommitLog order,
	// which recovery keeps whole (it skips blanks and ends the queue at the
	// first zero or out-of-order unit), with the minimum at the first
	// unit, where the next catch-up resumes. So a prepended file exists
	// only once it is all blanks, and the units go in from the last file
	// to the first, each file synced before the one in front of it is
	// touched: the old first file's head blanks are replaced first.
	var blank [CQUnitSize]byte
	blankCQUnit.encode(blank[:])
	if err := cq.mfq.PrependToFilled(from*CQUnitSize, blank[:]); err != nil {
		return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
	}
	start, end := from*CQUnitSize, minLogic*CQUnitSize
	for end > start {
		mf := cq.mfq.FindByOffset(end - 1)
		if mf == nil {
			return fmt.Errorf("consume queue %s/%d: backfill: no file holds byte %d: %w", cq.topic, cq.queueID, end-1, ErrCorruptFile)
		}
		lo := max(start, mf.FileFromOffset())
		buf := AppendCQUnits(make([]byte, 0, end-lo), units[(lo-start)/CQUnitSize:(end-start)/CQUnitSize])
		if err := mf.WriteAt(buf, int(lo-mf.FileFromOffset())); err != nil {
			return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
		}
		if _, err := mf.Flush(); err != nil {
			return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
		}
		end = lo
	}
	cq.minLogic.Store(from)
	return nil
}

// AppendCQUnits appends the 20-byte encodings of units to b (the
// CATCHUP_READ body).
func AppendCQUnits(b []byte, units []CQUnit) []byte {
	var u [CQUnitSize]byte
	for _, x := range units {
		x.encode(u[:])
		b = append(b, u[:]...)
	}
	return b
}

// DecodeCQUnits decodes what AppendCQUnits wrote.
func DecodeCQUnits(b []byte) ([]CQUnit, error) {
	if len(b)%CQUnitSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes of consume queue units", ErrCorruptFile, len(b))
	}
	out := make([]CQUnit, 0, len(b)/CQUnitSize)
	for i := 0; i < len(b); i += CQUnitSize {
		out = append(out, decodeCQUnit(b[i:]))
	}
	return out, nil
}

// HasUnitAt reports whether the queue holds a unit for the message at
// CommitLog offset phy (a catch-up tells dispatched messages from stored
// ones that got no unit, such as a producer's duplicate).
func (cq *ConsumeQueue) HasUnitAt(phy int64) (bool, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	_, ok, err := cq.findByPhyLocked(phy)
	return ok, err
}
