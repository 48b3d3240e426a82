package raftlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/storage"
)

// The leader-side split of StoreLogs (raft.ParallelLogStore): WriteLogs
// leaves its last window unsynced, SyncLogs makes it durable, and every
// other writer makes it durable first, so at most one batch is exposed to
// a power loss and nothing that vouches for the log (a synced StoreLogs,
// a truncation record, a checkpoint anchor, a snapshot) rests on it.

var _ raft.ParallelLogStore = (*LogStore)(nil)

// powerLoss is one way to cut the power: clean loses every unsynced byte;
// the seeded ones keep a random part of them (a prefix cut at a byte, or
// pages out of order), as an interrupted write-back does.
type powerLoss struct {
	name string
	seed uint64
	opts storage.CrashOptions
}

// clean reports whether the crash loses every unsynced byte, so the
// outcome is exact.
func (p powerLoss) clean() bool { return !p.opts.Tear && !p.opts.TearPages }

func powerLosses() []powerLoss {
	out := []powerLoss{{name: "clean", seed: 50}}
	for seed := uint64(51); seed <= 54; seed++ {
		out = append(out,
			powerLoss{fmt.Sprintf("tear-%d", seed), seed, storage.CrashOptions{Tear: true}},
			powerLoss{fmt.Sprintf("pages-%d", seed), seed, storage.CrashOptions{TearPages: true}})
	}
	return out
}

// crashReopen cuts the power under s (running on f) and reopens the log
// in /log from what reached the disk.
func crashReopen(t *testing.T, f *storage.FaultFS, s *LogStore, o Options, opts storage.CrashOptions) (*storage.FaultFS, *LogStore) {
	t.Helper()
	f = f.Crash(opts)
	s.Close() // the old FS is dead: this only drops the mappings
	o.FS = f
	return f, mustOpen(t, "/log", o)
}

func writeAll(t testing.TB, s *LogStore, logs []*raft.Log) {
	t.Helper()
	if err := s.WriteLogs(logs); err != nil {
		t.Fatalf("WriteLogs(%d..): %v", logs[0].Index, err)
	}
}

func syncTo(t testing.TB, s *LogStore, index uint64) {
	t.Helper()
	if err := s.SyncLogs(index); err != nil {
		t.Fatalf("SyncLogs(%d): %v", index, err)
	}
}

// checkTornBatch checks the log after a power loss that hit the unsynced
// batch lo..hi stored after 1..lo-1 (sameSize entries of term 1): a clean
// loss ends the log at lo-1; a torn one may keep a prefix of the batch,
// never anything else of it. It returns the last index.
func checkTornBatch(t *testing.T, s *LogStore, pl powerLoss, lo, hi uint64) uint64 {
	t.Helper()
	last, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if pl.clean() && last != lo-1 {
		t.Fatalf("last index %d after a clean power loss, want %d: the unsynced batch %d..%d reached the disk", last, lo-1, lo, hi)
	}
	if last < lo-1 || last > hi {
		t.Fatalf("last index %d after the power loss, want %d..%d", last, lo-1, hi)
	}
	checkTerms(t, s, last, last+1, 1)
	return last
}

// checkTakesNext stores sameSize entries of term 2 at next..next+4 and
// checks that they, after the term-1 entries before next, survive a clean
// power loss: the log recovered to next-1 is clean.
func checkTakesNext(t *testing.T, f *storage.FaultFS, s *LogStore, o Options, next uint64) *LogStore {
	t.Helper()
	storeAll(t, s, sameSizeRange(next, next+4, 2))
	_, s = crashReopen(t, f, s, o, storage.CrashOptions{})
	checkTerms(t, s, next+4, next, 2)
	return s
}

// sameFramesAs fails unless s holds exactly the entries of want (from
// layout) at the same positions with the same frame bytes.
func sameFramesAs(t *testing.T, s *LogStore, want map[uint64][]byte) {
	t.Helper()
	got := layout(t, s)
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i, w := range want {
		if string(got[i]) != string(w) {
			t.Fatalf("index %d: position or frame bytes changed", i)
		}
	}
}

// countSegmentSyncs installs a fault hook that counts the msyncs and
// fsyncs of segment files and fails none.
func countSegmentSyncs(f *storage.FaultFS) *atomic.Int32 {
	var n atomic.Int32
	f.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if (op == storage.OpMsync || op == storage.OpSync) && strings.Contains(name, segmentDirName) {
			n.Add(1)
		}
		return nil
	})
	return &n
}

// parallelOptions are testOptions without periodic checkpoints: a
// checkpoint makes the log durable through its end, which would hide
// whether the rule under test did.
func parallelOptions(fsys storage.FS) Options {
	o := testOptions(fsys)
	o.CheckpointBytes = 1 << 40
	return o
}

// TestWriteLogsDurableOnlyAfterSyncLogs: a power loss after WriteLogs
// and before SyncLogs loses the batch (what a torn write-back kept of it
// is a clean prefix) and the log takes the next entries where it ends;
// after SyncLogs the batch survives with the same bytes at the same
// positions.
func TestWriteLogsDurableOnlyAfterSyncLogs(t *testing.T) {
	for _, pl := range powerLosses() {
		t.Run("unsynced-"+pl.name, func(t *testing.T) {
			f, s, o := unsyncedBatchStore(t, pl.seed)
			f, s = crashReopen(t, f, s, o, pl.opts)
			last := checkTornBatch(t, s, pl, 31, 40)
			s = checkTakesNext(t, f, s, o, last+1)
			s.Close()
		})
		t.Run("synced-"+pl.name, func(t *testing.T) {
			f, s, o := unsyncedBatchStore(t, pl.seed)
			syncTo(t, s, 40)
			before := layout(t, s)
			_, s = crashReopen(t, f, s, o, pl.opts)
			defer s.Close()
			checkTerms(t, s, 40, 41, 1)
			sameFramesAs(t, s, before)
		})
	}
}

// TestWriteLogsReadableBeforeSyncLogs: WriteLogs publishes its entries
// (LastIndex, GetLog, ReadFrame) without syncing any segment; SyncLogs
// does the sync. With the cache off GetLog reads the segment, so the
// frames must be in the file, not only in the segment's write buffer.
func TestWriteLogsReadableBeforeSyncLogs(t *testing.T) {
	for _, cache := range []bool{true, false} {
		t.Run(map[bool]string{true: "cache", false: "no-cache"}[cache], func(t *testing.T) {
			f := storage.NewFaultFS(55)
			o := parallelOptions(f)
			if !cache {
				o.CacheBytes = -1
			}
			s := mustOpen(t, "/log", o)
			defer s.Close()
			storeAll(t, s, sameSizeRange(1, 10, 1))
			syncs := countSegmentSyncs(f)
			writeAll(t, s, sameSizeRange(11, 20, 1))
			if n := syncs.Load(); n != 0 {
				t.Fatalf("WriteLogs synced segments %d times; it must leave the sync to SyncLogs", n)
			}
			checkTerms(t, s, 20, 21, 1)
			for i := uint64(11); i <= 20; i++ {
				if _, frame, err := s.ReadFrame(i); err != nil || len(frame) != EncodedSize(sameSize(i, 1)) {
					t.Fatalf("ReadFrame(%d) before SyncLogs: %d bytes, %v", i, len(frame), err)
				}
			}
			syncTo(t, s, 20)
			if syncs.Load() == 0 {
				t.Fatal("SyncLogs synced no segment")
			}
			checkTerms(t, s, 20, 21, 1)
		})
	}
}

// TestSecondWriteLogsSyncsFirst: a WriteLogs that finds the previous
// batch still unsynced makes it durable before writing, so a power loss
// exposes only the latest batch.
func TestSecondWriteLogsSyncsFirst(t *testing.T) {
	for _, pl := range powerLosses() {
		t.Run(pl.name, func(t *testing.T) {
			f, s, o := unsyncedBatchStore(t, pl.seed)
			writeAll(t, s, sameSizeRange(41, 50, 1))
			f, s = crashReopen(t, f, s, o, pl.opts)
			last := checkTornBatch(t, s, pl, 41, 50)
			s = checkTakesNext(t, f, s, o, last+1)
			s.Close()
		})
	}
}

// The batch the writer tests leave unsynced: 1..60 fill most of the first
// 16 KiB segment (sameSize frames are 248 bytes, 66 to a segment), so
// 61..72 run into the second one. A writer whose own sync covers only the
// segment it writes in would leave 61..66 unsynced in the first.
const (
	wBase  = 60
	wFirst = 61
	wLast  = 72
)

// startSpanningBatch opens a log on a FaultFS of seed, stores 1..wBase and
// writes wFirst..wLast with WriteLogs, checking that the batch spans two
// segments.
func startSpanningBatch(t *testing.T, seed uint64, o Options) (*storage.FaultFS, *LogStore, Options) {
	t.Helper()
	f := storage.NewFaultFS(seed)
	o.FS = f
	s := mustOpen(t, "/log", o)
	storeAll(t, s, sameSizeRange(1, wBase, 1))
	writeAll(t, s, sameSizeRange(wFirst, wLast, 1))
	seg := func(i uint64) int64 {
		pos, _, err := s.Locate(i)
		if err != nil {
			t.Fatalf("Locate(%d): %v", i, err)
		}
		return pos / int64(o.SegmentSize)
	}
	if seg(wFirst) == seg(wLast) {
		t.Fatalf("the batch %d..%d lies in one segment; it must span two", wFirst, wLast)
	}
	return f, s, o
}

// TestWritersSyncUnsyncedBatch: every writer other than WriteLogs makes
// the batch WriteLogs left unsynced durable before it acts (and, for the
// ones that vouch for the log, before it answers): a power loss right
// after it finds the log exactly as the call left it.
func TestWritersSyncUnsyncedBatch(t *testing.T) {
	for _, pl := range powerLosses() {
		t.Run("StoreLogs-"+pl.name, func(t *testing.T) {
			// The StoreLogs batch goes to the second segment only; its
			// answer vouches for 61..66 in the first one too.
			f, s, o := startSpanningBatch(t, pl.seed, parallelOptions(nil))
			storeAll(t, s, sameSizeRange(wLast+1, wLast+8, 1))
			_, s = crashReopen(t, f, s, o, pl.opts)
			defer s.Close()
			checkTerms(t, s, wLast+8, wLast+9, 1)
		})
		for _, cut := range []struct {
			name string
			from uint64
		}{
			// Keeps 61..69: the truncation syncs its zeros in the second
			// segment, and its record anchors the log at 70.
			{"inside", 70},
			// Cuts the whole batch and entries before it.
			{"before", 50},
		} {
			t.Run("DeleteRange-"+cut.name+"-"+pl.name, func(t *testing.T) {
				f, s, o := startSpanningBatch(t, pl.seed, parallelOptions(nil))
				if err := s.DeleteRange(cut.from, wLast); err != nil {
					t.Fatal(err)
				}
				checkTerms(t, s, cut.from-1, cut.from, 1)
				f, s = crashReopen(t, f, s, o, pl.opts)
				checkTerms(t, s, cut.from-1, cut.from, 1)
				s = checkTakesNext(t, f, s, o, cut.from)
				s.Close()
			})
		}
		for _, w := range []struct {
			name string
			do   func(*LogStore) error
		}{
			// The anchor moves past the batch; recovery does not rescan it.
			{"Checkpoint", (*LogStore).Checkpoint},
			// A shutdown between WriteLogs and SyncLogs: Close's
			// checkpoint anchors the log past the batch.
			{"Close", (*LogStore).Close},
		} {
			t.Run(w.name+"-"+pl.name, func(t *testing.T) {
				f, s, o := startSpanningBatch(t, pl.seed, parallelOptions(nil))
				if err := w.do(s); err != nil {
					t.Fatal(err)
				}
				_, s = crashReopen(t, f, s, o, pl.opts)
				defer s.Close()
				checkTerms(t, s, wLast, wLast+1, 1)
			})
		}
		t.Run("periodic-checkpoint-"+pl.name, func(t *testing.T) {
			// The WriteLogs batch 61..80 crosses CheckpointBytes, yet stays
			// unsynced: a WriteLogs checkpoints before its write (a sync
			// after it could fail unreported). The next WriteLogs syncs it,
			// then checkpoints, then leaves 81..85 unsynced.
			f := storage.NewFaultFS(pl.seed)
			o := testOptions(f)
			o.CheckpointBytes = 4 << 10 // 1..60 checkpoint once; 61..80 (4960 bytes) once more
			s := mustOpen(t, "/log", o)
			storeAll(t, s, sameSizeRange(1, 60, 1))
			writeAll(t, s, sameSizeRange(61, 80, 1))
			if meta := s.meta; meta.AnchorIndex > 61 {
				t.Fatalf("anchor at index %d after WriteLogs 61..80, want at most 61: the checkpoint synced the batch", meta.AnchorIndex)
			}
			writeAll(t, s, sameSizeRange(81, 85, 1))
			if meta := s.meta; meta.AnchorIndex != 81 {
				t.Fatalf("anchor at index %d after WriteLogs 81..85, want 81", meta.AnchorIndex)
			}
			_, s = crashReopen(t, f, s, o, pl.opts)
			defer s.Close()
			checkTornBatch(t, s, pl, 81, 85)
		})
		t.Run("WritePositionFor-"+pl.name, func(t *testing.T) {
			// A leader may snapshot entries two followers made durable
			// before its own sync returned; the snapshot outlives a power
			// loss, so its entry must too.
			f, s, o := startSpanningBatch(t, pl.seed, parallelOptions(nil))
			writeSnapshotPosition(t, s, wLast)
			_, s = crashReopen(t, f, s, o, pl.opts)
			defer s.Close()
			checkTerms(t, s, wLast, wLast+1, 1)
		})
	}
}

// TestWriteLogsLongBatchSyncsFullWindows: a WriteLogs call longer than
// MaxBatchEntries is made durable window by window like StoreLogs, all but
// its last window: recovery cuts at most one window as a torn batch, so
// more unsynced entries could turn a power loss into damage it refuses.
func TestWriteLogsLongBatchSyncsFullWindows(t *testing.T) {
	// MaxBatchEntries 4; 1..10 stored. 11..24 leaves 23..24 unsynced,
	// 11..26 (a whole number of windows) 23..26.
	for _, hi := range []uint64{24, 26} {
		for _, pl := range powerLosses() {
			t.Run(fmt.Sprintf("11-%d-%s", hi, pl.name), func(t *testing.T) {
				f := storage.NewFaultFS(pl.seed)
				o := parallelOptions(f)
				o.MaxBatchEntries = 4
				s := mustOpen(t, "/log", o)
				storeAll(t, s, sameSizeRange(1, 10, 1))
				writeAll(t, s, sameSizeRange(11, hi, 1))
				f, s = crashReopen(t, f, s, o, pl.opts)
				last := checkTornBatch(t, s, pl, 23, hi)
				s = checkTakesNext(t, f, s, o, last+1)
				s.Close()
			})
		}
	}
}

// failingSyncStore opens a parallel store on a FaultFS that marks pages
// clean after a failed sync (as Linux's write-back does), stores 1..30,
// writes 31..40 with WriteLogs and makes every later msync of a log segment
// fail with EIO until bad is cleared.
func failingSyncStore(t *testing.T, seed uint64) (*storage.FaultFS, *LogStore, Options, *atomic.Bool) {
	t.Helper()
	f, s, o := unsyncedBatchStore(t, seed)
	f.SetCleanAfterFailedSync(true)
	bad := new(atomic.Bool)
	faultWhen(f, storage.OpMsync, segmentDirName, unix.EIO, bad)
	bad.Store(true)
	return f, s, o, bad
}

// faultSegmentsAndMeta replaces f's faults: the log segments' msync fails
// with EIO while segs is set, every meta file operation while meta is.
func faultSegmentsAndMeta(f *storage.FaultFS, segs, meta *atomic.Bool) {
	f.SetFaultFunc(func(op storage.FaultOp, name string) error {
		if segs.Load() && op == storage.OpMsync && strings.Contains(name, segmentDirName) ||
			meta.Load() && strings.Contains(name, metaFileName) {
			return unix.EIO
		}
		return nil
	})
}

// unsyncedBatchStore opens a parallel store on a FaultFS, stores 1..30 and
// writes 31..40 with WriteLogs, left unsynced.
func unsyncedBatchStore(t *testing.T, seed uint64) (*storage.FaultFS, *LogStore, Options) {
	t.Helper()
	f := storage.NewFaultFS(seed)
	o := parallelOptions(f)
	s := mustOpen(t, "/log", o)
	storeAll(t, s, sameSizeRange(1, 30, 1))
	writeAll(t, s, sameSizeRange(31, 40, 1))
	return f, s, o
}

// TestFailedSyncLogsStopsStore: a failed SyncLogs stops the store. Its
// entries were published (and may have been replicated), so the store
// cannot cut them back in place the way Recover cuts a failed StoreLogs
// batch; and a retried sync could not be trusted, since a failed
// write-back marks the pages clean and a later sync skips them. Every
// write and every further SyncLogs is refused, also once the disk answers
// again, and Recover refuses; a reopen after a power loss recovers a clean
// log.
func TestFailedSyncLogsStopsStore(t *testing.T) {
	for _, pl := range powerLosses() {
		t.Run(pl.name, func(t *testing.T) {
			f, s, o, bad := failingSyncStore(t, pl.seed)
			err := s.SyncLogs(40)
			if !errors.Is(err, ErrStoreFailed) || !errors.Is(err, unix.EIO) {
				t.Fatalf("SyncLogs with EIO: %v, want ErrStoreFailed wrapping EIO", err)
			}
			if s.Failure() == nil {
				t.Fatal("Failure() is nil after a failed SyncLogs")
			}
			bad.Store(false)
			if err := s.SyncLogs(40); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("SyncLogs retried after a failed one: %v, want ErrStoreFailed", err)
			}
			if err := s.StoreLogs(sameSizeRange(41, 41, 1)); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("StoreLogs after a failed SyncLogs: %v, want ErrStoreFailed", err)
			}
			if err := s.WriteLogs(sameSizeRange(41, 41, 1)); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("WriteLogs after a failed SyncLogs: %v, want ErrStoreFailed", err)
			}
			if err := s.DeleteRange(25, 30); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("DeleteRange after a failed SyncLogs: %v, want ErrStoreFailed", err)
			}
			if err := s.Checkpoint(); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("Checkpoint after a failed SyncLogs: %v, want ErrStoreFailed", err)
			}
			if err := s.Recover(); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("Recover after a failed SyncLogs: %v, want ErrStoreFailed (a reopen recovers)", err)
			}
			if s.Failure() == nil {
				t.Fatal("Recover cleared the stop")
			}
			f, s = crashReopen(t, f, s, o, pl.opts)
			if s.Failure() != nil {
				t.Fatalf("reopened store stopped: %v", s.Failure())
			}
			last := checkTornBatch(t, s, pl, 31, 40)
			s = checkTakesNext(t, f, s, o, last+1)
			s.Close()
		})
	}
}

// TestWriteLogsWithoutSyncIsAsync: without Options.Sync (ASYNC_FLUSH)
// WriteLogs followed by SyncLogs is StoreLogs: nothing is synced, the same
// bytes land at the same positions, and a power loss may lose the entries
// either way.
func TestWriteLogsWithoutSyncIsAsync(t *testing.T) {
	for _, pl := range powerLosses() {
		t.Run(pl.name, func(t *testing.T) {
			open := func(seed uint64) (*storage.FaultFS, *LogStore, Options) {
				f := storage.NewFaultFS(seed)
				o := parallelOptions(f)
				o.Sync = false
				s := mustOpen(t, "/log", o)
				storeAll(t, s, sameSizeRange(1, 30, 1))
				if err := s.Checkpoint(); err != nil { // 1..30 durable
					t.Fatal(err)
				}
				return f, s, o
			}
			f, s, o := open(pl.seed)
			ref := mustOpen(t, "/ref", Options{FS: storage.NewFaultFS(56), SegmentSize: o.SegmentSize, IndexFileSize: o.IndexFileSize, CheckpointBytes: o.CheckpointBytes})
			defer ref.Close()
			storeAll(t, ref, sameSizeRange(1, 40, 1))
			syncs := countSegmentSyncs(f)
			writeAll(t, s, sameSizeRange(31, 40, 1))
			syncTo(t, s, 40)
			if n := syncs.Load(); n != 0 {
				t.Fatalf("WriteLogs+SyncLogs without Sync synced segments %d times", n)
			}
			sameLayout(t, s, ref)
			f, s = crashReopen(t, f, s, o, pl.opts)
			last := checkTornBatch(t, s, pl, 31, 40)
			s.Close()

			// StoreLogs meets the same power loss the same way.
			f, s, o = open(pl.seed)
			storeAll(t, s, sameSizeRange(31, 40, 1))
			_, s = crashReopen(t, f, s, o, pl.opts)
			defer s.Close()
			if got := checkTornBatch(t, s, pl, 31, 40); got != last {
				t.Fatalf("StoreLogs kept up to %d after the same power loss, WriteLogs+SyncLogs %d", got, last)
			}
		})
	}
}

// TestParallelDispatchDurability drives the store the way Raft's leader
// does (dispatchParallel): WriteLogs in order, each batch's SyncLogs on
// its own goroutine racing the next WriteLogs, readers alongside, periodic
// checkpoints on. Every entry a SyncLogs acknowledged survives a power
// loss right after the last acknowledgement; a batch never acknowledged
// may be lost, torn at an entry boundary.
func TestParallelDispatchDurability(t *testing.T) {
	for _, pl := range powerLosses() {
		t.Run(pl.name, func(t *testing.T) {
			f := storage.NewFaultFS(pl.seed)
			o := testOptions(f)
			s := mustOpen(t, "/log", o)
			rng := rand.New(rand.NewPCG(pl.seed, 7))
			var (
				wg, readers sync.WaitGroup
				acked       atomic.Uint64 // highest index a SyncLogs acknowledged
				done        atomic.Bool
			)
			readers.Add(1)
			go func() {
				defer readers.Done()
				for !done.Load() {
					last, err := s.LastIndex()
					if err != nil || last == 0 {
						continue
					}
					i := 1 + rand.Uint64N(last)
					var l raft.Log
					if err := s.GetLog(i, &l); err != nil || l.Index != i || string(l.Data) != string(sameSize(i, 1).Data) {
						t.Errorf("GetLog(%d) of a written entry: index %d, %v", i, l.Index, err)
						return
					}
				}
			}()
			next := uint64(1)
			for next <= 400 {
				hi := next + rng.Uint64N(12)
				writeAll(t, s, sameSizeRange(next, hi, 1))
				wg.Add(1)
				go func(index uint64) {
					defer wg.Done()
					if err := s.SyncLogs(index); err != nil {
						t.Errorf("SyncLogs(%d): %v", index, err)
						return
					}
					for {
						cur := acked.Load()
						if cur >= index || acked.CompareAndSwap(cur, index) {
							return
						}
					}
				}(hi)
				next = hi + 1
			}
			wg.Wait()
			done.Store(true)
			readers.Wait()
			if acked.Load() != next-1 {
				t.Fatalf("acknowledged through %d, wrote through %d", acked.Load(), next-1)
			}
			// The power fails right after the last SyncLogs returned: the
			// last batch is durable through it alone (a periodic checkpoint
			// runs before a WriteLogs, and no write follows).
			f, s = crashReopen(t, f, s, o, pl.opts)
			if last, err := s.LastIndex(); err != nil || last != next-1 {
				t.Fatalf("last index %d (%v) after a power loss, want %d: an acknowledged entry was lost", last, err, next-1)
			}
			checkTerms(t, s, next-1, next, 1)
			// A last batch, never acknowledged.
			writeAll(t, s, sameSizeRange(next, next+9, 1))
			_, s = crashReopen(t, f, s, o, pl.opts)
			defer s.Close()
			checkTornBatch(t, s, pl, next, next+9)
		})
	}
}

// TestFailedSyncLogsNotServedAfterProcessRestart: the sync of the batch
// WriteLogs left unsynced fails (EIO, the pages marked clean as Linux's
// writeback does), in SyncLogs or in the next WriteLogs that syncs it
// first. The batch stays readable while the process runs (Raft counts it,
// and a leader whose GetLog lost it would send its followers an older
// snapshot), but a process restart (the page cache, which still holds the
// batch, kept) must not serve it: Raft rebuilds its view from the reopened
// log and stores the entries again, and those, acknowledged, must survive a
// power loss that the failed batch, never on the disk, cannot tear. The
// same holds when the meta file cannot record the cut either: Close zeroes
// the batch in the page cache, whether the disk is back by then or the
// segments' msync still fails.
func TestFailedSyncLogsNotServedAfterProcessRestart(t *testing.T) {
	for _, via := range []struct {
		name string
		fail func(s *LogStore) error // syncs 31..40 while the msync fails
	}{
		{"SyncLogs", func(s *LogStore) error { return s.SyncLogs(40) }},
		{"next-WriteLogs", func(s *LogStore) error { return s.WriteLogs(sameSizeRange(41, 50, 1)) }},
	} {
		for _, meta := range []struct {
			name                 string
			metaBad, untilReopen bool
		}{
			{"meta-ok", false, false},
			{"meta-fails-until-Close", true, false},
			{"meta-fails-at-Close", true, true},
		} {
			for _, pl := range powerLosses() {
				t.Run(via.name+"-"+meta.name+"-"+pl.name, func(t *testing.T) {
					failedSyncRestart(t, via.fail, meta.metaBad, meta.untilReopen, pl)
				})
			}
		}
	}
}

// failedSyncRestart is one case of TestFailedSyncLogsNotServedAfterProcessRestart:
// metaBad makes every meta file operation fail from the failed sync on,
// untilReopen keeps that fault, and the segments' msync one, through Close.
func failedSyncRestart(t *testing.T, fail func(s *LogStore) error, metaBad, untilReopen bool, pl powerLoss) {
	f, s, o, bad := failingSyncStore(t, pl.seed)
	badMeta := new(atomic.Bool)
	faultSegmentsAndMeta(f, bad, badMeta)
	badMeta.Store(metaBad)
	if err := fail(s); !errors.Is(err, ErrStoreFailed) || !errors.Is(err, unix.EIO) {
		t.Fatalf("sync of 31..40 with EIO on the segment's msync: %v, want ErrStoreFailed wrapping EIO", err)
	}
	// Non-fatal: the restart below is the point of the test.
	if last, _ := s.LastIndex(); last != 40 {
		t.Errorf("last index %d after the failed sync, want 40: Raft still counts the batch", last)
	}
	var l raft.Log
	if err := s.GetLog(40, &l); err != nil || l.Index != 40 {
		t.Errorf("GetLog(40) after the failed sync: %v (index %d), want the entry", err, l.Index)
	}

	if !untilReopen {
		bad.Store(false)
		badMeta.Store(false)
	}
	s.Close()
	bad.Store(false)
	badMeta.Store(false)
	s = mustOpen(t, "/log", o) // same FaultFS: a process restart, the page cache kept
	if s.Failure() != nil {
		t.Fatalf("reopened store stopped: %v", s.Failure())
	}
	if last, _ := s.LastIndex(); last != 30 {
		t.Fatalf("last index %d after the restart, want 30: the batch whose sync failed is served", last)
	}
	if err := s.GetLog(31, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(31) after the restart: %v, want raft.ErrLogNotFound", err)
	}

	storeAll(t, s, sameSizeRange(31, 45, 2))
	_, s = crashReopen(t, f, s, o, pl.opts)
	defer s.Close()
	checkTerms(t, s, 45, 31, 2)
}

// TestCloseZeroesBatchItsCheckpointFailedToSync: Close's own checkpoint
// syncs the batch WriteLogs left unsynced; when that sync fails and the
// meta file cannot record the cut either, Close still zeroes the batch, so
// a process restart ends the log before it.
func TestCloseZeroesBatchItsCheckpointFailedToSync(t *testing.T) {
	for _, pl := range powerLosses() {
		t.Run(pl.name, func(t *testing.T) {
			f, s, o, bad := failingSyncStore(t, pl.seed)
			faultSegmentsAndMeta(f, bad, bad)
			if err := s.Close(); !errors.Is(err, unix.EIO) {
				t.Fatalf("Close with the batch's sync failing: %v, want EIO", err)
			}
			bad.Store(false)
			s = mustOpen(t, "/log", o) // a process restart, the page cache kept
			if last, _ := s.LastIndex(); last != 30 {
				t.Fatalf("last index %d after the restart, want 30: the batch whose sync failed is served", last)
			}
			storeAll(t, s, sameSizeRange(31, 45, 2))
			_, s = crashReopen(t, f, s, o, pl.opts)
			defer s.Close()
			checkTerms(t, s, 45, 31, 2)
		})
	}
}
