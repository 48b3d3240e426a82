package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAutoBatchEndedSendNotTaken: a waiting send whose caller's context
// ended is not taken into the next batch, even when the batch is made
// before its caller's goroutine noticed: it is failed with the context's
// error instead. Taken, it was stored by the batch while its caller,
// noticing next, reported the send failed (and may send it again). A
// batch left with no send frees its slot.
func TestAutoBatchEndedSendNotTaken(t *testing.T) {
	bg := context.Background()
	mk := func(ctx context.Context, dl time.Time) *autoSend {
		return &autoSend{ctx: ctx, req: &sendRequest{topic: "T", msg: NewMessage("T", []byte("x"))}, size: 10,
			wake: make(chan struct{}, 1), dl: dl}
	}
	later := time.Now().Add(time.Minute)
	a := newAccumulator(autoBatchConfig{maxMessages: 3, maxBytes: 1 << 20, inflight: 1})
	s1 := mk(bg, later)
	if batch, _ := a.enqueue(s1); len(batch) != 1 || batch[0] != s1 {
		t.Fatalf("first send: batch %v", batch)
	}
	cctx, cancel := context.WithCancel(bg)
	s2, s3, s4 := mk(bg, later), mk(cctx, later), mk(bg, time.Now().Add(-time.Millisecond))
	for _, s := range []*autoSend{s2, s3, s4} {
		if batch, linger := a.enqueue(s); batch != nil || linger != 0 {
			t.Fatal("a send took a second slot")
		}
	}
	cancel() // s3's caller gives up; s4's deadline has passed
	a.finish([]*autoSend{s1}, func(int, *autoSend) {})
	if lead, _ := a.work(s2); len(lead) != 1 || lead[0] != s2 {
		t.Fatalf("next batch %v, want s2 alone", lead)
	}
	for want, s := range map[error]*autoSend{context.Canceled: s3, context.DeadlineExceeded: s4} {
		if !a.isDone(s) || !errors.Is(s.err, want) || !errors.Is(s.err, ErrSendFailed) || s.taken {
			t.Fatalf("ended send: done %v taken %v err %v, want %v", s.done, s.taken, s.err, want)
		}
	}
	// Only ended sends wait: the slot goes back.
	cctx2, cancel2 := context.WithCancel(bg)
	s5 := mk(cctx2, later)
	if batch, _ := a.enqueue(s5); batch != nil {
		t.Fatal("s5 took a slot s2 holds")
	}
	cancel2()
	a.finish([]*autoSend{s2}, func(int, *autoSend) {})
	// s5 is handed the slot to linger with; its caller, whose context has
	// ended, lingers no more and takes a batch without it.
	lead, linger := a.work(s5)
	if lead != nil || linger <= 0 {
		t.Fatalf("s5 was handed batch %v, linger %v", lead, linger)
	}
	if batch := a.lingerAndTake(cctx2, s5, linger); len(batch) != 0 {
		t.Fatalf("s5's caller took batch %v", batch)
	}
	if !a.isDone(s5) || !errors.Is(s5.err, context.Canceled) {
		t.Fatalf("s5: done %v, %v", s5.done, s5.err)
	}
	s6 := mk(bg, later)
	if batch, _ := a.enqueue(s6); len(batch) != 1 || batch[0] != s6 {
		t.Fatalf("the slot was not freed: batch %v", batch)
	}
}
