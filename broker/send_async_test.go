package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
)

// TestPutMessagesAsync: the asynchronous put answers every request exactly
// once with its own results, from the entry's completion; rejections
// (follower, empty request) are answered before the call returns.
func TestPutMessagesAsync(t *testing.T) {
	c := newTestCluster(t, clusterOpts{sync: true})
	c.createTopic("T", 4)
	l := c.leader()

	const n = 48
	type answer struct {
		res []PutResult
		err error
	}
	answers := make([]chan answer, n)
	var calls atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		answers[i] = make(chan answer, 2)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			msgs := []*store.Message{testMessage("T", int32(i%4), "", "", 0, 64)}
			if i%3 == 0 { // some two-message requests
				msgs = append(msgs, testMessage("T", int32(i%4), "", "", 0, 64))
			}
			l.g().PutMessagesAsync(context.Background(), msgs, func(res []PutResult, err error) {
				calls.Add(1)
				answers[i] <- answer{res, err}
			})
		}(i)
	}
	wg.Wait()
	seen := map[[2]int64]bool{}
	for i := 0; i < n; i++ {
		var a answer
		select {
		case a = <-answers[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d never answered", i)
		}
		want := 1
		if i%3 == 0 {
			want = 2
		}
		if a.err != nil || len(a.res) != want {
			t.Fatalf("request %d: %d results, err %v; want %d results", i, len(a.res), a.err, want)
		}
		for _, r := range a.res {
			k := [2]int64{int64(r.QueueID), r.QueueOffset}
			if r.QueueID != int32(i%4) || seen[k] || r.MsgID == "" {
				t.Fatalf("request %d: result %+v (queue %d expected, offsets unique, msgId set)", i, r, i%4)
			}
			seen[k] = true
		}
	}
	if got := calls.Load(); got != n {
		t.Fatalf("done called %d times for %d requests", got, n)
	}

	// Rejections are immediate: done has run when the call returns.
	var follower *testNode
	for _, nd := range c.nodes {
		if nd != l {
			follower = nd
			break
		}
	}
	ran := false
	follower.g().PutMessagesAsync(context.Background(), []*store.Message{testMessage("T", 0, "", "", 0, 8)},
		func(_ []PutResult, err error) {
			ran = true
			if !errors.Is(err, ErrNotLeader) {
				t.Errorf("follower put: %v, want ErrNotLeader", err)
			}
		})
	if !ran {
		t.Fatal("follower rejection not answered before return")
	}
	ran = false
	l.g().PutMessagesAsync(context.Background(), nil, func(res []PutResult, err error) {
		ran = res == nil && err == nil
	})
	if !ran {
		t.Fatal("empty request not answered (nil, nil) before return")
	}
}
