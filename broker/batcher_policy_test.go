package broker

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// fakeRaft stands in for Group.applyLog in batcher tests: every proposed
// entry is recorded and held until the test releases it (with a result
// per message, like the FSM, or with an error).
type fakeRaft struct {
	t  *testing.T
	mu sync.Mutex
	// entries[i] lists the queue ids of the messages of the i-th entry.
	entries [][]int32
	gates   []chan error
	auto    bool // apply at once from now on
	// sizes are the request counts the batcher reported (observe), which
	// must match what the entries hold.
	sizes []int
}

func (f *fakeRaft) observe(n float64) {
	f.mu.Lock()
	f.sizes = append(f.sizes, int(n))
	f.mu.Unlock()
}

func (f *fakeRaft) apply(l raft.Log) (any, error) {
	var queues []int32
	var results []PutResult
	for off := 0; off < len(l.Data); {
		req, size, err := store.CheckAndDecode(l.Data[off:])
		if err != nil {
			f.t.Errorf("entry data at %d: %v", off, err)
			return nil, err
		}
		queues = append(queues, req.QueueID)
		results = append(results, PutResult{QueueID: req.QueueID, PhysicalOffset: int64(off), QueueOffset: int64(len(results))})
		off += size
	}
	gate := make(chan error, 1)
	f.mu.Lock()
	f.entries = append(f.entries, queues)
	f.gates = append(f.gates, gate)
	if f.auto {
		gate <- nil
	}
	f.mu.Unlock()
	if err := <-gate; err != nil {
		return nil, err
	}
	return &applyResult{results: results}, nil
}

// proposed returns how many entries were handed to the fake so far.
func (f *fakeRaft) proposed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries)
}

// entry returns the queue ids of entry i.
func (f *fakeRaft) entry(i int) []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int32(nil), f.entries[i]...)
}

// release answers entry i (err nil: applied).
func (f *fakeRaft) release(i int, err error) {
	f.mu.Lock()
	g := f.gates[i]
	f.mu.Unlock()
	g <- err
}

// answer is what one request got.
type answer struct {
	results []PutResult
	err     error
}

// submit queues a request of one message for queue q and returns where
// its answer arrives.
func submit(t *testing.T, b *batcher, q int32) <-chan answer {
	t.Helper()
	m := &store.Message{Topic: "T", QueueID: q, Body: []byte(fmt.Sprintf("body-%d", q)), BornTimestamp: 1,
		BornHost: netip.MustParseAddrPort("127.0.0.1:50000"), StoreHost: netip.MustParseAddrPort("127.0.0.1:10911")}
	data, err := wire.AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan answer, 1)
	b.in <- &putRequest{data: data, count: 1, done: func(rs []PutResult, err error) { ch <- answer{rs, err} }}
	return ch
}

func startTestBatcher(t *testing.T, pol batchPolicy) (*batcher, *fakeRaft) {
	f := &fakeRaft{t: t}
	b := startBatcher(pol, f.apply, func(r *PutResult) string { return fmt.Sprintf("id-%d", r.PhysicalOffset) }, f.observe)
	t.Cleanup(func() {
		// Release whatever is still held so the waiters end.
		f.mu.Lock()
		gates := f.gates
		f.mu.Unlock()
		for _, g := range gates {
			select {
			case g <- ErrGroupClosed:
			default:
			}
		}
		b.close()
	})
	return b, f
}

func waitProposed(t *testing.T, f *fakeRaft, n int) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("%d entries proposed", n), func() bool { return f.proposed() >= n })
}

func recv(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5 s")
		return answer{}
	}
}

// testPolicy: a short adaptive wait, so a batch the test cannot complete
// still goes; entries then hold everything queued when the entry in flight
// is answered.
func testPolicy() batchPolicy {
	return batchPolicy{maxBytes: 1 << 20, maxCount: 512, wait: 20 * time.Millisecond}
}

// TestBatcherLoneSender: a closed-loop sender alone is never held for
// company, however long the adaptive wait.
func TestBatcherLoneSender(t *testing.T) {
	pol := testPolicy()
	pol.wait = time.Hour
	b, f := startTestBatcher(t, pol)
	for i := 0; i < 5; i++ {
		a := submit(t, b, int32(i))
		waitProposed(t, f, i+1)
		f.release(i, nil)
		if r := recv(t, a); r.err != nil || r.results[0].QueueID != int32(i) {
			t.Fatalf("request %d got %+v", i, r)
		}
	}
}

// TestBatcherEntriesAndAnswers: requests arriving while an entry is in
// flight share the next entry, proposed once the first is answered; each
// request gets the result of its own message.
func TestBatcherEntriesAndAnswers(t *testing.T) {
	b, f := startTestBatcher(t, testPolicy())
	a1 := submit(t, b, 1)
	waitProposed(t, f, 1)
	var later []<-chan answer
	for q := int32(2); q <= 9; q++ {
		later = append(later, submit(t, b, q)) // the entry is in flight
	}
	f.release(0, nil)
	if a := recv(t, a1); a.err != nil || len(a.results) != 1 || a.results[0].QueueID != 1 || a.results[0].MsgID != "id-0" {
		t.Fatalf("first request got %+v", a)
	}
	waitProposed(t, f, 2)
	if got := fmt.Sprint(f.entry(1)); got != "[2 3 4 5 6 7 8 9]" {
		t.Fatalf("second entry holds queues %v, want the eight that waited for the first", got)
	}
	f.release(1, nil)
	for i, ch := range later {
		a := recv(t, ch)
		if a.err != nil || len(a.results) != 1 || a.results[0].QueueID != int32(2+i) || a.results[0].QueueOffset != int64(i) {
			t.Fatalf("request %d got %+v, want its own message's result", 2+i, a)
		}
	}
	f.mu.Lock()
	if got := fmt.Sprint(f.sizes); got != "[1 8]" {
		t.Errorf("observed entry sizes %s, want [1 8]", got)
	}
	f.mu.Unlock()
}

// TestBatcherFailedEntry: every request of an entry whose apply failed
// gets the error; the batcher goes on proposing the next entries.
func TestBatcherFailedEntry(t *testing.T) {
	b, f := startTestBatcher(t, testPolicy())
	a1 := submit(t, b, 1)
	waitProposed(t, f, 1)
	var held []<-chan answer
	for q := int32(2); q <= 6; q++ {
		held = append(held, submit(t, b, q))
	}
	f.release(0, nil)
	recv(t, a1)
	waitProposed(t, f, 2)
	if got := f.entry(1); len(got) != 5 {
		t.Fatalf("second entry holds %v, want 5 requests", got)
	}
	f.release(1, fmt.Errorf("%w; leader is %q", ErrNotLeader, "127.0.0.1:10921"))
	for i, ch := range held {
		if a := recv(t, ch); !errors.Is(a.err, ErrNotLeader) || a.results != nil {
			t.Fatalf("request %d of the failed entry got %+v, want ErrNotLeader", 2+i, a)
		}
	}
	// The senders retry: the next entries take them.
	f.mu.Lock()
	f.auto = true
	f.mu.Unlock()
	for q := int32(9); q < 14; q++ {
		if r := recv(t, submit(t, b, q)); r.err != nil || r.results[0].QueueID != q {
			t.Fatalf("request after the failure got %+v", r)
		}
	}
}

// TestBatcherApplyError: an entry the FSM could not apply fails every
// request with SERVICE_NOT_AVAILABLE.
func TestBatcherApplyError(t *testing.T) {
	boom := errors.New("queue write failed")
	b := startBatcher(testPolicy(), func(raft.Log) (any, error) { return &applyResult{err: boom}, nil },
		func(*PutResult) string { return "" }, nil)
	defer b.close()
	a := recv(t, submit(t, b, 1))
	if !errors.Is(a.err, store.ErrServiceNotAvailable) || !errors.Is(a.err, boom) {
		t.Fatalf("got %v, want ErrServiceNotAvailable wrapping the apply error", a.err)
	}
}

// TestBatcherCloseFailsQueued: a request gathering at close gets
// ErrGroupClosed, and so does the one in flight when Raft shuts down.
func TestBatcherCloseFailsQueued(t *testing.T) {
	f := &fakeRaft{t: t}
	b := startBatcher(testPolicy(), f.apply, func(*PutResult) string { return "" }, nil)
	a1 := submit(t, b, 1)
	waitProposed(t, f, 1)
	a2 := submit(t, b, 2) // waits for the entry in flight
	closed := make(chan struct{})
	go func() { b.close(); close(closed) }()
	testutil.WaitFor(t, 5*time.Second, "batcher loop ended", func() bool {
		select {
		case <-b.done:
			return true
		default:
			return false
		}
	})
	f.release(0, ErrGroupClosed) // what Raft's shutdown answers
	<-closed
	if a := recv(t, a1); !errors.Is(a.err, ErrGroupClosed) {
		t.Fatalf("in-flight request got %v", a.err)
	}
	if a := recv(t, a2); !errors.Is(a.err, ErrGroupClosed) {
		t.Fatalf("waiting request got %+v, want ErrGroupClosed", a)
	}
	if n := f.proposed(); n != 1 {
		t.Fatalf("%d entries proposed, want 1", n)
	}
}

// TestBatcherLinger: a positive raftBatchLinger holds even a lone request
// (here until the batch is full, the linger being an hour), so later
// requests share its entry.
func TestBatcherLinger(t *testing.T) {
	pol := testPolicy()
	pol.linger = time.Hour
	pol.maxCount = 3
	b, f := startTestBatcher(t, pol)
	f.mu.Lock()
	f.auto = true
	f.mu.Unlock()
	as := []<-chan answer{submit(t, b, 1)}
	testutil.WaitFor(t, 5*time.Second, "first request taken by the batcher", func() bool { return len(b.in) == 0 })
	as = append(as, submit(t, b, 2), submit(t, b, 3))
	for i, ch := range as {
		if a := recv(t, ch); a.err != nil || a.results[0].QueueID != int32(1+i) {
			t.Fatalf("request %d got %+v", 1+i, a)
		}
	}
	if got := fmt.Sprint(f.entry(0)); f.proposed() != 1 || got != "[1 2 3]" {
		t.Fatalf("%d entries, the first holding %s; want one entry [1 2 3]", f.proposed(), got)
	}
}
