package broker

import (
	"encoding/binary"
	"maps"
	"slices"
)

// The replicated part of transactions (see txn.go for the protocol). Every
// replica applies CmdTxnEnd and CmdTxnCheck entries in log order to the
// txnTable below, so every replica agrees on which halves are decided: a
// commit whose half is already decided is skipped by the FSM on every
// replica alike, whatever the leader believed when it proposed it.

// txnCheck is a CmdTxnCheck entry: one round of the leader's check walk.
type txnCheck struct {
	// FloorQueue is the half-queue offset the next walk starts from.
	FloorQueue int64
	// FloorPhy is a CommitLog offset below which every half is decided or
	// discarded: the walk has passed them for good.
	FloorPhy int64
	// Checked lists the halves (CommitLog offsets) checked back this round.
	Checked []int64
	// Discarded lists the halves given up after transactionCheckMax checks.
	Discarded []int64
}

func encodeTxnCheck(c *txnCheck) []byte {
	b := binary.AppendVarint(nil, c.FloorQueue)
	b = binary.AppendVarint(b, c.FloorPhy)
	for _, list := range [][]int64{c.Checked, c.Discarded} {
		b = binary.AppendUvarint(b, uint64(len(list)))
		for _, h := range list {
			b = binary.AppendVarint(b, h)
		}
	}
	return b
}

func decodeTxnCheck(data []byte) (*txnCheck, error) {
	r := reader{b: data}
	c := &txnCheck{FloorQueue: r.varint(), FloorPhy: r.varint()}
	for _, list := range []*[]int64{&c.Checked, &c.Discarded} {
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			*list = append(*list, r.varint())
		}
	}
	return c, r.done()
}

// txnTable is the replicated transaction state, guarded by state.mu.
//
// Its memory is bounded by the check walk: decided and checks only hold
// halves at or above floorPhy, and the walk moves the floor past every
// half that is decided or discarded, stopping at the first undecided one.
// An undecided half is discarded after transactionCheckMax check rounds,
// so the tables hold at most the halves stored during transactionTimeOut
// + transactionCheckMax × transactionCheckInterval (about 15 minutes by
// default) plus the undecided ones; halves removed by retention move the
// floor too (the walk starts at the queue's minimum offset). discarded
// holds at most maxTxnDiscardsKept (+1/8 before a prune) entries.
type txnTable struct {
	decided map[int64]int64 // half CommitLog offset → log time decided (commit, rollback or discard)
	checks  map[int64]int32 // half CommitLog offset → check-backs sent, undecided halves only
	// discarded: halves given up after transactionCheckMax check-backs →
	// log time. Kept past the floor, so a late commit of one is refused
	// rather than acknowledged; at most maxTxnDiscardsKept, the lowest
	// offsets (the oldest halves) dropped first.
	discarded map[int64]int64
	// rolledBack: halves rolled back by END_TRANSACTION → log time, kept
	// past the floor and bounded as discarded is, so a later commit of
	// one is refused rather than acknowledged.
	rolledBack map[int64]int64
	floorQueue int64
	floorPhy   int64
}

// maxTxnDiscardsKept bounds txnTable.discarded and txnTable.rolledBack
// (16 bytes an entry each).
const maxTxnDiscardsKept = 1 << 16

func newTxnTable() *txnTable {
	return &txnTable{decided: map[int64]int64{}, checks: map[int64]int32{}, discarded: map[int64]int64{}, rolledBack: map[int64]int64{}}
}

// isDiscarded reports whether the half at CommitLog offset half was
// discarded (as far as the table still remembers).
func (t *txnTable) isDiscarded(half int64) bool {
	_, ok := t.discarded[half]
	return ok
}

func (t *txnTable) discard(half, nowMs int64) {
	keepRecent(t.discarded, half, nowMs)
}

// isRolledBack reports whether the half at CommitLog offset half was
// rolled back (as far as the table still remembers).
func (t *txnTable) isRolledBack(half int64) bool {
	_, ok := t.rolledBack[half]
	return ok
}

// rollBack records a rollback of an undecided half (decide marks it
// decided).
func (t *txnTable) rollBack(half, nowMs int64) {
	keepRecent(t.rolledBack, half, nowMs)
}

// keepRecent adds half to m, dropping the lowest offsets (the oldest
// halves) once m holds more than maxTxnDiscardsKept + 1/8.
func keepRecent(m map[int64]int64, half, nowMs int64) {
	m[half] = nowMs
	if len(m) <= maxTxnDiscardsKept+maxTxnDiscardsKept/8 {
		return
	}
	keys := slices.Sorted(maps.Keys(m))
	for _, h := range keys[:len(keys)-maxTxnDiscardsKept] {
		delete(m, h)
	}
}

// isDecided reports whether the half at CommitLog offset half was
// committed, rolled back or discarded.
func (t *txnTable) isDecided(half int64) bool {
	if half < t.floorPhy {
		return true
	}
	_, ok := t.decided[half]
	return ok
}

func (t *txnTable) decide(half, nowMs int64) {
	if half < t.floorPhy {
		return
	}
	t.decided[half] = nowMs
	delete(t.checks, half)
}

func (t *txnTable) applyCheck(c *txnCheck, nowMs int64) {
	for _, h := range c.Checked {
		if !t.isDecided(h) {
			t.checks[h]++
		}
	}
	for _, h := range c.Discarded {
		// A commit or rollback applied after the leader's walk wins.
		if !t.isDecided(h) {
			t.discard(h, nowMs)
		}
		t.decide(h, nowMs)
	}
	t.floorQueue = max(t.floorQueue, c.FloorQueue)
	if c.FloorPhy > t.floorPhy {
		t.floorPhy = c.FloorPhy
		for h := range t.decided {
			if h < t.floorPhy {
				delete(t.decided, h)
			}
		}
		for h := range t.checks {
			if h < t.floorPhy {
				delete(t.checks, h)
			}
		}
	}
}

// txnImage is the table in a snapshot (stateImage.Txn, omitted while the
// table is empty so images of brokers that never saw a transaction keep
// their bytes).
type txnImage struct {
	Decided    map[int64]int64 `json:"decided,omitempty"`
	Checks     map[int64]int32 `json:"checks,omitempty"`
	FloorQueue int64           `json:"floorQueue"`
	FloorPhy   int64           `json:"floorPhy"`
	Discarded  map[int64]int64 `json:"discarded,omitempty"`
	RolledBack map[int64]int64 `json:"rolledBack,omitempty"`
}

func (t *txnTable) image() *txnImage {
	if len(t.decided) == 0 && len(t.checks) == 0 && len(t.discarded) == 0 && len(t.rolledBack) == 0 && t.floorQueue == 0 && t.floorPhy == 0 {
		return nil
	}
	img := &txnImage{Decided: maps.Clone(t.decided), Checks: maps.Clone(t.checks), FloorQueue: t.floorQueue, FloorPhy: t.floorPhy}
	if len(t.discarded) > 0 {
		img.Discarded = maps.Clone(t.discarded)
	}
	if len(t.rolledBack) > 0 {
		img.RolledBack = maps.Clone(t.rolledBack)
	}
	return img
}

func (t *txnTable) load(img *txnImage) {
	*t = *newTxnTable()
	if img == nil {
		return
	}
	maps.Copy(t.decided, img.Decided)
	maps.Copy(t.checks, img.Checks)
	maps.Copy(t.discarded, img.Discarded)
	maps.Copy(t.rolledBack, img.RolledBack)
	t.floorQueue, t.floorPhy = img.FloorQueue, img.FloorPhy
}

// txnView is what the leader's transaction code reads of the table.
type txnView struct {
	FloorQueue, FloorPhy int64
}

// txnDecided reports whether a half is decided (isDecided under the lock).
func (s *state) txnDecided(half int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.txn.isDecided(half)
}

// txnDiscarded reports whether a half was discarded (isDiscarded under
// the lock).
func (s *state) txnDiscarded(half int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.txn.isDiscarded(half)
}

// txnRolledBack reports whether a half was rolled back (isRolledBack
// under the lock).
func (s *state) txnRolledBack(half int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.txn.isRolledBack(half)
}

// txnChecks is how many check-backs a half had.
func (s *state) txnChecks(half int64) int32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.txn.checks[half]
}

// txnFloor is the check walk's replicated progress.
func (s *state) txnFloor() txnView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return txnView{FloorQueue: s.txn.floorQueue, FloorPhy: s.txn.floorPhy}
}

// txnSizes is the table's entry counts (metrics).
func (s *state) txnSizes() (decided, checking int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.txn.decided), len(s.txn.checks)
}
