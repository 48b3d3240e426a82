// Package raftlogtest holds the raft.LogStore contract suite: one set of
// behaviours every LogStore raftmq uses must have, run against
// raft.NewInmemStore() (which proves the suite itself is right) and against
// raftlog.LogStore on real files and on a crashing FaultFS. It lives in a
// non-test package so the broker can run it over the CommitLog-backed store
// once the two are joined (style.md rule 2).
package raftlogtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Harness is one LogStore under test plus the optional powers the suite
// uses when the implementation has them.
type Harness struct {
	// Store is a fresh, empty store.
	Store raft.LogStore
	// Reopen closes the current store cleanly and opens it again on the same
	// files. Nil for in-memory stores.
	Reopen func(t *testing.T) raft.LogStore
	// Crash simulates a machine crash (only fsynced state survives) and
	// returns the store reopened on what is left. Nil if unsupported.
	Crash func(t *testing.T) raft.LogStore
	// Reset makes the store empty and ready to take nextIndex next, as the
	// FSM does after InstallSnapshot (raftlog: ResetAt; InmemStore:
	// DeleteRange of everything, its gaps are allowed).
	Reset func(t *testing.T, nextIndex uint64)
	// Close releases the store at the end (may be nil).
	Close func(t *testing.T)
}

// Factory returns a harness around a fresh store; it is called once per
// sub-test.
type Factory func(t *testing.T) *Harness

// Run runs every behaviour of the contract as a sub-test.
func Run(t *testing.T, newHarness Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h *Harness)
	}{
		{"Empty", testEmpty},
		{"StoreGet", testStoreGet},
		{"Batch", testBatch},
		{"MissingIsErrLogNotFound", testMissing},
		{"DeleteSuffix", testDeleteSuffix},
		{"DeletePrefix", testDeletePrefix},
		{"ReopenPersists", testReopen},
		{"MonotonicReset", testReset},
		{"ConcurrentGetDuringStore", testConcurrent},
		{"CrashKeepsStored", testCrash},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if h.Close != nil {
				t.Cleanup(func() { h.Close(t) })
			}
			c.fn(t, h)
		})
	}
}

// Entry builds a deterministic test entry: data and extensions sizes vary
// with the index (including empty), the type cycles through the kinds Raft
// writes, and AppendedAt is zero for a few entries like BootstrapCluster's.
func Entry(index, term uint64) *raft.Log {
	r := rand.New(rand.NewPCG(index, term))
	l := &raft.Log{Index: index, Term: term, Type: raft.LogCommand}
	switch index % 7 {
	case 0:
		l.Type = raft.LogNoop
	case 3:
		l.Type = raft.LogConfiguration
	case 5:
		l.Type = raft.LogBarrier
	}
	if n := r.IntN(600); index%11 != 0 {
		l.Data = make([]byte, n+1)
		for i := range l.Data {
			l.Data[i] = byte(r.Uint32())
		}
	}
	if index%4 == 1 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", index))
	}
	if index%9 != 0 {
		l.AppendedAt = time.Unix(1_700_000_000, int64(index)*1_000_003).UTC()
	}
	return l
}

// Entries returns Entry(i, term) for i in [from, to].
func Entries(from, to, term uint64) []*raft.Log {
	out := make([]*raft.Log, 0, to-from+1)
	for i := from; i <= to; i++ {
		out = append(out, Entry(i, term))
	}
	return out
}

// Equal reports whether two entries carry the same fields (nil and empty
// byte slices are the same; times compare with Equal).
func Equal(a, b *raft.Log) error {
	switch {
	case a.Index != b.Index:
		return fmt.Errorf("index %d != %d", a.Index, b.Index)
	case a.Term != b.Term:
		return fmt.Errorf("index %d: term %d != %d", a.Index, a.Term, b.Term)
	case a.Type != b.Type:
		return fmt.Errorf("index %d: type %v != %v", a.Index, a.Type, b.Type)
	case !bytes.Equal(a.Data, b.Data):
		return fmt.Errorf("index %d: data differs (%d vs %d bytes)", a.Index, len(a.Data), len(b.Data))
	case !bytes.Equal(a.Extensions, b.Extensions):
		return fmt.Errorf("index %d: extensions differ", a.Index)
	case !a.AppendedAt.Equal(b.AppendedAt):
		return fmt.Errorf("index %d: appendedAt %v != %v", a.Index, a.AppendedAt, b.AppendedAt)
	}
	return nil
}

// CheckRange fails t unless s holds exactly [first, last] (0, 0 = empty) and
// every entry equals want(index).
func CheckRange(t testing.TB, s raft.LogStore, first, last uint64, want func(uint64) *raft.Log) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil || f != first {
		t.Fatalf("FirstIndex = %d, %v; want %d", f, err, first)
	}
	l, err := s.LastIndex()
	if err != nil || l != last {
		t.Fatalf("LastIndex = %d, %v; want %d", l, err, last)
	}
	if first == 0 {
		return
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if err := Equal(&got, want(i)); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
	}
	mustNotFound(t, s, first-1)
	mustNotFound(t, s, last+1)
}

// mustNotFound checks that GetLog returns exactly raft.ErrLogNotFound: Raft
// compares with ==, and only that error makes it send a snapshot.
func mustNotFound(t testing.TB, s raft.LogStore, index uint64) {
	t.Helper()
	var l raft.Log
	if err := s.GetLog(index, &l); err != raft.ErrLogNotFound { //nolint:errorlint // identity is the contract
		t.Fatalf("GetLog(%d) = %v, want exactly raft.ErrLogNotFound", index, err)
	}
}

func term1(i uint64) *raft.Log { return Entry(i, 1) }

func mustStore(t testing.TB, s raft.LogStore, logs []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs(%d..%d): %v", logs[0].Index, logs[len(logs)-1].Index, err)
	}
}

func testEmpty(t *testing.T, h *Harness) {
	CheckRange(t, h.Store, 0, 0, nil)
	mustNotFound(t, h.Store, 0)
	mustNotFound(t, h.Store, 1)
	if err := h.Store.DeleteRange(1, 10); err != nil {
		t.Fatalf("DeleteRange on an empty store: %v", err)
	}
}

func testStoreGet(t *testing.T, h *Harness) {
	for i := uint64(1); i <= 12; i++ {
		if err := h.Store.StoreLog(term1(i)); err != nil {
			t.Fatalf("StoreLog(%d): %v", i, err)
		}
	}
	CheckRange(t, h.Store, 1, 12, term1)
}

func testBatch(t *testing.T, h *Harness) {
	mustStore(t, h.Store, Entries(1, 64, 1))
	mustStore(t, h.Store, Entries(65, 300, 1))
	CheckRange(t, h.Store, 1, 300, term1)
}

func testMissing(t *testing.T, h *Harness) {
	mustStore(t, h.Store, Entries(1, 30, 1))
	mustNotFound(t, h.Store, 0)
	mustNotFound(t, h.Store, 31)
	mustNotFound(t, h.Store, 1<<40)
	if err := h.Store.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	mustNotFound(t, h.Store, 10)
	mustNotFound(t, h.Store, 1)
	CheckRange(t, h.Store, 11, 30, term1)
}

func testDeleteSuffix(t *testing.T, h *Harness) {
	mustStore(t, h.Store, Entries(1, 40, 1))
	// A follower learns that [25, 40] conflicts with a new leader's log.
	if err := h.Store.DeleteRange(25, 40); err != nil {
		t.Fatalf("DeleteRange(25, 40): %v", err)
	}
	CheckRange(t, h.Store, 1, 24, term1)
	mustStore(t, h.Store, Entries(25, 50, 2))
	CheckRange(t, h.Store, 1, 50, func(i uint64) *raft.Log {
		if i >= 25 {
			return Entry(i, 2)
		}
		return Entry(i, 1)
	})
	// Truncating everything after the first entry, then growing again.
	if err := h.Store.DeleteRange(2, 50); err != nil {
		t.Fatal(err)
	}
	CheckRange(t, h.Store, 1, 1, term1)
	mustStore(t, h.Store, Entries(2, 5, 3))
	CheckRange(t, h.Store, 1, 5, func(i uint64) *raft.Log {
		if i >= 2 {
			return Entry(i, 3)
		}
		return Entry(i, 1)
	})
}

func testDeletePrefix(t *testing.T, h *Harness) {
	mustStore(t, h.Store, Entries(1, 40, 1))
	if err := h.Store.DeleteRange(1, 15); err != nil {
		t.Fatal(err)
	}
	CheckRange(t, h.Store, 16, 40, term1)
	mustStore(t, h.Store, Entries(41, 45, 1))
	CheckRange(t, h.Store, 16, 45, term1)
	// Everything: the store is empty and takes the next index.
	if err := h.Store.DeleteRange(16, 45); err != nil {
		t.Fatal(err)
	}
	CheckRange(t, h.Store, 0, 0, nil)
	mustStore(t, h.Store, Entries(46, 47, 1))
	CheckRange(t, h.Store, 46, 47, term1)
}

func testReopen(t *testing.T, h *Harness) {
	if h.Reopen == nil {
		t.Skip("in-memory store")
	}
	mustStore(t, h.Store, Entries(1, 100, 1))
	s := h.Reopen(t)
	CheckRange(t, s, 1, 100, term1)
	if err := s.DeleteRange(1, 9); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(91, 100); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t)
	CheckRange(t, s, 10, 90, term1)
	mustStore(t, s, Entries(91, 120, 2))
	s = h.Reopen(t)
	want := func(i uint64) *raft.Log {
		if i > 90 {
			return Entry(i, 2)
		}
		return Entry(i, 1)
	}
	CheckRange(t, s, 10, 120, want)
	mustStore(t, s, Entries(121, 121, 2))
	CheckRange(t, s, 10, 121, want)
}

func testReset(t *testing.T, h *Harness) {
	if h.Reset == nil {
		t.Skip("no reset")
	}
	if m, ok := h.Store.(raft.MonotonicLogStore); ok && !m.IsMonotonic() {
		t.Fatal("store says it is not monotonic")
	}
	mustStore(t, h.Store, Entries(1, 30, 1))
	// InstallSnapshot at index 500: the FSM resets, then Raft deletes
	// everything it still sees (nothing) and stores 501.
	h.Reset(t, 501)
	CheckRange(t, h.Store, 0, 0, nil)
	if err := h.Store.DeleteRange(1, 30); err != nil {
		t.Fatal(err)
	}
	mustNotFound(t, h.Store, 30)
	mustStore(t, h.Store, Entries(501, 520, 4))
	term4 := func(i uint64) *raft.Log { return Entry(i, 4) }
	CheckRange(t, h.Store, 501, 520, term4)
	if h.Reopen != nil {
		s := h.Reopen(t)
		CheckRange(t, s, 501, 520, term4)
		mustStore(t, s, Entries(521, 530, 4))
		CheckRange(t, s, 501, 530, term4)
		// Reset on a store that never stored after the reset survives a reopen.
		h.Reset(t, 1001)
		s = h.Reopen(t)
		CheckRange(t, s, 0, 0, nil)
		mustStore(t, s, Entries(1001, 1001, 5))
		CheckRange(t, s, 1001, 1001, func(i uint64) *raft.Log { return Entry(i, 5) })
	}
}

func testConcurrent(t *testing.T, h *Harness) {
	s := h.Store
	mustStore(t, s, Entries(1, 10, 1))
	const last = 2000
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for !done.Load() {
				hi, err := s.LastIndex()
				if err != nil {
					errs <- err
					return
				}
				i := 1 + rng.Uint64N(hi+5)
				var l raft.Log
				err = s.GetLog(i, &l)
				if i > hi && err == raft.ErrLogNotFound { //nolint:errorlint // identity is the contract
					continue
				}
				if i <= hi && err != nil {
					errs <- fmt.Errorf("GetLog(%d) with last %d: %w", i, hi, err)
					return
				}
				if err == nil {
					if e := Equal(&l, term1(i)); e != nil {
						errs <- e
						return
					}
				}
			}
		}(uint64(r))
	}
	for i := uint64(11); i <= last; i += 16 {
		if err := s.StoreLogs(Entries(i, min(i+15, last), 1)); err != nil {
			errs <- err
			break
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	CheckRange(t, s, 1, last, term1)
}

func testCrash(t *testing.T, h *Harness) {
	if h.Crash == nil {
		t.Skip("no crash simulation")
	}
	mustStore(t, h.Store, Entries(1, 50, 1))
	mustStore(t, h.Store, Entries(51, 51, 1))
	// Every entry whose StoreLogs returned must survive the crash.
	s := h.Crash(t)
	CheckRange(t, s, 1, 51, term1)
	mustStore(t, s, Entries(52, 80, 1))
	if err := s.DeleteRange(70, 80); err != nil {
		t.Fatal(err)
	}
	s = h.Crash(t)
	CheckRange(t, s, 1, 69, term1)
	mustStore(t, s, Entries(70, 75, 2))
	s = h.Crash(t)
	CheckRange(t, s, 1, 75, func(i uint64) *raft.Log {
		if i >= 70 {
			return Entry(i, 2)
		}
		return Entry(i, 1)
	})
}
