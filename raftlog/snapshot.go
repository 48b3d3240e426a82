package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Snapshots and positions (rule c of delete.go).
//
// A follower that installs a snapshot must continue its log at exactly the
// leader's position after the snapshot index S. The FSM cannot compute that
// itself: S is Raft's last applied index, which is often a LogNoop or
// configuration entry the FSM never sees. So:
//
//  1. The snapshot store is wrapped (IndexedSnapshotStore) so that the sink
//     handed to FSMSnapshot.Persist reports S (SinkIndex).
//  2. Persist writes SnapshotPosition{S, term of S, end of S's frame}, taken
//     from the leader's own log (LogStore.SnapshotPosition), at the start of
//     the snapshot.
//  3. FSM.Restore reads it back (ReadSnapshotPosition) and calls
//     LogStore.RestoreFrom. That only records the position: Restore also runs
//     at startup (NewRaft restoring the local snapshot), where a log
//     holding entries must be left alone. The position is applied by the
//     next restore-shaped operation: Raft's DeleteRange of everything after
//     InstallSnapshot, or, on an empty log (a fresh follower, whose log Raft
//     does not delete), SettleRestore once the FSM holds the snapshot, or a
//     StoreLogs starting at S+1. Applying it keeps the log if it already
//     holds S with the same term ending at the same position (cutting
//     anything after S), and otherwise resets it with ResetAt(S+1, position).

// SnapshotPosition says where the log continues after a snapshot.
type SnapshotPosition struct {
	// Index and Term are the snapshot's last included entry.
	Index, Term uint64
	// EndPos is the position just after that entry's frame on the leader:
	// where entry Index+1 (or the blank filler before it) goes.
	EndPos int64
}

const (
	snapPosMagic = 0x524C5350 // "RLSP"
	// SnapshotPositionSize is the encoded size of a SnapshotPosition.
	SnapshotPositionSize = 4 + 8 + 8 + 8 + 4
)

// WriteSnapshotPosition writes p (with a magic and CRC) to w.
func WriteSnapshotPosition(w io.Writer, p SnapshotPosition) error {
	b := make([]byte, SnapshotPositionSize)
	be := binary.BigEndian
	be.PutUint32(b[0:], snapPosMagic)
	be.PutUint64(b[4:], p.Index)
	be.PutUint64(b[12:], p.Term)
	be.PutUint64(b[20:], uint64(p.EndPos))
	be.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	_, err := w.Write(b)
	return err
}

// ReadSnapshotPosition reads what WriteSnapshotPosition wrote.
func ReadSnapshotPosition(r io.Reader) (SnapshotPosition, error) {
	var b [SnapshotPositionSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return SnapshotPosition{}, fmt.Errorf("raftlog: read snapshot position: %w", err)
	}
	be := binary.BigEndian
	if be.Uint32(b[0:]) != snapPosMagic || be.Uint32(b[28:]) != crc32.Checksum(b[:28], castagnoli) {
		return SnapshotPosition{}, fmt.Errorf("%w: snapshot does not start with a valid log position record", ErrCorruptFrame)
	}
	p := SnapshotPosition{Index: be.Uint64(b[4:]), Term: be.Uint64(b[12:]), EndPos: int64(be.Uint64(b[20:]))}
	if p.Index == 0 || p.EndPos < 0 {
		return p, fmt.Errorf("%w: snapshot position %+v", ErrCorruptFrame, p)
	}
	return p, nil
}

// IndexedSnapshotStore wraps a raft.SnapshotStore so that its sinks report
// the snapshot's index and term (SinkIndex), which FSMSnapshot.Persist needs
// to record the log position.
type IndexedSnapshotStore struct {
	raft.SnapshotStore
}

// Create creates a sink of the wrapped store that remembers index and term.
func (s IndexedSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &indexedSink{SnapshotSink: sink, index: index, term: term}, nil
}

type indexedSink struct {
	raft.SnapshotSink
	index, term uint64
}

// SinkIndex returns the index and term of the snapshot a sink of an
// IndexedSnapshotStore is writing; ok is false for other sinks.
func SinkIndex(sink raft.SnapshotSink) (index, term uint64, ok bool) {
	if s, is := sink.(*indexedSink); is {
		return s.index, s.term, true
	}
	return 0, 0, false
}

// SnapshotPosition returns the position record for a snapshot at index,
// which must be present in the log.
func (s *LogStore) SnapshotPosition(index uint64) (SnapshotPosition, error) {
	pos, h, err := s.Locate(index)
	if err != nil {
		return SnapshotPosition{}, fmt.Errorf("raftlog: snapshot position of index %d: %w", index, err)
	}
	return SnapshotPosition{Index: index, Term: h.Term, EndPos: pos + int64(h.Size)}, nil
}

// WritePositionFor writes the position record of the snapshot sink is
// writing; FSMSnapshot.Persist calls it first. It first makes the log
// durable through its end: with Options.Sync that is a batch WriteLogs left
// unsynced (a leader applies entries two followers made durable before its
// own sync returns), without it a checkpoint. Either way the snapshot
// survives a power loss, and a member restoring it at startup needs its
// log to reach the snapshot's entry: else its queues are cut back to the
// shorter log and restarted empty at the snapshot's offsets, and the
// first append after the snapshot resets the whole log, to be fetched
// again from a peer.
func (s *LogStore) WritePositionFor(sink raft.SnapshotSink) error {
	index, _, ok := SinkIndex(sink)
	if !ok {
		return fmt.Errorf("%w: snapshot sink %T does not report its index; wrap the snapshot store in IndexedSnapshotStore", ErrInvalidConfig, sink)
	}
	p, err := s.SnapshotPosition(index)
	if err != nil {
		return err
	}
	if s.opts.Sync {
		err = s.SyncLogs(index)
	} else {
		err = s.Checkpoint()
	}
	if err != nil {
		return fmt.Errorf("raftlog: make the log durable through snapshot index %d: %w", index, err)
	}
	return WriteSnapshotPosition(sink, p)
}

// RestoreFrom records where the log must continue after the snapshot the
// FSM is restoring; see the steps at the top of this file. It does no I/O.
func (s *LogStore) RestoreFrom(p SnapshotPosition) error {
	if p.Index == 0 || p.EndPos < 0 {
		return fmt.Errorf("%w: RestoreFrom(%+v)", ErrInvalidConfig, p)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.pending = &p
	return nil
}

// SettleRestore, called once the FSM holds the snapshot RestoreFrom
// recorded, applies that position at once to a log holding no entries:
// Raft never deletes an empty log, so a fresh follower would otherwise
// reset (and record what it lacks before the snapshot) only at its first
// StoreLogs, which an idle group may not send for a long time. A log
// with entries keeps the position pending for DeleteRange or StoreLogs.
func (s *LogStore) SettleRestore() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	empty := s.emptyLocked()
	s.mu.RUnlock()
	p := s.pending
	if p == nil || !empty {
		return nil
	}
	if err := s.writableLocked(); err != nil {
		return err
	}
	s.pending = nil
	return s.ensureContinuityLocked(*p)
}

// ensureContinuityLocked makes the log continue after p: keep it (cutting
// entries after p.Index) if it holds p.Index with p.Term ending at p.EndPos,
// else reset it to start at p.Index+1, p.EndPos.
func (s *LogStore) ensureContinuityLocked(p SnapshotPosition) error {
	s.mu.RLock()
	first, tail, empty := s.first, s.tail, s.emptyLocked()
	has := !empty && p.Index >= first && p.Index <= tail
	var pos int64
	var h FrameHeader
	var err error
	if has {
		pos, h, err = s.locateLocked(p.Index)
	}
	s.mu.RUnlock()
	if has && err == nil && h.Term == p.Term && pos+int64(h.Size) == p.EndPos {
		if tail > p.Index {
			return s.truncateSuffixLocked(p.Index + 1)
		}
		return nil
	}
	if empty && s.nextPos == p.EndPos && s.nextIndex == p.Index+1 {
		return nil
	}
	s.log.Info("raftlog: log does not continue the restored snapshot; resetting",
		zap.Uint64("snapshotIndex", p.Index), zap.Uint64("snapshotTerm", p.Term), zap.Int64("nextPos", p.EndPos))
	return s.resetLocked(p.Index+1, p.EndPos)
}
