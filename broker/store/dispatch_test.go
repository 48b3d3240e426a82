package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/storage"
)

// segLog is a minimal CommitLog for the dispatcher tests: stored messages
// appended to a MappedFileQueue with RocketMQ's blank filler at segment ends.
// The real CommitLog (commitlog.go) is tested by its owner; this keeps the
// dispatcher tests independent of its put path.
type segLog struct {
	t   testing.TB
	mfq *storage.MappedFileQueue
	ts  int64
}

func newSegLog(t testing.TB, fsys storage.FS, dir string, segSize int) *segLog {
	t.Helper()
	mfq, err := storage.OpenMappedFileQueue(fsys, filepath.Join(dir, "commitlog"), segSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mfq.Close() })
	return &segLog{t: t, mfq: mfq, ts: 1_700_000_000_000}
}

// append stores m and returns its physical offset and size.
func (l *segLog) append(m *Message) (int64, int) {
	l.t.Helper()
	m.BornHost = netip.MustParseAddrPort("127.0.0.1:5555")
	m.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	b, err := AppendMessage(nil, m)
	if err != nil {
		l.t.Fatal(err)
	}
	for {
		mf, err := l.mfq.LastOrCreate(l.mfq.MaxOffset())
		if err != nil {
			l.t.Fatal(err)
		}
		if mf.Remaining() < len(b)+BlankHeaderSize {
			blank := make([]byte, mf.Remaining())
			binary.BigEndian.PutUint32(blank[0:], uint32(len(blank)))
			binary.BigEndian.PutUint32(blank[4:], MagicBlank)
			if _, err := mf.Append(blank); err != nil {
				l.t.Fatal(err)
			}
			continue
		}
		phy := mf.FileFromOffset() + int64(mf.WrotePosition())
		l.ts += 1000
		patchStored(b, phy, l.ts)
		if _, err := mf.Append(b); err != nil {
			l.t.Fatal(err)
		}
		return phy, len(b)
	}
}

func testMsg(topic string, q int32, i int) *Message {
	return &Message{
		Topic: topic, QueueID: q, Body: fmt.Appendf(nil, "body-%d-%d", q, i),
		Properties: map[string]string{
			PropertyTags: fmt.Sprintf("tag%d", i%3), PropertyKeys: fmt.Sprintf("k%d shared", i),
			PropertyUniqKey: fmt.Sprintf("U-%s-%d-%d", topic, q, i),
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
	r, err := NewReputService(ReputConfig{ConsumeQueues: f.cqs, Index: f.idx, Source: log.mfq, StartOffset: start})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	t.Cleanup(func() { r.Close(); f.cqs.Close(); f.idx.Close() })
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
		out = append(out, sent{topic, q, phy, size, TagsHashCode(m.Tags())})
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
		// A limit inside message 100 dispatches exactly 0..99.
		mid := msgs[100].phy + 10
		got, err := f.r.DispatchUpTo(mid)
		if err != nil || got != msgs[99].phy+int64(msgs[99].size) {
			t.Fatalf("dispatch to %d: got %d %v", mid, got, err)
		}
		checkQueues(t, f.cqs, msgs[:100])
		end := l.mfq.MaxOffset()
		if got, err := f.r.DispatchUpTo(end); err != nil || got != end || f.r.DispatchedOffset() != end {
			t.Fatalf("dispatch all: %d %v", got, err)
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
		if _, err := f.r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
			t.Fatal(err)
		}
		before := snapshotQueues(t, f.cqs)
		if _, err := f.cqs.Flush(); err != nil {
			t.Fatal(err)
		}
		f.r.Close()
		f.cqs.Close()
		f.idx.Close()

		// Replay from 0 over the existing queues: nothing changes.
		g := newDispatchFixture(t, fsys, dir, l, 0)
		if _, err := g.r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
			t.Fatal(err)
		}
		if after := snapshotQueues(t, g.cqs); !mapsEqualUnits(before, after) {
			t.Fatal("replay changed the queues")
		}
		if r := g.idx.QueryOffset("A", "k42", 10, 0, math.MaxInt64); len(r.PhyOffsets) != 1 {
			t.Fatalf("replay duplicated index entries: %v", r.PhyOffsets)
		}
		g.r.Close()
		g.cqs.Close()
		g.idx.Close()

		// Delete every ConsumeQueue file and rebuild from the CommitLog.
		removeTree(t, fsys, filepath.Join(dir, "consumequeue"))
		h := newDispatchFixture(t, fsys, dir, l, 0)
		if len(h.cqs.All()) != 0 {
			t.Fatal("queues survived deletion")
		}
		if got := ReputStartOffset(h.cqs, h.idx, l.mfq.MinOffset(), l.mfq.MaxOffset(), -1); got != 0 {
			t.Fatalf("start offset %d, want 0 after deletion", got)
		}
		if _, err := h.r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
			t.Fatal(err)
		}
		if after := snapshotQueues(t, h.cqs); !mapsEqualUnits(before, after) {
			t.Fatal("rebuilt queues differ from the originals")
		}
		checkQueues(t, h.cqs, msgs)
		if got := ReputStartOffset(h.cqs, h.idx, l.mfq.MinOffset(), l.mfq.MaxOffset(), -1); got != l.mfq.MaxOffset() {
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
	reqs[2].SysFlag = SysFlagTransPrepared
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

func TestDispatchStopsAtCorruptEntry(t *testing.T) {
	fsys := storage.NewFaultFS(9)
	l := newSegLog(t, fsys, "/store", 1<<16)
	msgs := fill(l, 10)
	// Damage the body of message 6 in the mapping.
	mf := l.mfq.FindByOffset(msgs[6].phy)
	bad := msgs[6].phy + int64(msgs[6].size) - 30
	b := mf.Bytes()
	b[bad-mf.FileFromOffset()] ^= 0xFF
	f := newDispatchFixture(t, fsys, "/store", l, 0)
	got, err := f.r.DispatchUpTo(l.mfq.MaxOffset())
	if !errors.Is(err, ErrCorruptMessage) || got != msgs[6].phy {
		t.Fatalf("got %d %v, want stop at %d with ErrCorruptMessage", got, err, msgs[6].phy)
	}
	checkQueues(t, f.cqs, msgs[:6])
	// It stays stopped: later calls never pass the damage.
	if got, err := f.r.DispatchUpTo(l.mfq.MaxOffset()); err == nil || got != msgs[6].phy {
		t.Fatalf("second call: %d %v", got, err)
	}
}

// TestDispatchTrustFrom: below the trusted offset a CRC mismatch still stops
// dispatching; at or past it (bytes this process just sealed) the CRC pass
// is skipped but structural damage still stops it.
func TestDispatchTrustFrom(t *testing.T) {
	fsys := storage.NewFaultFS(9)
	l := newSegLog(t, fsys, "/store", 1<<16)
	msgs := fill(l, 10)
	mf := l.mfq.FindByOffset(msgs[0].phy)
	b := mf.Bytes()
	flipBody := func(i int) { b[msgs[i].phy+int64(msgs[i].size)-30-mf.FileFromOffset()] ^= 0xFF }
	flipBody(2)
	flipBody(7)
	f := newDispatchFixture(t, fsys, "/store", l, 0)
	f.r.TrustFrom(msgs[5].phy)
	if got, err := f.r.DispatchUpTo(l.mfq.MaxOffset()); !errors.Is(err, ErrCorruptMessage) || got != msgs[2].phy {
		t.Fatalf("got %d %v, want a stop at the untrusted damaged entry %d", got, err, msgs[2].phy)
	}
	flipBody(2) // repair; message 7 stays damaged but is past TrustFrom
	// Damage message 8's TOTALSIZE: structure is checked even when trusted.
	sz := msgs[8].phy - mf.FileFromOffset()
	b[sz+3] ^= 0x01
	f2 := newDispatchFixture(t, fsys, "/store2", l, 0)
	f2.r.TrustFrom(msgs[5].phy)
	got, err := f2.r.DispatchUpTo(l.mfq.MaxOffset())
	if !errors.Is(err, ErrCorruptMessage) || got != msgs[8].phy {
		t.Fatalf("got %d %v, want a stop at the structurally damaged entry %d", got, err, msgs[8].phy)
	}
	checkQueues(t, f2.cqs, msgs[:8])
}

func TestDispatchBackgroundFollower(t *testing.T) {
	defer goleak.VerifyNone(t)
	fsys := storage.NewFaultFS(4)
	l := newSegLog(t, fsys, "/store", 4096)
	f := newDispatchFixture(t, fsys, "/store", l, 0)
	var mu sync.Mutex
	var limit int64
	visible := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return limit
	}
	woken := make(chan int64, 100)
	f.r.OnNewMessage(func(topic string, q int32, maxOffset int64) {
		if topic == "A" && q == 0 {
			woken <- maxOffset
		}
	})
	f.r.Start(visible)
	msgs := fill(l, 30)
	// Appended but not yet visible (e.g. not flushed under SYNC_FLUSH):
	// consumers must not see it even after a wake-up.
	f.r.Notify()
	mu.Lock()
	limit = msgs[14].phy
	mu.Unlock()
	f.r.Notify()
	testutil.WaitFor(t, 5*time.Second, "first 14 messages dispatched", func() bool { return f.r.DispatchedOffset() == msgs[14].phy })
	mu.Lock()
	limit = l.mfq.MaxOffset()
	mu.Unlock()
	f.r.Notify()
	testutil.WaitFor(t, 5*time.Second, "all dispatched", func() bool { return f.r.DispatchedOffset() == l.mfq.MaxOffset() })
	checkQueues(t, f.cqs, msgs)
	var last int64
	for len(woken) > 0 {
		last = <-woken
	}
	if last != 5 {
		t.Fatalf("last notification for A/0 said max %d, want 5", last)
	}
	f.r.Close()
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
	for i := range n {
		l.append(testMsg("A", 0, i))
		if i%7 == 0 {
			if _, err := f.r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
		t.Fatal(err)
	}
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

// BenchmarkDispatch measures building ConsumeQueue (8 queues) and index
// entries from an already written CommitLog of 1 KiB messages with a
// UNIQ_KEY and two KEYS, on the real file system (page cache). One op is
// one message.
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
			r, err := NewReputService(ReputConfig{ConsumeQueues: cqs, Index: idx, Source: l.mfq})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(l.mfq.MaxOffset() / int64(b.N))
			b.ResetTimer()
			if _, err := r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
				b.Fatal(err)
			}
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
// bytes), then recovers the way the store does: verify units from the
// recovery point, resume dispatching there. The queues must come back
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
			// Checkpoint after dispatching the first 150 messages...
			mid := msgs[150].phy
			if _, err := f.r.DispatchUpTo(mid); err != nil {
				t.Fatal(err)
			}
			if _, err := f.cqs.Flush(); err != nil {
				t.Fatal(err)
			}
			idxTS, err := f.idx.Flush()
			if err != nil {
				t.Fatal(err)
			}
			// ...then dispatch the rest and flush only some of it.
			if _, err := f.r.DispatchUpTo(l.mfq.MaxOffset()); err != nil {
				t.Fatal(err)
			}
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
			start := ReputStartOffset(cqs, idx, l2.mfq.MinOffset(), l2.mfq.MaxOffset(), mid)
			r, err := NewReputService(ReputConfig{ConsumeQueues: cqs, Index: idx, Source: l2.mfq, StartOffset: start})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.DispatchUpTo(l2.mfq.MaxOffset()); err != nil {
				t.Fatal(err)
			}
			checkQueues(t, cqs, msgs)
			for _, i := range []int{0, 149, 150, 399} {
				m := msgs[i]
				got := idx.QueryOffset(m.topic, fmt.Sprintf("U-%s-%d-%d", m.topic, m.q, i), 10, 0, math.MaxInt64)
				if !slices.Equal(got.PhyOffsets, []int64{m.phy}) {
					t.Fatalf("index for message %d: %v, want [%d]", i, got.PhyOffsets, m.phy)
				}
			}
		})
	}
}
