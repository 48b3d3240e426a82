package store

// Recovery of a ConsumeQueue whose head is a long run of blank units (a
// catch-up that stopped before its units replaced the blanks it prepended):
//
//	go test -run='^$' -bench=ConsumeQueueRecoverBlankHead -benchtime=20x ./broker/store/
//
// "blank" opens a queue with N blank units before 1,000 real ones; "real"
// (the baseline, same run, same files) opens one whose N head units are
// real. x_real is blank/real: what the blanks add to an open.

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftmq/raftmq/storage"
)

func BenchmarkConsumeQueueRecoverBlankHead(b *testing.B) {
	for _, n := range []int64{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			blankDir := filepath.Join(b.TempDir(), "blank")
			realDir := filepath.Join(b.TempDir(), "real")
			buildBlankHeadQueue(b, blankDir, n, true)
			buildBlankHeadQueue(b, realDir, n, false)
			var blank, real float64
			for range b.N {
				blank += openRecover(b, blankDir, n)
				real += openRecover(b, realDir, 0)
			}
			b.ReportMetric(blank/float64(b.N)/1e6, "blank_ms/open")
			b.ReportMetric(real/float64(b.N)/1e6, "real_ms/open")
			b.ReportMetric(blank/real, "x_real")
		})
	}
}

// buildBlankHeadQueue writes queue T/0 in dir with DefaultConsumeQueueUnits
// per file: units [n, n+1000) and, before them from offset 0, blank units
// (blank) or real ones.
func buildBlankHeadQueue(b *testing.B, dir string, n int64, blank bool) {
	b.Helper()
	s := NewConsumeQueueStore(storage.OSFS(), dir, DefaultConsumeQueueUnits, nil)
	if err := s.Load(); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if blank {
		if err := s.StartQueueAt("T", 0, n); err != nil {
			b.Fatal(err)
		}
	}
	cq, err := s.FindOrCreate("T", 0)
	if err != nil {
		b.Fatal(err)
	}
	from := n
	if !blank {
		from = 0
	}
	for o := from; o < n+1000; o++ {
		if _, _, err := cq.Append(unitN(o)); err != nil {
			b.Fatal(err)
		}
	}
	if blank {
		var u [CQUnitSize]byte
		blankCQUnit.encode(u[:])
		if err := cq.mfq.PrependToFilled(0, u[:]); err != nil {
			b.Fatal(err)
		}
	}
	if err := cq.Flush(); err != nil {
		b.Fatal(err)
	}
}

// openRecover opens the store in dir (its one queue recovers), checks that
// the queue starts at wantMin and returns how long the open took in
// nanoseconds.
func openRecover(b *testing.B, dir string, wantMin int64) float64 {
	b.Helper()
	start := time.Now()
	s := NewConsumeQueueStore(storage.OSFS(), dir, DefaultConsumeQueueUnits, nil)
	if err := s.Load(); err != nil {
		b.Fatal(err)
	}
	d := float64(time.Since(start))
	defer s.Close()
	if cq := s.Get("T", 0); cq.MinOffset() != wantMin {
		b.Fatalf("queue recovered as [%d, %d), want it to start at %d", cq.MinOffset(), cq.MaxOffset(), wantMin)
	}
	return d
}
