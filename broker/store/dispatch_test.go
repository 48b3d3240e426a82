package store

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

func testMsg(topic string, q int32, i int) *Message {
	return &Message{
		Topic: topic, QueueID: q, Body: fmt.Appendf(nil, "body-%d-%d", q, i),
		Properties: map[string]string{
			wire.PropertyTags: fmt.Sprintf("tag%d", i%3), wire.PropertyKeys: fmt.Sprintf("k%d shared", i),
			wire.PropertyUniqKey: fmt.Sprintf("U-%s-%d-%d", topic, q, i),
		},
	}
}

type dispatchFixture struct {
	fsys storage.FS
	dir  string
	log  *segLog
	cqs  *ConsumeQueueStore
	idx  *IndexService
	r    *ReputService
}

func newDispatchFixture(t *testing.T, fsys storage.FS, dir string, log *segLog, start int64) *dispatchFixture {
	t.Helper()
	f := &dispatchFixture{fsys: fsys, dir: dir, log: log}
	f.cqs = openTestCQStore(t, fsys, dir, 16)
	clock := &manualClock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.Local)}
	f.idx = newTestIndexService(t, fsys, dir, 64, 200, clock)
	r, err := NewReputService(ReputConfig{ConsumeQueues: f.cqs, Index: f.idx, StartOffset: start})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	t.Cleanup(func() { f.cqs.Close(); f.idx.Close() })
	return f
}

type sent struct {
	topic string
	q     int32
	phy   int64
	size  int
	tags  int64
}

// fill appends n messages spread over topics A/B and queues 0..2.
func fill(l *segLog, n int) []sent {
	var out []sent
	for i := range n {
		topic := []string{"A", "B"}[i%2]
		q := int32(i % 3)
		m := testMsg(topic, q, i)
		phy, size := l.append(m)
		out = append(out, sent{topic, q, phy, size, wire.TagsHashCode(m.Tags())})
	}
	return out
}

// checkQueues verifies that every queue holds exactly its messages, in order,
// at dense offsets from 0.
func checkQueues(t *testing.T, cqs *ConsumeQueueStore, msgs []sent) {
	t.Helper()
	next := map[queueKey]int64{}
	for _, m := range msgs {
		k := queueKey{m.topic, m.q}
		cq := cqs.Get(m.topic, m.q)
		if cq == nil {
			t.Fatalf("queue %v missing", k)
		}
		u, err := cq.Get(next[k])
		if err != nil {
			t.Fatalf("queue %v offset %d: %v", k, next[k], err)
		}
		if want := (CQUnit{m.phy, int32(m.size), m.tags}); u != want {
			t.Fatalf("queue %v offset %d: %+v, want %+v", k, next[k], u, want)
		}
		next[k]++
	}
	for k, n := range next {
		if got := cqs.Get(k.topic, k.queueID).MaxOffset(); got != n {
			t.Fatalf("queue %v max %d, want %d", k, got, n)
		}
	}
}

func TestDispatchDenseQueueOffsetsAndIndex(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		l := newSegLog(t, fsys, dir, 4096) // ~20 messages per segment: many blank fillers
		msgs := fill(l, 150)
		f := newDispatchFixture(t, fsys, dir, l, 0)
		var mu sync.Mutex
		notified := map[queueKey]int64{}
		f.r.OnNewMessage(func(topic string, q int32, maxOffset int64) {
			mu.Lock()
			defer mu.Unlock()
			notified[queueKey{topic, q}] = maxOffset
		})
		// Two entries: messages 0..99, then the rest.
		l.dispatch(f.r, 0, msgs[100].phy)
		if got := f.r.DispatchedOffset(); got != msgs[99].phy+int64(msgs[99].size) {
			t.Fatalf("dispatched offset %d after message 99", got)
		}
		checkQueues(t, f.cqs, msgs[:100])
		end := l.mfq.MaxOffset()
		l.dispatch(f.r, msgs[100].phy, end)
		if got, last := f.r.DispatchedOffset(), msgs[149]; got != last.phy+int64(last.size) {
			t.Fatalf("dispatched offset %d after the last message", got)
		}
		checkQueues(t, f.cqs, msgs)
		mu.Lock()
		if len(notified) != 6 || notified[queueKey{"A", 0}] != 25 {
			t.Fatalf("notified %v", notified)
		}
		mu.Unlock()
		// The index finds a message by KEYS and by UNIQ_KEY.
		if r := f.idx.QueryOffset("A", "k42", 10, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{msgs[42].phy}) {
			t.Fatalf("k42: %v", r.PhyOffsets)
		}
		if r := f.idx.QueryOffset("B", "U-B-1-7", 10, 0, math.MaxInt64); !slices.Equal(r.PhyOffsets, []int64{msgs[7].phy}) {
			t.Fatalf("uniq: %v", r.PhyOffsets)
		}
		if r := f.idx.QueryOffset("A", "shared", 1000, 0, math.MaxInt64); len(r.PhyOffsets) != 75 {
			t.Fatalf("shared: %d", len(r.PhyOffsets))
		}
		if ts := f.cqs.LogicsMsgTimestamp(); ts != l.ts {
			t.Fatalf("logics timestamp %d, want %d", ts, l.ts)
		}
	})
}

func removeTree(t *testing.T, fsys storage.FS, dir string) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			removeTree(t, fsys, p)
		}
		if err := fsys.Remove(p); err != nil && !e.IsDir() {
			t.Fatal(err)
		}
	}
}

func snapshotQueues(t *testing.T, cqs *ConsumeQueueStore) map[queueKey][]CQUnit {
	t.Helper()
	out := map[queueKey][]CQUnit{}
	for _, cq := range cqs.All() {
		for off := cq.MinOffset(); off < cq.MaxOffset(); off++ {
			u, err := cq.Get(off)
			if err != nil {
				t.Fatal(err)
			}
			k := queueKey{cq.Topic(), cq.QueueID()}
			out[k] = append(out[k], u)
		}
	}
	return out
}

func TestDispatchRebuildAndReplay(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		l := newSegLog(t, fsys, dir, 4096)
		msgs := fill(l, 120)
		f := newDispatchFixture(t, fsys, dir, l, 0)
		l.dispatch(f.r, 0, l.mfq.MaxOffset())
		before := snapshotQueues(t, f.cqs)
		if _, err := f.cqs.Flush(); err != nil {
			t.Fatal(err)
		}
		f.cqs.Close()
		f.idx.Close()

		// Replay from 0 over the existing queues (the FSM re-applying the
		// log after a restart): nothing changes.
		g := newDispatchFixture(t, fsys, dir, l, 0)
		l.dispatch(g.r, 0, l.mfq.MaxOffset())
		if after := snapshotQueues(t, g.cqs); !mapsEqualUnits(before, after) {
			t.Fatal("replay changed the queues")
		}
		if r := g.idx.QueryOffset("A", "k42", 10, 0, math.MaxInt64); len(r.PhyOffsets) != 1 {
			t.Fatalf("replay duplicated index entries: %v", r.PhyOffsets)
		}
		g.cqs.Close()
		g.idx.Close()

		// Delete every ConsumeQueue file and rebuild from the CommitLog.
		removeTree(t, fsys, filepath.Join(dir, "consumequeue"))
		h := newDispatchFixture(t, fsys, dir, l, 0)
		if len(h.cqs.All()) != 0 {
			t.Fatal("queues survived deletion")
		}
		if got := ReputStartOffset(h.cqs, h.idx, l.mfq.MinOffset(), l.mfq.MaxOffset()); got != 0 {
			t.Fatalf("start offset %d, want 0 after deletion", got)
		}
		l.dispatch(h.r, 0, l.mfq.MaxOffset())
		if after := snapshotQueues(t, h.cqs); !mapsEqualUnits(before, after) {
			t.Fatal("rebuilt queues differ from the originals")
		}
		checkQueues(t, h.cqs, msgs)
		if got := ReputStartOffset(h.cqs, h.idx, l.mfq.MinOffset(), l.mfq.MaxOffset()); got != l.mfq.MaxOffset() {
			t.Fatalf("start offset %d, want %d", got, l.mfq.MaxOffset())
		}
	})
}

func mapsEqualUnits(a, b map[queueKey][]CQUnit) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestDispatchRequestsAssignsOffsets(t *testing.T) {
	fsys := storage.NewFaultFS(2)
	l := newSegLog(t, fsys, "/store", 4096)
	f := newDispatchFixture(t, fsys, "/store", l, 0)
	var reqs []*DispatchRequest
	for i := range 5 {
		reqs = append(reqs, &DispatchRequest{Topic: "R", QueueID: 1, CommitLogOffset: int64(i) * 200, MsgSize: 200, StoreTimestamp: int64(i)})
	}
	// A prepared transactional message takes no queue offset.
	reqs[2].SysFlag = wire.SysFlagTransPrepared
	if err := f.r.DispatchRequests(reqs); err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, r := range reqs {
		offs = append(offs, r.ConsumeQueueOffset)
	}
	if !slices.Equal(offs, []int64{0, 1, 0, 2, 3}) || f.r.DispatchedOffset() != 1000 {
		t.Fatalf("offsets %v dispatched %d", offs, f.r.DispatchedOffset())
	}
	// Raft re-applies entries after a restart: same offsets, nothing added.
	again := []*DispatchRequest{{Topic: "R", QueueID: 1, CommitLogOffset: 600, MsgSize: 200}}
	if err := f.r.DispatchRequests(again); err != nil || again[0].ConsumeQueueOffset != 2 || f.cqs.Get("R", 1).MaxOffset() != 4 {
		t.Fatalf("re-apply: %v offset %d", err, again[0].ConsumeQueueOffset)
	}
}

// TestDispatchConcurrentReaders has consumers read queues while the
// dispatcher appends (run with -race): a reader never sees a unit past
// MaxOffset that is incomplete, and every unit it sees is final.
func TestDispatchConcurrentReaders(t *testing.T) {
	fsys := storage.NewFaultFS(6)
	l := newSegLog(t, fsys, "/store", 1<<16)
	f := newDispatchFixture(t, fsys, "/store", l, 0)
	const n = 600
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		wg.Go(func() {
			var next int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				cq := f.cqs.Get("A", 0)
				if cq == nil || next >= cq.MaxOffset() {
					runtime.Gosched() // nothing new yet; let the writer run
					continue
				}
				b, err := cq.Read(next, 32)
				if err != nil {
					errs <- err
					return
				}
				for i := range b.Len() {
					u := b.Unit(i)
					if u.Size <= 0 || u.PhyOffset < 0 {
						errs <- fmt.Errorf("incomplete unit at %d: %+v", next+int64(i), u)
						b.Release()
						return
					}
				}
				next += int64(b.Len())
				b.Release()
			}
		})
	}
	var from int64
	for i := range n {
		l.append(testMsg("A", 0, i))
		if i%7 == 0 {
			l.dispatch(f.r, from, l.mfq.MaxOffset())
			from = l.mfq.MaxOffset()
		}
	}
	l.dispatch(f.r, from, l.mfq.MaxOffset())
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if got := f.cqs.Get("A", 0).MaxOffset(); got != n {
		t.Fatalf("max %d", got)
	}
}

// BenchmarkDispatch measures decoding (with CRC checks, as the FSM does)
// and building ConsumeQueue (8 queues) and index entries from an already
// written CommitLog of 1 KiB messages with a UNIQ_KEY and two KEYS, on the
// real file system (page cache). One op is one message.
func BenchmarkDispatch(b *testing.B) {
	for _, withIndex := range []bool{false, true} {
		b.Run(fmt.Sprintf("index=%v", withIndex), func(b *testing.B) {
			dir := b.TempDir()
			fsys := storage.OSFS()
			l := newSegLog(b, fsys, dir, 64<<20)
			body := make([]byte, 1024)
			for i := range b.N {
				m := testMsg("Bench", int32(i%8), i)
				m.Body = body
				l.append(m)
			}
			cqs := NewConsumeQueueStore(fsys, filepath.Join(dir, "consumequeue"), DefaultConsumeQueueUnits/10, nil)
			defer cqs.Close()
			var idx *IndexService
			if withIndex {
				idx = NewIndexService(fsys, filepath.Join(dir, "index"), 500_000, 2_000_000, nil, nil)
				if err := idx.Load(true, 0); err != nil {
					b.Fatal(err)
				}
				defer idx.Close()
			}
			r, err := NewReputService(ReputConfig{ConsumeQueues: cqs, Index: idx})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(l.mfq.MaxOffset() / int64(b.N))
			b.ResetTimer()
			l.dispatch(r, 0, l.mfq.MaxOffset())
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkConsumeQueueRead32 measures reading 32-unit batches.
func BenchmarkConsumeQueueRead32(b *testing.B) {
	s := NewConsumeQueueStore(storage.OSFS(), b.TempDir(), DefaultConsumeQueueUnits, nil)
	defer s.Close()
	cq, err := s.FindOrCreate("T", 0)
	if err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	for i := range int64(n) {
		if _, _, err := cq.Append(unitN(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(32 * CQUnitSize)
	b.ResetTimer()
	var off int64
	for b.Loop() {
		bt, err := cq.Read(off, 32)
		if err != nil {
			b.Fatal(err)
		}
		for i := range bt.Len() {
			_ = bt.Unit(i)
		}
		off = (off + int64(bt.Len())) % (n - 32)
		bt.Release()
	}
}

// TestDispatchRebuildsQueuesAfterCrash crashes the fault FS with queue units
// partly unflushed and torn (random pages or a random prefix of the unsynced
// bytes), then recovers the way the store and the FSM do: verify units from
// the checkpoint, re-apply the log from there. The queues must come back
// complete, with the same offsets, whatever the tear.
func TestDispatchRebuildsQueuesAfterCrash(t *testing.T) {
	for seed := uint64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fsys := storage.NewFaultFS(seed)
			l := newSegLog(t, fsys, "/store", 8192)
			msgs := fill(l, 400)
			if err := l.mfq.Flush(); err != nil { // the CommitLog is durable
				t.Fatal(err)
			}
			f := newDispatchFixture(t, fsys, "/store", l, 0)
			// Checkpoint (and snapshot) after dispatching the first 150
			// messages...
			mid := msgs[150].phy
			l.dispatch(f.r, 0, mid)
			if _, err := f.cqs.Flush(); err != nil {
				t.Fatal(err)
			}
			idxTS, err := f.idx.Flush()
			if err != nil {
				t.Fatal(err)
			}
			// ...then dispatch the rest and flush only some of it.
			l.dispatch(f.r, mid, l.mfq.MaxOffset())
			for i, cq := range f.cqs.All() {
				if i%2 == 0 {
					if err := cq.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			crashed := fsys.Crash(storage.CrashOptions{Tear: seed%2 == 0, TearPages: seed%2 == 1})

			l2 := newSegLog(t, crashed, "/store", 8192)
			cqs := openTestCQStore(t, crashed, "/store", 16)
			defer cqs.Close()
			clock := &manualClock{t: time.Date(2026, 1, 10, 13, 0, 0, 0, time.Local)}
			idx := NewIndexService(crashed, "/store/index", 64, 200, clock.Now, nil)
			if err := idx.Load(false, idxTS); err != nil {
				t.Fatal(err)
			}
			defer idx.Close()
			if err := cqs.TruncateDirtyLogicFiles(l2.mfq.MaxOffset()); err != nil {
				t.Fatal(err)
			}
			if _, err := cqs.VerifyAfterCrash(l2.mfq, mid); err != nil {
				t.Fatal(err)
			}
			start := ReputStartOffset(cqs, idx, l2.mfq.MinOffset(), l2.mfq.MaxOffset())
			r, err := NewReputService(ReputConfig{ConsumeQueues: cqs, Index: idx, StartOffset: start})
			if err != nil {
				t.Fatal(err)
			}
			l2.dispatch(r, mid, l2.mfq.MaxOffset()) // the FSM re-applies after its snapshot
			checkQueues(t, cqs, msgs)
			// Re-applied messages are indexed again. Entries below the
			// snapshot that were in an index file Load dropped (newer than
			// the checkpoint) are not: nothing acts on RebuildFrom.
			for _, i := range []int{150, 399} {
				m := msgs[i]
				got := idx.QueryOffset(m.topic, fmt.Sprintf("U-%s-%d-%d", m.topic, m.q, i), 10, 0, math.MaxInt64)
				if !slices.Equal(got.PhyOffsets, []int64{m.phy}) {
					t.Fatalf("index for message %d: %v, want [%d]", i, got.PhyOffsets, m.phy)
				}
			}
		})
	}
}
