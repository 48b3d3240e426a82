package raftlog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// crashModel is what a run of appends, suffix truncations, resets,
// checkpoints and retention promised: the term each index was last stored
// with (entries are raftlogtest.Entry(index, term); indexes a reset
// skipped have the term the leader's log had there), the terms an
// operation that did not return may have left, and the range that must be
// present.
type crashModel struct {
	terms   map[uint64]uint64   // index → term of the acknowledged entry
	maybe   map[uint64][]uint64 // index → terms an unfinished operation may have left
	first   uint64              // lowest first index recovery may report (0: any)
	firstHi uint64              // highest first index recovery may report (0: any)
	last    uint64              // last index present as the store reported it (0: empty)
	next    uint64              // index the next append starts at
	nextAlt uint64              // the other one after a reset that did not return (0: none)
	need    uint64              // last index that must survive (0: none)
	term    uint64              // term of the next append
}

func (m *crashModel) allowed(i, term uint64) bool {
	return m.terms[i] == term || slices.Contains(m.maybe[i], term)
}

// TestRandomCrashKeepsAcknowledgedEntries kills the store (only synced
// bytes and directory entries survive, unsynced ones possibly torn) at a
// random file-system operation during random appends, conflict
// truncations, snapshot resets, checkpoints, retention and batches failed
// by a transient EIO then recovered in place, again and again, and checks
// after every reopen: the open succeeds, every acknowledged entry not
// truncated or reset since is there with its bytes, nothing present is an
// entry no operation stored at its index, and positions are those of a
// log written cleanly with the same entries.
func TestRandomCrashKeepsAcknowledgedEntries(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runCrashModel(t, seed) })
	}
}

func runCrashModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	f := storage.NewFaultFS(seed)
	o := testOptions(f)
	o.SegmentSize = 8 << 10
	o.CheckpointBytes = int64(2<<10 + rng.IntN(12<<10))
	o.MaxBatchEntries = 8
	var ops, crashAt int
	failNext := storage.FaultOp(-1) // the next op of this kind fails once with EIO
	arm := func(fs *storage.FaultFS) {
		ops, crashAt = 0, 1+rng.IntN(150)
		fs.SetCleanAfterFailedSync(true)
		fs.SetFaultFunc(func(op storage.FaultOp, _ string) error {
			ops++
			if ops >= crashAt {
				return unix.EIO
			}
			if op == failNext {
				failNext = -1
				return unix.EIO
			}
			return nil
		})
	}
	s := mustOpen(t, "/log", o)
	arm(f)
	m := &crashModel{terms: map[uint64]uint64{}, maybe: map[uint64][]uint64{}, term: 1, next: 1}
	var history []string
	for step := 0; step < 80; step++ {
		var err error
		switch op := rng.IntN(20); {
		case op < 11:
			n := 1 + uint64(rng.IntN(8))
			from := m.next
			history = append(history, fmt.Sprintf("append %d..%d term %d", from, from+n-1, m.term))
			err = s.StoreLogs(raftlogtest.Entries(from, from+n-1, m.term))
			for i := from; i < from+n; i++ {
				if err == nil {
					m.terms[i] = m.term
					delete(m.maybe, i)
				} else {
					m.maybe[i] = append(m.maybe[i], m.term)
				}
			}
			if err == nil {
				if m.last == 0 {
					m.first, m.firstHi = from, from
				}
				m.last, m.need, m.next = from+n-1, from+n-1, from+n
			}
		case op < 12:
			// A sync fails once: the batch is refused and cut back, and
			// the store goes on after Recover.
			n := 1 + uint64(rng.IntN(8))
			from := m.next
			history = append(history, fmt.Sprintf("append %d..%d term %d, its sync failing", from, from+n-1, m.term))
			failNext = storage.OpMsync
			if err = s.StoreLogs(raftlogtest.Entries(from, from+n-1, m.term)); err == nil {
				t.Fatalf("seed %d: StoreLogs with a failing sync returned nil", seed)
			}
			failNext = -1
			for i := from; i < from+n; i++ {
				m.maybe[i] = append(m.maybe[i], m.term)
			}
			err = s.Recover()
		case op < 15:
			if m.last == 0 || m.last <= m.firstHi {
				continue
			}
			lo := m.firstHi + 1
			cut := lo + uint64(rng.IntN(int(m.last-lo+1)))
			history = append(history, fmt.Sprintf("truncate %d..%d", cut, m.last))
			err = s.DeleteRange(cut, m.last)
			if err == nil {
				for i := cut; i <= m.last; i++ {
					delete(m.terms, i)
					delete(m.maybe, i)
				}
				m.last, m.next = cut-1, cut
			}
			m.need = min(m.need, cut-1)
			m.term++ // a new leader's entries replace the cut ones
		case op < 16:
			// InstallSnapshot of a leader whose log runs a few entries
			// past ours: the log restarts after the snapshot entry, at
			// the leader's position.
			snap := m.next - 1 + uint64(rng.IntN(6))
			if snap == 0 {
				continue
			}
			for i := m.next; i <= snap; i++ {
				m.terms[i] = m.term
			}
			pos := cleanEnd(t, m, snap, o.SegmentSize)
			history = append(history, fmt.Sprintf("reset after %d at %d", snap, pos))
			err = s.ResetAt(snap+1, pos)
			if err == nil {
				m.first, m.firstHi, m.last, m.need, m.next = 0, 0, 0, 0, snap+1
			} else {
				m.first, m.firstHi, m.need, m.nextAlt = 0, 0, 0, snap+1
			}
		case op < 18:
			history = append(history, "checkpoint")
			err = s.Checkpoint()
		default:
			if m.last == 0 {
				continue
			}
			idx := m.first + uint64(rng.IntN(int(m.last-m.first+1)))
			history = append(history, fmt.Sprintf("retention before %d", idx))
			var nf uint64
			nf, err = s.DeleteSegmentsBefore(idx)
			if err == nil && nf != 0 {
				m.first, m.firstHi = nf, nf
			} else if err != nil {
				m.firstHi = max(m.firstHi, idx)
			}
		}
		if ops < crashAt && err == nil {
			continue
		}
		if ops < crashAt {
			t.Fatalf("seed %d step %d: %v without a crash (history %q)", seed, step, err, history)
		}
		// The process dies here.
		opts := storage.CrashOptions{Tear: rng.IntN(3) == 0, TearPages: rng.IntN(3) == 0}
		f = f.Crash(opts)
		s.Close()
		history = append(history, fmt.Sprintf("crash %+v", opts))
		o.FS = f
		arm(f)
		crashAt = 1 << 30 // recovery itself runs to the end
		var oerr error
		if s, oerr = Open("/log", o); oerr != nil {
			t.Fatalf("seed %d: reopen after crash: %v (history %q)", seed, oerr, history)
		}
		checkCrashModel(t, s, m, o.SegmentSize, history)
		arm(f)
	}
	s.Close()
}

// cleanEnd returns where the frame of index ends in a log of the model's
// entries 1..index written cleanly.
func cleanEnd(t *testing.T, m *crashModel, index uint64, segSize int) int64 {
	t.Helper()
	ref := mustOpen(t, "/ref", Options{FS: storage.NewFaultFS(1), SegmentSize: segSize, IndexFileSize: 512})
	defer ref.Close()
	for i := uint64(1); i <= index; i++ {
		term, ok := m.terms[i]
		if !ok {
			t.Fatalf("no term known for index %d", i)
		}
		if err := ref.StoreLogs([]*raft.Log{raftlogtest.Entry(i, term)}); err != nil {
			t.Fatal(err)
		}
	}
	return ref.NextPosition()
}

// checkCrashModel checks the reopened store against m and then makes m
// describe exactly what the store holds.
func checkCrashModel(t *testing.T, s *LogStore, m *crashModel, segSize int, history []string) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+" (history %q)", append(args, history)...)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	s.wmu.Lock()
	next := s.nextIndex
	s.wmu.Unlock()
	if next == 0 {
		next = 1 // a fresh log: Raft starts it at 1 (or resets it for a snapshot)
	}
	if last < m.need {
		fail("last index %d after crash, acknowledged up to %d", last, m.need)
	}
	if m.need > 0 && (first < m.first || first > max(m.firstHi, m.first)) {
		fail("first index %d after crash, want within [%d, %d]", first, m.first, m.firstHi)
	}
	if last == 0 && next != m.next && next != m.nextAlt {
		fail("empty log continues at %d, want %d or %d", next, m.next, m.nextAlt)
	}
	for i := first; i <= last && first > 0; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			fail("GetLog(%d) of [%d, %d]: %v", i, first, last, err)
		}
		if !m.allowed(i, l.Term) {
			fail("index %d has term %d; stored: %d, maybe %v", i, l.Term, m.terms[i], m.maybe[i])
		}
		if err := raftlogtest.Equal(&l, raftlogtest.Entry(i, l.Term)); err != nil {
			fail("index %d: %v", i, err)
		}
		m.terms[i] = l.Term
		m.term = max(m.term, l.Term)
	}
	for i := max(last, next-1) + 1; m.terms[i] != 0 || len(m.maybe[i]) > 0; i++ {
		delete(m.terms, i)
		delete(m.maybe, i)
	}
	clear(m.maybe)
	m.first, m.firstHi, m.last, m.need, m.next, m.nextAlt = first, first, last, last, next, 0
	m.term++
	// Positions are those of a clean log of the same entries.
	if last == 0 {
		return
	}
	for _, i := range []uint64{first, last} {
		pos, h, err := s.Locate(i)
		if err != nil {
			fail("Locate(%d): %v", i, err)
		}
		if want := cleanEnd(t, m, i, segSize); pos+int64(h.Size) != want {
			fail("index %d ends at %d, in a clean log at %d", i, pos+int64(h.Size), want)
		}
	}
}
