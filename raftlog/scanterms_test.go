package raftlog

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// TestOpenKeepsLegitimateTermHistories: Open stops its scan at a frame
// whose term is below the one before it (a leftover of a cut batch), so no
// history Raft can produce may contain such a step. Random histories of
// what Raft does to a follower's log (batches whose term rises with each new
// leader; a conflict truncation followed by a new leader's entries, whose
// term is at least the kept entry's and may be below the truncated ones'; a
// logical prefix deletion; a snapshot reset, after which the log restarts
// further on with any term), with clean reopens and power losses in
// between, must all reopen to exactly what was stored.
func TestOpenKeepsLegitimateTermHistories(t *testing.T) {
	for seed := uint64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x7465726d))
			f := storage.NewFaultFS(seed)
			o := testOptions(f)
			s := mustOpen(t, "/log", o)
			defer func() { s.Close() }()
			stored := map[uint64]*raft.Log{}
			var first, last uint64
			next := uint64(1)                 // index the next batch starts at
			top, term := uint64(1), uint64(1) // highest term seen; term of the next entries
			reopen := func(crash bool) {
				t.Helper()
				if crash {
					f = f.Crash(storage.CrashOptions{TearPages: true})
					o.FS = f
				}
				s.Close()
				s = mustOpen(t, "/log", o)
				raftlogtest.CheckRange(t, s, first, last, func(i uint64) *raft.Log { return stored[i] })
			}
			for step := 0; step < 40; step++ {
				switch k := r.IntN(20); {
				case k < 10: // a batch; sometimes from a new leader
					if r.IntN(4) == 0 {
						top++
						term = top
					}
					n := 1 + uint64(r.IntN(8))
					logs := raftlogtest.Entries(next, next+n-1, term)
					storeAll(t, s, logs)
					for _, l := range logs {
						stored[l.Index] = l
					}
					if first == 0 {
						first = next
					}
					next += n
					last = next - 1
				case k < 13 && first > 0 && last > first: // conflict truncation
					min := first + 1 + uint64(r.IntN(int(last-first)))
					if err := s.DeleteRange(min, last); err != nil {
						t.Fatalf("DeleteRange(%d, %d): %v", min, last, err)
					}
					for i := min; i <= last; i++ {
						delete(stored, i)
					}
					last, next = min-1, min
					top++
					kept := stored[min-1].Term
					term = kept + uint64(r.IntN(int(top-kept+1)))
				case k == 13 && first > 0 && last > first: // prefix compaction
					upTo := first + uint64(r.IntN(int(last-first)))
					if err := s.DeleteRange(first, upTo); err != nil {
						t.Fatalf("DeleteRange(%d, %d): %v", first, upTo, err)
					}
					for i := first; i <= upTo; i++ {
						delete(stored, i)
					}
					first = upTo + 1
				case k == 14: // snapshot reset
					next += uint64(r.IntN(10))
					if err := s.ResetAt(next, s.NextPosition()+r.Int64N(20000)); err != nil {
						t.Fatalf("ResetAt(%d): %v", next, err)
					}
					clear(stored)
					first, last = 0, 0
					top++
					term = 1 + uint64(r.IntN(int(top)))
				case k < 17:
					reopen(false)
				default:
					reopen(true)
				}
			}
			reopen(true)
		})
	}
}
