package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// writeQueueFiles writes queue files of perFile units into dir, the first
// starting at unit firstUnit, unit i holding blank (blanks[i]) or
// unitN(firstUnit+i).
func writeQueueFiles(t *testing.T, fsys storage.FS, dir string, perFile int, firstUnit int64, blanks []bool) {
	t.Helper()
	if err := storage.MkdirAllDurable(fsys, dir); err != nil {
		t.Fatal(err)
	}
	for f := 0; f*perFile < len(blanks); f++ {
		buf := make([]byte, perFile*CQUnitSize)
		for i := 0; i < perFile && f*perFile+i < len(blanks); i++ {
			u := unitN(firstUnit + int64(f*perFile+i))
			if blanks[f*perFile+i] {
				u = blankCQUnit
			}
			u.encode(buf[i*CQUnitSize:])
		}
		name := filepath.Join(dir, storage.FileName((firstUnit+int64(f*perFile))*CQUnitSize))
		fl, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fl.WriteAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		if err := fl.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Recovery's minimum is the first unit that is not blank and its
// MaxPhysicOffset the end of the last one, whatever the blanks' places:
// a prefix (a started or backfilled queue, whole prepended files of them
// included) or anywhere (no state the backfill leaves, but the scan must
// not depend on it). The run-wise scans agree with unit-by-unit ones over
// every range, and the lookups by physical offset step over the blanks.
func TestBlankScanMatchesUnitByUnit(t *testing.T) {
	const perFile = 2500 // more than one 1024-unit comparison run per file
	const files = 4      // the recovery scan of the last three misses the first
	const total = perFile * files
	prefix := func(k int) []bool {
		b := make([]bool, total)
		for i := range k {
			b[i] = true
		}
		return b
	}
	cases := map[string][]bool{}
	for _, k := range []int{0, 1, 1023, 1024, 1025, 2047, 2048, perFile - 1, perFile, perFile + 1, 3*perFile - 1, 3 * perFile, total - 1, total} {
		cases[fmt.Sprintf("prefix of %d", k)] = prefix(k)
	}
	tail := make([]bool, total) // real units only in the first file
	for i := perFile - 7; i < total; i++ {
		tail[i] = true
	}
	cases["blank tail after the first file"] = tail
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range []float64{0.001, 0.5, 0.999} {
		b := make([]bool, total)
		for i := range b {
			b[i] = rng.Float64() < p
		}
		cases[fmt.Sprintf("blanks at random, p=%v", p)] = b
	}
	for name, blanks := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := storage.NewFaultFS(1)
			const dir = "/cq/T/0"
			const firstUnit = perFile
			writeQueueFiles(t, fsys, dir, perFile, firstUnit, blanks)
			cq, err := openConsumeQueue(fsys, dir, "T", 0, perFile, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			if cq.MaxOffset() != firstUnit+total {
				t.Fatalf("queue ends at %d, want %d", cq.MaxOffset(), firstUnit+total)
			}
			wantMin, wantMaxPhy := int64(firstUnit+total), int64(0)
			for i, b := range blanks {
				if !b {
					wantMin = min(wantMin, firstUnit+int64(i))
					wantMaxPhy = unitN(firstUnit + int64(i)).end()
				}
			}
			if cq.MinOffset() != wantMin || cq.MaxPhysicOffset() != wantMaxPhy {
				t.Fatalf("recovered min %d, max physical offset %d; want %d, %d", cq.MinOffset(), cq.MaxPhysicOffset(), wantMin, wantMaxPhy)
			}
			naiveFirst := func(lo, hi int64) int64 {
				for ; lo < hi && blanks[lo-firstUnit]; lo++ {
				}
				return lo
			}
			naiveLast := func(lo, hi int64) (int64, bool) {
				for o := hi - 1; o >= lo; o-- {
					if !blanks[o-firstUnit] {
						return o, true
					}
				}
				return 0, false
			}
			ranges := [][2]int64{{firstUnit, firstUnit + total}, {firstUnit + 5, firstUnit + 5}}
			for range 200 {
				lo := firstUnit + rng.Int64N(total+1)
				ranges = append(ranges, [2]int64{lo, lo + rng.Int64N(firstUnit+total-lo+1)})
			}
			for _, r := range ranges {
				got, err := cq.firstNonBlank(r[0], r[1])
				if want := naiveFirst(r[0], r[1]); err != nil || got != want {
					t.Fatalf("first non-blank of [%d, %d) = %d, %v; want %d", r[0], r[1], got, err, want)
				}
				gotLast, gotOK, err := cq.lastNonBlank(r[0], r[1])
				if want, wantOK := naiveLast(r[0], r[1]); err != nil || gotLast != want || gotOK != wantOK {
					t.Fatalf("last non-blank of [%d, %d) = %d %v, %v; want %d %v", r[0], r[1], gotLast, gotOK, err, want, wantOK)
				}
			}
			// The lookup by physical offset over the same blanks: every
			// unit is found by its message's offset, a blank's or an
			// in-between offset is not.
			for range 300 {
				i := rng.Int64N(total)
				phy := unitN(firstUnit + i).PhyOffset
				off, ok, err := cq.OffsetOfPhy(phy)
				if err != nil || ok != !blanks[i] || (ok && off != firstUnit+i) {
					t.Fatalf("offset of physical %d (unit %d, blank %v) = %d %v, %v", phy, firstUnit+i, blanks[i], off, ok, err)
				}
				if _, ok, err := cq.OffsetOfPhy(phy + 1); err != nil || ok {
					t.Fatalf("offset of physical %d, inside a unit, found=%v, %v", phy+1, ok, err)
				}
			}
		})
	}
}
