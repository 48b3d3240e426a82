package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

func term1(i uint64) *raft.Log { return raftlogtest.Entry(i, 1) }

func storeAll(t testing.TB, s *LogStore, logs []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs(%d..): %v", logs[0].Index, err)
	}
}

// layout returns every present entry's position and frame bytes.
func layout(t testing.TB, s *LogStore) map[uint64][]byte {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	out := map[uint64][]byte{}
	for i := first; i <= last && first > 0; i++ {
		pos, frame, err := s.ReadFrame(i)
		if err != nil {
			t.Fatalf("ReadFrame(%d): %v", i, err)
		}
		out[i] = append(binary.BigEndian.AppendUint64(nil, uint64(pos)), frame...)
	}
	return out
}

func sameLayout(t testing.TB, a, b *LogStore) {
	t.Helper()
	la, lb := layout(t, a), layout(t, b)
	if len(la) != len(lb) {
		t.Fatalf("%d entries vs %d", len(la), len(lb))
	}
	for i, fa := range la {
		if !bytes.Equal(fa, lb[i]) {
			t.Fatalf("index %d: position/frame differ: %x… vs %x…", i, fa[:16], lb[i][:16])
		}
	}
	if a.NextPosition() != b.NextPosition() {
		t.Fatalf("next position %d vs %d", a.NextPosition(), b.NextPosition())
	}
}

// TestDeterministicLayout: the same log, written in different batch shapes,
// with follower-style suffix truncations on one side, occupies the same
// positions with the same bytes (blank fillers included). This is what keeps
// physical offsets and msgIds identical across replicas.
func TestDeterministicLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 20; trial++ {
		a := mustOpen(t, "/a", testOptions(storage.NewFaultFS(1)))
		b := mustOpen(t, "/b", testOptions(storage.NewFaultFS(2)))
		n := uint64(100 + rng.IntN(200))
		// a: one batch at a time of random size, with a conflicting suffix
		// (term 1) that gets truncated and rewritten in term 2.
		cut := 2 + rng.Uint64N(n-2)
		for i := uint64(1); i <= n; {
			j := min(n, i+rng.Uint64N(20))
			storeAll(t, a, raftlogtest.Entries(i, j, 1))
			i = j + 1
		}
		if err := a.DeleteRange(cut, n); err != nil {
			t.Fatal(err)
		}
		final := func(i uint64) *raft.Log {
			if i >= cut {
				return raftlogtest.Entry(i, 2)
			}
			return raftlogtest.Entry(i, 1)
		}
		for i := cut; i <= n+10; i++ {
			storeAll(t, a, []*raft.Log{final(i)})
		}
		// b: the final log in one batch.
		var all []*raft.Log
		for i := uint64(1); i <= n+10; i++ {
			all = append(all, final(i))
		}
		storeAll(t, b, all)
		sameLayout(t, a, b)
		raftlogtest.CheckRange(t, a, 1, n+10, final)
		a.Close()
		b.Close()
	}
}

// TestSegmentsEndInBlank walks the raw segment files with ScanEntry: every
// segment but the last ends in a blank filler, frames never span segments.
func TestSegmentsEndInBlank(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, testOptions(storage.OSFS()))
	storeAll(t, s, raftlogtest.Entries(1, 400, 1))
	s.Close()
	names, _ := filepath.Glob(filepath.Join(dir, segmentDirName, "*"))
	if len(names) < 4 {
		t.Fatalf("want several segments, got %d", len(names))
	}
	next := uint64(1)
	for k, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p, blank := 0, false
		for p < len(b) {
			kind, h, n, err := ScanEntry(b[p:])
			if errors.Is(err, ErrEndOfData) {
				break
			}
			if err != nil {
				t.Fatalf("%s at %d: %v", name, p, err)
			}
			if kind == KindBlank {
				blank = true
				break
			}
			if h.Index != next {
				t.Fatalf("index %d, want %d", h.Index, next)
			}
			next++
			p += n
		}
		if !blank && k != len(names)-1 {
			t.Fatalf("segment %s does not end in a blank filler", name)
		}
	}
	if next != 401 {
		t.Fatalf("scanned up to %d", next-1)
	}
}

// TestTornTailTruncated: without Sync, a crash tears the unsynced tail at a
// random byte or page; reopening keeps a valid prefix, drops the rest, and
// accepts the next index at a position a fresh replica would use too.
func TestTornTailTruncated(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		f := storage.NewFaultFS(seed)
		o := testOptions(f)
		o.Sync = false
		s := mustOpen(t, "/log", o)
		storeAll(t, s, raftlogtest.Entries(1, 60, 1))
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		storeAll(t, s, raftlogtest.Entries(61, 120, 1))
		f = f.Crash(storage.CrashOptions{Tear: seed%2 == 0, TearPages: seed%2 == 1})
		s.Close()
		o.FS = f
		s = mustOpen(t, "/log", o)
		last, _ := s.LastIndex()
		if last < 60 || last > 120 {
			t.Fatalf("seed %d: last %d after crash; the checkpointed 60 must survive", seed, last)
		}
		raftlogtest.CheckRange(t, s, 1, last, term1)
		storeAll(t, s, raftlogtest.Entries(last+1, 130, 1))
		ref := mustOpen(t, "/ref", testOptions(storage.NewFaultFS(99)))
		storeAll(t, ref, raftlogtest.Entries(1, 130, 1))
		sameLayout(t, s, ref)
		s.Close()
		ref.Close()
	}
}

// TestSyncFailureStopsWrites: an msync error fails StoreLogs with
// ErrStoreFailed, later writes are refused, reads keep working, and after a
// crash every acknowledged entry is there.
func TestSyncFailureStopsWrites(t *testing.T) {
	f := storage.NewFaultFS(5)
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 30, 1))
	f.InjectError(storage.OpMsync, unix.EIO)
	if err := s.StoreLogs(raftlogtest.Entries(31, 40, 1)); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("StoreLogs with EIO: %v", err)
	}
	if err := s.StoreLogs(raftlogtest.Entries(31, 31, 1)); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("StoreLogs after failure: %v", err)
	}
	raftlogtest.CheckRange(t, s, 1, 30, term1)
	f = f.Crash(storage.CrashOptions{TearPages: true})
	s.Close()
	o.FS = f
	s = mustOpen(t, "/log", o)
	defer s.Close()
	// Pages of the failed batch may have reached the disk anyway: a valid
	// prefix of it may be present (Raft treats it as an unacknowledged,
	// truncatable suffix), but never a torn entry.
	last, _ := s.LastIndex()
	if last < 30 || last > 40 {
		t.Fatalf("last %d after crash", last)
	}
	raftlogtest.CheckRange(t, s, 1, last, term1)
	storeAll(t, s, raftlogtest.Entries(last+1, 40, 1))
	raftlogtest.CheckRange(t, s, 1, 40, term1)
}

// TestCheckpointBoundsRecovery: a clean Close leaves nothing to rescan; a
// crash rescans at most what was appended after the last checkpoint.
func TestCheckpointBoundsRecovery(t *testing.T) {
	f := storage.NewFaultFS(3)
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 500, 1))
	s.Close()
	s = mustOpen(t, "/log", o)
	if r := s.Recovery(); r.Frames != 0 || r.StopErr != nil {
		t.Fatalf("after clean close: %+v", r)
	}
	for i := uint64(501); i <= 1000; i += 10 {
		storeAll(t, s, raftlogtest.Entries(i, i+9, 1))
	}
	f = f.Crash(storage.CrashOptions{})
	s.Close()
	o.FS = f
	s = mustOpen(t, "/log", o)
	defer s.Close()
	r := s.Recovery()
	if r.Frames == 0 || int64(r.End-r.ScanFrom) > o.CheckpointBytes+int64(o.SegmentSize) {
		t.Fatalf("rescanned %d frames over %d bytes; checkpoint every %d", r.Frames, r.End-r.ScanFrom, o.CheckpointBytes)
	}
	raftlogtest.CheckRange(t, s, 1, 1000, term1)
}

// TestRetention: DeleteSegmentsBefore removes whole segments only, moves
// FirstIndex to the first entry left, survives reopen and crash, and Raft's
// own prefix DeleteRange never removes bytes.
func TestRetention(t *testing.T) {
	f := storage.NewFaultFS(4)
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 600, 1))
	segs := len(s.segQ.Files())
	if err := s.DeleteRange(1, 300); err != nil {
		t.Fatal(err)
	}
	if len(s.segQ.Files()) != segs {
		t.Fatal("Raft's prefix DeleteRange removed segments")
	}
	raftlogtest.CheckRange(t, s, 301, 600, term1)
	pos, _, err := s.Locate(450)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.DeleteSegmentsBefore(450)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.FirstIndexFrom(s.MinPosition()); err != nil || got != first {
		t.Fatalf("FirstIndexFrom(min position) = %d, %v; want %d", got, err, first)
	}
	if got, _ := s.FirstIndexFrom(pos); got != 450 {
		t.Fatalf("FirstIndexFrom(position of 450) = %d", got)
	}
	if got, _ := s.FirstIndexFrom(pos + 1); got != 451 {
		t.Fatalf("FirstIndexFrom(position of 450 + 1) = %d", got)
	}
	if got, _ := s.FirstIndexFrom(1 << 40); got != 0 {
		t.Fatalf("FirstIndexFrom(past the end) = %d", got)
	}
	if first > 450 || first <= 301 {
		t.Fatalf("first index %d after retention before 450", first)
	}
	fpos, _, err := s.Locate(first)
	if err != nil {
		t.Fatal(err)
	}
	if fpos != s.MinPosition() || s.MinPosition() > pos || s.MinPosition()%int64(o.SegmentSize) != 0 {
		t.Fatalf("first entry at %d, min position %d, 450 at %d", fpos, s.MinPosition(), pos)
	}
	raftlogtest.CheckRange(t, s, first, 600, term1)
	f = f.Crash(storage.CrashOptions{})
	s.Close()
	o.FS = f
	s = mustOpen(t, "/log", o)
	raftlogtest.CheckRange(t, s, first, 600, term1)
	storeAll(t, s, raftlogtest.Entries(601, 610, 1))
	s.Close()
	s = mustOpen(t, "/log", o)
	defer s.Close()
	raftlogtest.CheckRange(t, s, first, 610, term1)
}

// TestPatchCommand: the hook sees the data in the mapping and its physical
// position; the patched bytes are what the file holds and what the CRC
// covers, and storing the entry GetLog returns again (a follower fed by the
// leader: patched bytes from the file, or the unpatched entry from the
// recent-entries cache) gives the same frame.
func TestPatchCommand(t *testing.T) {
	patch := func(l *raft.Log, data []byte, dataPos int64) error {
		if len(data) >= 8 {
			binary.BigEndian.PutUint64(data, uint64(dataPos))
		}
		return nil
	}
	for _, cache := range []int{-1, 1 << 20} {
		o := testOptions(storage.NewFaultFS(1))
		o.PatchCommand = patch
		o.CacheBytes = cache
		leader := mustOpen(t, "/leader", o)
		storeAll(t, leader, raftlogtest.Entries(1, 200, 1))
		o.FS = storage.NewFaultFS(2)
		follower := mustOpen(t, "/follower", o)
		for i := uint64(1); i <= 200; i++ {
			var l raft.Log
			if err := leader.GetLog(i, &l); err != nil {
				t.Fatal(err)
			}
			pos, h, err := leader.Locate(i)
			if err != nil {
				t.Fatal(err)
			}
			_, frame, err := leader.ReadFrame(i)
			if err != nil {
				t.Fatal(err)
			}
			if l.Type == raft.LogCommand && len(l.Data) >= 8 {
				if got := int64(binary.BigEndian.Uint64(frame[h.DataOffset():])); got != pos+int64(h.DataOffset()) {
					t.Fatalf("cache %d, index %d: patched position %d, frame at %d data offset %d", cache, i, got, pos, h.DataOffset())
				}
				if cache < 0 && !bytes.Equal(l.Data, frame[h.DataOffset():h.DataOffset()+len(l.Data)]) {
					t.Fatalf("index %d: GetLog from the file differs from the stored frame", i)
				}
			} else if err := raftlogtest.Equal(&l, term1(i)); err != nil {
				t.Fatalf("non-command entry changed: %v", err)
			}
			storeAll(t, follower, []*raft.Log{&l})
		}
		sameLayout(t, leader, follower)
		leader.Close()
		follower.Close()
	}
}

func TestRefusals(t *testing.T) {
	o := testOptions(storage.NewFaultFS(1))
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 5, 1))
	if err := s.StoreLogs(raftlogtest.Entries(7, 8, 1)); !errors.Is(err, ErrIndexGap) {
		t.Fatalf("gap: %v", err)
	}
	if err := s.StoreLogs([]*raft.Log{term1(6), term1(8)}); !errors.Is(err, ErrIndexGap) {
		t.Fatalf("gap inside batch: %v", err)
	}
	big := &raft.Log{Index: 6, Term: 1, Data: make([]byte, o.SegmentSize)}
	if err := s.StoreLogs([]*raft.Log{big}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if err := s.DeleteRange(2, 3); !errors.Is(err, ErrBadRange) {
		t.Fatalf("middle range: %v", err)
	}
	raftlogtest.CheckRange(t, s, 1, 5, term1)
	storeAll(t, s, raftlogtest.Entries(6, 6, 1))
	if !s.IsMonotonic() {
		t.Fatal("not monotonic")
	}
	s.Close()
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetLog after Close: %v", err)
	}
	o.SegmentSize *= 2
	if _, err := Open("/log", o); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("reopen with another segment size: %v", err)
	}
}

// TestResetPositions: after ResetAt the next entry lands exactly at the
// given position, also across a crash between the reset and the next write.
func TestResetPositions(t *testing.T) {
	f := storage.NewFaultFS(8)
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 100, 1))
	const nextPos = 5*16<<10 + 777
	if err := s.ResetAt(1001, nextPos); err != nil {
		t.Fatal(err)
	}
	f = f.Crash(storage.CrashOptions{})
	s.Close()
	o.FS = f
	s = mustOpen(t, "/log", o)
	defer s.Close()
	raftlogtest.CheckRange(t, s, 0, 0, nil)
	if err := s.StoreLogs(raftlogtest.Entries(1000, 1000, 1)); !errors.Is(err, ErrIndexGap) {
		t.Fatalf("wrong index after reset: %v", err)
	}
	storeAll(t, s, raftlogtest.Entries(1001, 1100, 2))
	pos, _, err := s.Locate(1001)
	if err != nil || pos != nextPos {
		t.Fatalf("first entry after reset at %d (%v), want %d", pos, err, nextPos)
	}
	end, err := s.EndOf(1100)
	if err != nil || end != s.NextPosition() {
		t.Fatalf("EndOf(1100) = %d, %v; next %d", end, err, s.NextPosition())
	}
	if s.MinPosition() != nextPos-nextPos%int64(o.SegmentSize) {
		t.Fatalf("old segments left: min position %d", s.MinPosition())
	}
}

// TestCrashAtEverySegmentRoll crashes after every single-entry StoreLogs,
// so some crashes come right after a batch that began with a blank filler
// in the previous segment: the filler must be durable too, or recovery
// would stop at its zeros and drop the acknowledged entries after it.
func TestCrashAtEverySegmentRoll(t *testing.T) {
	f := storage.NewFaultFS(11)
	o := testOptions(f)
	o.CheckpointBytes = 1 << 40 // recovery must scan across the rolls
	s := mustOpen(t, "/log", o)
	for i := uint64(1); i <= 150; i++ {
		storeAll(t, s, raftlogtest.Entries(i, i, 1))
		f = f.Crash(storage.CrashOptions{Tear: true})
		s.Close()
		o.FS = f
		s = mustOpen(t, "/log", o)
		if last, _ := s.LastIndex(); last != i {
			t.Fatalf("after storing %d and crashing: last %d", i, last)
		}
	}
	defer s.Close()
	if len(s.segQ.Files()) < 3 {
		t.Fatalf("only %d segments: no rolls tested", len(s.segQ.Files()))
	}
	raftlogtest.CheckRange(t, s, 1, 150, term1)
}

// TestRestoreFrom covers the snapshot-restore paths of rule (c) without
// Raft: InstallSnapshot over a matching log, over a conflicting one, on a
// fresh follower, and a startup restore that must leave the log alone.
func TestRestoreFrom(t *testing.T) {
	open := func(seed uint64) *LogStore {
		return mustOpen(t, "/log", testOptions(storage.NewFaultFS(seed)))
	}
	roundTrip := func(p SnapshotPosition) SnapshotPosition {
		var buf bytes.Buffer
		if err := WriteSnapshotPosition(&buf, p); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSnapshotPosition(&buf)
		if err != nil || got != p {
			t.Fatalf("position round trip: %+v, %v", got, err)
		}
		return got
	}
	t.Run("MatchingLogKept", func(t *testing.T) {
		s := open(1)
		defer s.Close()
		storeAll(t, s, raftlogtest.Entries(1, 50, 1))
		p, err := s.SnapshotPosition(30)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RestoreFrom(roundTrip(p)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRange(1, 50); err != nil { // Raft's removeOldLogs
			t.Fatal(err)
		}
		raftlogtest.CheckRange(t, s, 0, 0, nil)
		storeAll(t, s, raftlogtest.Entries(31, 31, 2))
		if pos, _, _ := s.Locate(31); pos != p.EndPos {
			t.Fatalf("31 at %d, want %d", pos, p.EndPos)
		}
		if s.MinPosition() != 0 {
			t.Fatal("matching log was reset (segments removed)")
		}
	})
	t.Run("ConflictingLogReset", func(t *testing.T) {
		s := open(2)
		defer s.Close()
		storeAll(t, s, raftlogtest.Entries(1, 50, 1))
		end, _ := s.EndOf(40)
		if err := s.RestoreFrom(SnapshotPosition{Index: 40, Term: 9, EndPos: end + 100}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRange(1, 50); err != nil {
			t.Fatal(err)
		}
		storeAll(t, s, raftlogtest.Entries(41, 45, 9))
		if pos, _, _ := s.Locate(41); pos != end+100 {
			t.Fatalf("41 at %d, want %d", pos, end+100)
		}
		raftlogtest.CheckRange(t, s, 41, 45, func(i uint64) *raft.Log { return raftlogtest.Entry(i, 9) })
	})
	t.Run("FreshFollower", func(t *testing.T) {
		s := open(3)
		defer s.Close()
		// Raft does not DeleteRange an empty log: the first StoreLogs applies it.
		if err := s.RestoreFrom(SnapshotPosition{Index: 500, Term: 3, EndPos: 70_000}); err != nil {
			t.Fatal(err)
		}
		storeAll(t, s, raftlogtest.Entries(501, 510, 3))
		if pos, _, _ := s.Locate(501); pos != 70_000 {
			t.Fatalf("501 at %d", pos)
		}
	})
	t.Run("FreshFollowerSettled", func(t *testing.T) {
		s := open(5)
		defer s.Close()
		// Settled once the FSM restored: the reset and its backfill record
		// come before any entry arrives.
		if err := s.RestoreFrom(SnapshotPosition{Index: 500, Term: 3, EndPos: 70_000}); err != nil {
			t.Fatal(err)
		}
		if err := s.SettleRestore(); err != nil {
			t.Fatal(err)
		}
		if st, _, ok := s.Backfill(); !ok || st.NextIndex != 501 || st.NextPos != 70_000 {
			t.Fatalf("backfill after settling: %+v %v", st, ok)
		}
		storeAll(t, s, raftlogtest.Entries(501, 510, 3))
		if pos, _, _ := s.Locate(501); pos != 70_000 {
			t.Fatalf("501 at %d", pos)
		}
	})
	t.Run("SettleLeavesLogWithEntries", func(t *testing.T) {
		s := open(6)
		defer s.Close()
		storeAll(t, s, raftlogtest.Entries(1, 50, 1))
		p, _ := s.SnapshotPosition(30)
		if err := s.RestoreFrom(p); err != nil {
			t.Fatal(err)
		}
		if err := s.SettleRestore(); err != nil {
			t.Fatal(err)
		}
		storeAll(t, s, raftlogtest.Entries(51, 60, 1))
		raftlogtest.CheckRange(t, s, 1, 60, term1)
		if s.BackfillPending() {
			t.Fatal("a log with entries recorded a backfill")
		}
	})
	t.Run("StartupRestoreLeavesLog", func(t *testing.T) {
		s := open(4)
		defer s.Close()
		storeAll(t, s, raftlogtest.Entries(1, 50, 1))
		p, _ := s.SnapshotPosition(30)
		if err := s.RestoreFrom(p); err != nil {
			t.Fatal(err)
		}
		storeAll(t, s, raftlogtest.Entries(51, 60, 1))
		raftlogtest.CheckRange(t, s, 1, 60, term1)
	})
	t.Run("BadRecord", func(t *testing.T) {
		b := make([]byte, SnapshotPositionSize)
		if _, err := ReadSnapshotPosition(bytes.NewReader(b)); !errors.Is(err, ErrCorruptFrame) {
			t.Fatalf("zeros: %v", err)
		}
		if _, err := ReadSnapshotPosition(bytes.NewReader(b[:5])); err == nil {
			t.Fatal("short record accepted")
		}
	})
}

// TestOpenOnQueue: the log over a queue someone else owns (the CommitLog
// facade in Raft mode) works, survives reopen, and Close leaves the queue open.
func TestOpenOnQueue(t *testing.T) {
	f := storage.NewFaultFS(1)
	q, err := storage.OpenMappedFileQueue(f, "/store/commitlog", 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(f)
	o.SegmentSize = 0 // taken from the queue
	s, err := OpenOnQueue(q, "/store/raft", o)
	if err != nil {
		t.Fatal(err)
	}
	storeAll(t, s, raftlogtest.Entries(1, 100, 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if q.Last() == nil || q.Last().IsClosed() {
		t.Fatal("Close closed the shared queue")
	}
	s, err = OpenOnQueue(q, "/store/raft", o)
	if err != nil {
		t.Fatal(err)
	}
	raftlogtest.CheckRange(t, s, 1, 100, term1)
	s.Close()
	q.Close()
	o.SegmentSize = 32 << 10
	q2, _ := storage.OpenMappedFileQueue(f, "/store/commitlog", 16<<10)
	defer q2.Close()
	if _, err := OpenOnQueue(q2, "/store/raft", o); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("mismatched sizes: %v", err)
	}
}

// TestLocateHeaderFromTheCache: for an entry still in the recent-entries
// cache LocateHeader answers from memory what the file holds (segment rolls
// with blanks, a truncated and rewritten tail, entries evicted from the
// cache), and it does not read the file: with the header of a cached entry
// damaged on disk, Locate reports it and LocateHeader still answers.
func TestLocateHeaderFromTheCache(t *testing.T) {
	o := testOptions(storage.NewFaultFS(1))
	o.CacheBytes = 24 << 10
	s := mustOpen(t, "/lhc", o)
	defer s.Close()
	for from := uint64(1); from <= 200; from += 25 {
		storeAll(t, s, raftlogtest.Entries(from, from+24, 1))
	}
	if err := s.DeleteRange(181, 200); err != nil {
		t.Fatal(err)
	}
	storeAll(t, s, raftlogtest.Entries(181, 230, 2))
	cached := 0
	for i := uint64(1); i <= 230; i++ {
		p1, h1, err1 := s.Locate(i)
		p2, h2, err2 := s.LocateHeader(i)
		if err1 != nil || err2 != nil || p1 != p2 || h1 != h2 {
			t.Fatalf("index %d: Locate %d %+v %v, LocateHeader %d %+v %v", i, p1, h1, err1, p2, h2, err2)
		}
		if _, _, ok := s.recent.locate(i); ok {
			cached++
		}
	}
	if cached == 0 || cached == 230 {
		t.Fatalf("%d of 230 entries cached: the test needs some evicted and some cached", cached)
	}
	pos, h, _ := s.Locate(230)
	mf := s.segQ.FindByOffset(pos)
	at := int(pos-mf.FileFromOffset()) + offMagic
	if err := mf.WriteAt([]byte{^mf.Bytes()[at]}, at); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Locate(230); !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("Locate of a damaged header: %v", err)
	}
	if p, hh, err := s.LocateHeader(230); err != nil || p != pos || hh != h {
		t.Fatalf("LocateHeader of a cached entry: %d %+v %v, want %d %+v", p, hh, err, pos, h)
	}
}

// TestLocateHeader: LocateHeader finds the same position and header as
// Locate, but checks the header only: with a data byte flipped on disk,
// Locate and GetLog (cache off) report the corruption and LocateHeader
// still answers (the FSM reads data only through GetLog).
func TestLocateHeader(t *testing.T) {
	o := testOptions(storage.NewFaultFS(1))
	o.CacheBytes = -1
	s := mustOpen(t, "/lh", o)
	defer s.Close()
	storeAll(t, s, raftlogtest.Entries(1, 30, 1))
	for i := uint64(1); i <= 30; i++ {
		p1, h1, err1 := s.Locate(i)
		p2, h2, err2 := s.LocateHeader(i)
		if err1 != nil || err2 != nil || p1 != p2 || h1 != h2 {
			t.Fatalf("index %d: Locate %d %+v %v, LocateHeader %d %+v %v", i, p1, h1, err1, p2, h2, err2)
		}
	}
	if _, _, err := s.LocateHeader(31); err != raft.ErrLogNotFound {
		t.Fatalf("LocateHeader past the end: %v", err)
	}
	const idx = 12 // an entry with data (12%11 != 0)
	pos, h, _ := s.Locate(idx)
	mf := s.segQ.FindByOffset(pos)
	at := int(pos-mf.FileFromOffset()) + h.DataOffset()
	if err := mf.WriteAt([]byte{^mf.Bytes()[at]}, at); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Locate(idx); !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("Locate of a corrupted frame: %v", err)
	}
	var l raft.Log
	if err := s.GetLog(idx, &l); !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("GetLog of a corrupted frame: %v", err)
	}
	if p, hh, err := s.LocateHeader(idx); err != nil || p != pos || hh != h {
		t.Fatalf("LocateHeader of a frame with corrupted data: %d %+v %v", p, hh, err)
	}
}

// TestLargeBatchKeepsPendingBufferSmall: a follower's AppendEntries can
// carry megabytes of frames. Held whole in the segment's pending buffer,
// each such batch regrew that buffer (about five times its own size in
// fresh allocations); written out in chunks, the buffer is recycled.
func TestLargeBatchKeepsPendingBufferSmall(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "log"), Options{SegmentSize: 64 << 20, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 64<<10)
	next := uint64(1)
	batch := func() []*raft.Log {
		logs := make([]*raft.Log, 64)
		for i := range logs {
			logs[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data}
			next++
		}
		return logs
	}
	if err := s.StoreLogs(batch()); err != nil { // the segment's buffers grow once
		t.Fatal(err)
	}
	logs := batch()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("storing a 4 MiB batch allocated %d bytes; want the pending buffer recycled (under 1 MiB)", got)
	}
	for _, l := range []*raft.Log{logs[0], logs[31], logs[63]} {
		var got raft.Log
		if err := s.GetLog(l.Index, &got); err != nil || got.Index != l.Index || !bytes.Equal(got.Data, data) {
			t.Fatalf("GetLog(%d) = index %d, %d bytes, %v", l.Index, got.Index, len(got.Data), err)
		}
	}
}

// TestSnapshotPositionMakesAsyncLogDurable: without Sync, writing a
// snapshot's position record makes the log durable through the snapshot's
// entry first. The snapshot outlives a power loss, and a member restoring
// it at startup trusts its own log and queues to reach that entry: a log
// ending before it would have the queues cut back below the snapshot's
// offsets and then restarted empty there.
func TestSnapshotPositionMakesAsyncLogDurable(t *testing.T) {
	f := storage.NewFaultFS(3)
	o := testOptions(f)
	o.Sync = false
	o.CheckpointBytes = 1 << 40
	s := mustOpen(t, "/log", o)
	storeAll(t, s, raftlogtest.Entries(1, 40, 1))
	writeSnapshotPosition(t, s, 40)
	f = f.Crash(storage.CrashOptions{})
	s.Close()
	o.FS = f
	s = mustOpen(t, "/log", o)
	defer s.Close()
	if last, _ := s.LastIndex(); last < 40 {
		t.Fatalf("last index %d after a power loss; the snapshot at 40 was written", last)
	}
	raftlogtest.CheckRange(t, s, 1, 40, term1)
}

// writeSnapshotPosition writes s's position record of a snapshot at index
// (term 1) into an in-memory snapshot store, as FSMSnapshot.Persist does.
func writeSnapshotPosition(t *testing.T, s *LogStore, index uint64) {
	t.Helper()
	snaps := IndexedSnapshotStore{SnapshotStore: raft.NewInmemSnapshotStore()}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WritePositionFor(sink); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}
