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
	if err := cq.mfq.PrependTo(from * CQUnitSize); err != nil {
		return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
	}
	first := cq.mfq.First()
	// Blanks before from in the (new) first file, so a reopen finds the
	// minimum by skipping them (recover).
	buf := make([]byte, 0, (from*CQUnitSize-first.FileFromOffset())+int64(len(units))*CQUnitSize)
	var b [CQUnitSize]byte
	for o := first.FileFromOffset() / CQUnitSize; o < from; o++ {
		blankCQUnit.encode(b[:])
		buf = append(buf, b[:]...)
	}
	for _, u := range units {
		u.encode(b[:])
		buf = append(buf, b[:]...)
	}
	pos := first.FileFromOffset()
	for len(buf) > 0 {
		mf := cq.mfq.FindByOffset(pos)
		if mf == nil {
			return fmt.Errorf("consume queue %s/%d: backfill: no file holds byte %d: %w", cq.topic, cq.queueID, pos, ErrCorruptFile)
		}
		rel := int(pos - mf.FileFromOffset())
		n := min(len(buf), mf.Size()-rel)
		if err := mf.WriteAt(buf[:n], rel); err != nil {
			return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
		}
		if rel+n == mf.Size() && mf.WrotePosition() < mf.Size() {
			mf.SetWrotePosition(mf.Size()) // a prepended file, now whole
		}
		if _, err := mf.Flush(); err != nil {
			return fmt.Errorf("consume queue %s/%d: backfill: %w", cq.topic, cq.queueID, err)
		}
		pos += int64(n)
		buf = buf[n:]
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
