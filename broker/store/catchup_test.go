package store

import (
	"errors"
	"math"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// FuzzDecodeCQUnits: the CATCHUP_READ units body decoder never panics and
// round-trips what it accepts.
func FuzzDecodeCQUnits(f *testing.F) {
	f.Add(AppendCQUnits(nil, []CQUnit{{PhyOffset: 100, Size: 50, TagsCode: 7}, {PhyOffset: 150, Size: 60}}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		units, err := DecodeCQUnits(b)
		if err != nil {
			return
		}
		if got := AppendCQUnits(nil, units); string(got) != string(b) {
			t.Fatalf("round trip %x → %x", b, got)
		}
	})
}

// FuzzDecodeBackfillRedo: a backfill redo record is accepted only as
// encodeBackfillRedo writes it (whole units at a unit boundary), and the
// decoder never panics.
func FuzzDecodeBackfillRedo(f *testing.F) {
	f.Add(encodeBackfillRedo(40*CQUnitSize, AppendCQUnits(nil, []CQUnit{unitN(40), unitN(41)})))
	f.Add([]byte(backfillRedoMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		pos, units, ok := decodeBackfillRedo(b)
		if !ok {
			return
		}
		if pos < 0 || pos%CQUnitSize != 0 || len(units)%CQUnitSize != 0 || string(encodeBackfillRedo(pos, units)) != string(b) {
			t.Fatalf("accepted %x as position %d, %d bytes of units", b, pos, len(units))
		}
	})
}

// TestConsumeQueueBackfill: units put in front of a queue restarted at an
// offset (a snapshot install) are readable, the minimum moves down, a
// reopen finds the same range, and a backfill that does not end at the
// minimum is refused.
func TestConsumeQueueBackfill(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		s := openTestCQStore(t, fsys, dir, 8)
		if err := s.StartQueueAt("T", 0, 20); err != nil {
			t.Fatal(err)
		}
		cq := s.Get("T", 0)
		appendUnits(t, cq, 20, 25)
		if err := cq.Backfill(5, []CQUnit{unitN(5)}); err == nil {
			t.Fatal("a backfill that does not end at the minimum was accepted")
		}
		var units []CQUnit
		for n := int64(3); n < 20; n++ {
			units = append(units, unitN(n))
		}
		if err := cq.Backfill(3, units); err != nil {
			t.Fatal(err)
		}
		check := func(cq *ConsumeQueue) {
			t.Helper()
			if cq.MinOffset() != 3 || cq.MaxOffset() != 25 {
				t.Fatalf("range [%d, %d), want [3, 25)", cq.MinOffset(), cq.MaxOffset())
			}
			for n := int64(3); n < 25; n++ {
				if u, err := cq.Get(n); err != nil || u != unitN(n) {
					t.Fatalf("offset %d: %+v, %v", n, u, err)
				}
			}
		}
		check(cq)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTestCQStore(t, fsys, dir, 8)
		defer s.Close()
		check(s.Get("T", 0))
	})
}

// TestStartQueueAtRefusesImpossibleOffset: a snapshot image naming a queue
// offset no queue can have (negative, or past the last unit an int64 byte
// position can address) is refused with ErrCorruptFile instead of
// starting the queue there.
func TestStartQueueAtRefusesImpossibleOffset(t *testing.T) {
	for _, next := range []int64{-1, math.MinInt64, math.MaxInt64/CQUnitSize + 1, math.MaxInt64} {
		s := NewConsumeQueueStore(storage.NewFaultFS(1), "/cq", 8, nil)
		if err := s.StartQueueAt("T", 0, next); !errors.Is(err, ErrCorruptFile) {
			t.Errorf("StartQueueAt(%d): %v, want ErrCorruptFile", next, err)
		}
		if cq := s.Get("T", 0); cq != nil {
			t.Errorf("StartQueueAt(%d) made a queue at [%d, %d)", next, cq.MinOffset(), cq.MaxOffset())
		}
	}
}
