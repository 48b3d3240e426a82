package remoting

import (
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestTaskQueueOrderBoundAndClose: the queue hands tasks out in the order
// they came, across its ring growing and wrapping; it refuses a task past
// its bound and after close, and still hands out what it held at close.
func TestTaskQueueOrderBoundAndClose(t *testing.T) {
	const limit = 100
	q := newTaskQueue(limit)
	next, want := int64(0), int64(0)
	push := func() bool {
		ok := q.push(task{size: next})
		if ok {
			next++
		}
		return ok
	}
	pop := func() {
		t.Helper()
		got, ok := q.pop()
		if !ok || got.size != want {
			t.Fatalf("pop: task %d (ok %v), want %d", got.size, ok, want)
		}
		want++
	}
	// Grow the ring while its head is past 0, so that growth copies a
	// wrapped ring.
	for range 10 {
		if !push() {
			t.Fatal("push refused into an empty queue")
		}
	}
	for range 7 {
		pop()
	}
	for q.len() < limit {
		if !push() {
			t.Fatalf("push refused at %d tasks, bound %d", q.len(), limit)
		}
	}
	if push() {
		t.Fatalf("push accepted past the bound of %d", limit)
	}
	for range 50 {
		pop()
	}
	for range 50 {
		if !push() {
			t.Fatal("push refused below the bound")
		}
	}
	q.close()
	if push() {
		t.Fatal("push accepted after close")
	}
	for q.len() > 0 {
		pop()
	}
	if got, ok := q.pop(); ok {
		t.Fatalf("pop after close and drain: task %d", got.size)
	}
	if want != next {
		t.Fatalf("popped %d tasks, pushed %d", want, next)
	}
}

// TestTaskQueueWorkersTakeEachTaskOnce: with several pushers and waiting
// poppers, every task accepted is taken exactly once, and close releases
// the poppers.
func TestTaskQueueWorkersTakeEachTaskOnce(t *testing.T) {
	q := newTaskQueue(1 << 20)
	const pushers, each = 4, 2000
	var mu sync.Mutex
	seen := map[int64]int{}
	var workers sync.WaitGroup
	for range 3 {
		workers.Go(func() {
			for {
				tk, ok := q.pop()
				if !ok {
					return
				}
				mu.Lock()
				seen[tk.size]++
				mu.Unlock()
			}
		})
	}
	var producers sync.WaitGroup
	for p := range pushers {
		producers.Go(func() {
			for i := range each {
				if !q.push(task{size: int64(p*each + i)}) {
					t.Errorf("push %d refused", p*each+i)
				}
			}
		})
	}
	producers.Wait()
	// Every task is taken before close, whose broadcast would also wake a
	// worker a lost signal left waiting.
	testutil.WaitFor(t, 10*time.Second, "the workers took every task", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == pushers*each
	})
	q.close()
	workers.Wait()
	if len(seen) != pushers*each {
		t.Fatalf("%d distinct tasks taken, want %d", len(seen), pushers*each)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("task %d taken %d times", k, n)
		}
	}
}

// TestTaskQueueBoundExcludesWhatAnIdleWorkerTakes: as with a channel, whose
// send hands a value straight to a waiting receiver, a task an idle worker
// is about to take does not count against the bound. With one idle worker
// and a bound of one, two tasks in quick succession are both accepted (one
// for the worker, one waiting), a third is refused; once the worker holds
// its task, one waits and no other fits.
func TestTaskQueueBoundExcludesWhatAnIdleWorkerTakes(t *testing.T) {
	q := newTaskQueue(1)
	idle := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.idle
	}
	took, release := make(chan task, 1), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk, _ := q.pop()
		took <- tk
		<-release
	}()
	testutil.WaitFor(t, 5*time.Second, "the worker waiting in pop", func() bool { return idle() == 1 })
	if !q.push(task{size: 1}) || !q.push(task{size: 2}) {
		t.Fatal("a task for the idle worker and one waiting behind it: refused")
	}
	if q.push(task{size: 3}) {
		t.Fatal("a third task accepted with the worker's and the bound's places taken")
	}
	if tk := <-took; tk.size != 1 {
		t.Fatalf("the worker took task %d, want 1", tk.size)
	}
	if q.push(task{size: 4}) || q.len() != 1 {
		t.Fatalf("with the worker busy: a push accepted or %d tasks queued, want refused and 1", q.len())
	}
	close(release)
	<-done
	q.close()
}
