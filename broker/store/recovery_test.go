package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/storage"
)

// crashRun drives SYNC_FLUSH appends from several goroutines against a
// FaultFS, kills the "machine" after a random number of acknowledged
// appends, recovers, and checks that every acknowledged message is present
// and intact, that everything served is a real message in dense queue order,
// and that nothing past the torn point is served.
func crashRun(t *testing.T, seed uint64, total, writers int, opts storage.CrashOptions) {
	crashRunMode(t, seed, total, writers, opts, SyncFlush)
}

// crashRunMode is crashRun for either flush mode. Under ASYNC_FLUSH an
// acknowledgement promises nothing about durability, so only the safety
// checks apply: what is served is intact, real, unique and densely ordered.
func crashRunMode(t *testing.T, seed uint64, total, writers int, opts storage.CrashOptions, mode FlushDiskType) {
	rng := rand.New(rand.NewPCG(seed, 99))
	f := storage.NewFaultFS(seed)
	cfg := coreConfig(f, "/store", mode)
	cfg.MappedFileSizeCommitLog = 1 << 20
	s := openCore(t, cfg)

	crashAt := int64(total/10 + rng.IntN(total*8/10))
	var acked sync.Map // body -> physical offset
	var nAcked, attempted atomic.Int64
	var freezeOnce sync.Once
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				n := attempted.Add(1)
				if n > int64(total) {
					return
				}
				body := fmt.Sprintf("w%d-%d-%s", w, i, strings.Repeat("p", int(n%300)))
				r, err := s.PutMessage(coreMsg("Crash", int32(w%4), body))
				if err != nil {
					if !errors.Is(err, ErrServiceNotAvailable) && !errors.Is(err, ErrStoreWriteFailed) {
						t.Errorf("append failed with an unexpected error: %v", err)
					}
					return // the machine is dead
				}
				acked.Store(body, r.PhysicalOffset)
				if nAcked.Add(1) >= crashAt {
					freezeOnce.Do(f.Freeze)
				}
			}
		}(w)
	}
	wg.Wait()
	freezeOnce.Do(f.Freeze) // crash at the end if the writers finished first
	_ = s.Close()           // fails (the disk is gone) but stops the goroutines
	g := f.Crash(opts)

	cfg.FS = g
	s2, err := Open(cfg)
	if err != nil {
		t.Fatalf("seed %d: reopen after crash: %v", seed, err)
	}
	defer s2.Close()
	if !s2.Recovery().Abnormal {
		t.Fatalf("seed %d: crash not detected", seed)
	}
	waitDispatched(t, s2)
	served := map[string]bool{}
	for q := int32(0); q < 4; q++ {
		for _, body := range pullAll(t, s2, "Crash", q) {
			if served[body] {
				t.Fatalf("seed %d: %q served twice", seed, body)
			}
			served[body] = true
			if !strings.HasPrefix(body, "w") {
				t.Fatalf("seed %d: garbage served: %q", seed, body)
			}
		}
	}
	if mode == AsyncFlush {
		attemptedOK := 0
		acked.Range(func(k, v any) bool {
			if served[k.(string)] {
				attemptedOK++
			}
			return true
		})
		if attemptedOK != len(served) {
			t.Fatalf("seed %d: %d served messages were never acknowledged (%d served)", seed, len(served)-attemptedOK, len(served))
		}
		t.Logf("seed %d: ASYNC crash after %d acks; %d survived", seed, nAcked.Load(), len(served))
		return
	}
	missing := 0
	acked.Range(func(k, v any) bool {
		body := k.(string)
		if !served[body] {
			missing++
			if missing < 5 {
				t.Errorf("seed %d: acknowledged message %q at %d lost", seed, body, v.(int64))
			}
		}
		m, err := s2.LookMessageByOffset(v.(int64))
		if err != nil || string(m.Body) != body {
			t.Errorf("seed %d: acknowledged message at %d not intact: %v", seed, v.(int64), err)
		}
		return true
	})
	if missing > 0 {
		t.Fatalf("seed %d: %d of %d acknowledged messages lost", seed, missing, nAcked.Load())
	}
	// Appends continue after recovery, on the next queue offset.
	r, err := s2.PutMessage(coreMsg("Crash", 0, "after-crash"))
	if err != nil {
		t.Fatalf("seed %d: put after recovery: %v", seed, err)
	}
	// Read the max once: the dispatcher may publish the new unit between two
	// reads (max moves from r.QueueOffset to r.QueueOffset+1).
	if mx := s2.GetMaxOffsetInQueue("Crash", 0); r.QueueOffset != mx-1 && r.QueueOffset != mx {
		t.Fatalf("seed %d: queue offset %d after recovery, max %d", seed, r.QueueOffset, mx)
	}
	t.Logf("seed %d: crash after %d acks (target %d); served %d; recovery %+v", seed, nAcked.Load(), crashAt, len(served), s2.Recovery())
}

func TestCrashDuringSyncFlushAppends(t *testing.T) {
	runs := []storage.CrashOptions{{}, {Tear: true}, {TearPages: true}}
	seeds := 1
	if os.Getenv("RAFTMQ_LONG") == "1" {
		seeds = 10
	}
	for i, opts := range runs {
		for s := 0; s < seeds; s++ {
			seed := uint64(i*100 + s + 1)
			t.Run(fmt.Sprintf("tear=%v,pages=%v,seed=%d", opts.Tear, opts.TearPages, seed), func(t *testing.T) {
				crashRun(t, seed, 10000, 8, opts)
			})
		}
	}
}

// TestCrashDuringAsyncFlushAppends: what survives a crash under ASYNC_FLUSH
// is a clean prefix: intact, unique, dense.
func TestCrashDuringAsyncFlushAppends(t *testing.T) {
	for i, opts := range []storage.CrashOptions{{Tear: true}, {TearPages: true}} {
		seed := uint64(500 + i)
		t.Run(fmt.Sprintf("pages=%v", opts.TearPages), func(t *testing.T) {
			crashRunMode(t, seed, 5000, 4, opts, AsyncFlush)
		})
	}
}

// TestTornTailIsTruncated writes a tail that never got synced and checks the
// torn bytes are cut and zeroed, and appends resume at the cut.
func TestTornTailIsTruncated(t *testing.T) {
	f := storage.NewFaultFS(5)
	cfg := coreConfig(f, "/s", AsyncFlush)
	cfg.FlushIntervalCommitLog = 1 << 40 // never flush on its own
	cfg.FlushCommitLogThoroughInterval = 1 << 40
	s := openCore(t, cfg)
	var durableEnd int64
	for i := 0; i < 20; i++ {
		r, err := s.PutMessage(coreMsg("T", 0, "durable-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		durableEnd = r.PhysicalOffset + int64(r.Appended[0].Size)
	}
	if err := s.CommitLog().Queue().Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := s.PutMessage(coreMsg("T", 0, "volatile-"+strconv.Itoa(i)+strings.Repeat("v", 500))); err != nil {
			t.Fatal(err)
		}
	}
	f.Freeze()
	s.Close()
	g := f.Crash(storage.CrashOptions{Tear: true})
	cfg.FS = g
	s2 := openCore(t, cfg)
	defer s2.Close()
	rep := s2.Recovery()
	if rep.End < durableEnd {
		t.Fatalf("recovered end %d below the durable end %d", rep.End, durableEnd)
	}
	waitDispatched(t, s2)
	got := pullAll(t, s2, "T", 0)
	if len(got) < 20 {
		t.Fatalf("%d messages after crash", len(got))
	}
	for i, b := range got {
		if i < 20 && b != "durable-"+strconv.Itoa(i) {
			t.Fatalf("message %d = %q", i, b)
		}
		if i >= 20 && !strings.HasPrefix(b, "volatile-"+strconv.Itoa(i-20)) {
			t.Fatalf("message %d = %q", i, b)
		}
	}
	r, err := s2.PutMessage(coreMsg("T", 0, "resumed"))
	if err != nil || r.PhysicalOffset != rep.End || r.QueueOffset != int64(len(got)) {
		t.Fatalf("resume: %+v %v (end %d, %d served)", r, err, rep.End, len(got))
	}
}

// TestFlippedBitDetectedOnRecovery damages an acknowledged, checkpointed
// message: recovery refuses to start (naming the offset) unless told to
// truncate, and then nothing from the damaged entry on is served.
func TestFlippedBitDetectedOnRecovery(t *testing.T) {
	f := storage.NewFaultFS(9)
	cfg := coreConfig(f, "/s", SyncFlush)
	s := openCore(t, cfg)
	var offs []int64
	for i := 0; i < 50; i++ {
		r, err := s.PutMessage(coreMsg("T", 1, "msg-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, r.PhysicalOffset)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := "/s/commitlog/" + storage.FileName(0)
	if err := f.FlipBit(seg, offs[30]+100, 2); err != nil {
		t.Fatal(err)
	}
	_, err := Open(cfg)
	if !errors.Is(err, ErrCorruptMessage) || !strings.Contains(err.Error(), strconv.FormatInt(offs[30], 10)) {
		t.Fatalf("open over a damaged entry: %v", err)
	}
	cfg.TruncateCorruptCommitLog = true
	s2 := openCore(t, cfg)
	defer s2.Close()
	if rep := s2.Recovery(); !rep.Corrupt || rep.End != offs[30] {
		t.Fatalf("report %+v", rep)
	}
	waitDispatched(t, s2)
	got := pullAll(t, s2, "T", 1)
	if len(got) != 30 || got[29] != "msg-29" {
		t.Fatalf("served %d messages after truncating at the damage", len(got))
	}
	if _, err := s2.LookMessageByOffset(offs[30]); err == nil {
		t.Fatal("damaged message still readable by offset")
	}
}

// TestFlippedBitNeverServedAtRuntime damages a message while the store runs:
// the pull stops before it and looking it up fails.
func TestFlippedBitNeverServedAtRuntime(t *testing.T) {
	f := storage.NewFaultFS(10)
	s := openCore(t, coreConfig(f, "/s", SyncFlush))
	defer s.Close()
	var offs []int64
	for i := 0; i < 10; i++ {
		r, err := s.PutMessage(coreMsg("T", 0, "m"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, r.PhysicalOffset)
	}
	waitDispatched(t, s)
	if err := f.FlipBit("/s/commitlog/"+storage.FileName(0), offs[4]+50, 0); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetMessage("g", "T", 0, 0, 32, nil)
	if err != nil || r.Status != Found || len(r.Messages) != 4 || r.NextBeginOffset != 4 {
		t.Fatalf("pull over damage: %v %d next %d err %v", r.Status, len(r.Messages), r.NextBeginOffset, err)
	}
	r, _ = s.GetMessage("g", "T", 0, 4, 32, nil)
	if len(r.Messages) != 0 || r.NextBeginOffset != 4 {
		t.Fatalf("damaged message served: %d next %d", len(r.Messages), r.NextBeginOffset)
	}
	if _, err := s.LookMessageByOffset(offs[4]); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("look up damaged: %v", err)
	}
}

func TestCheckpointRoundTripAndDamage(t *testing.T) {
	f := storage.NewFaultFS(1)
	f.MkdirAll("/r", 0o755)
	c := Checkpoint{PhysicMsgTimestamp: 1, LogicsMsgTimestamp: 2, IndexMsgTimestamp: 3, PhysicOffset: 4, LogicsOffset: 5}
	if err := writeCheckpoint(f, "/r/checkpoint", c); err != nil {
		t.Fatal(err)
	}
	got, ok, err := readCheckpoint(f, "/r/checkpoint")
	if err != nil || !ok || got != c {
		t.Fatalf("read %+v %v %v", got, ok, err)
	}
	// The replacement is atomic: it survives a crash right after.
	g := f.Crash(storage.CrashOptions{})
	if got, ok, _ := readCheckpoint(g, "/r/checkpoint"); !ok || got != c {
		t.Fatalf("after crash %+v", got)
	}
	g.FlipBit("/r/checkpoint", 10, 1)
	if _, ok, err := readCheckpoint(g, "/r/checkpoint"); ok || !errors.Is(err, ErrCorruptFile) {
		t.Fatalf("damaged checkpoint accepted: %v", err)
	}
	if _, ok, err := readCheckpoint(g, "/r/none"); ok || err != nil {
		t.Fatalf("missing checkpoint: %v %v", ok, err)
	}
}
