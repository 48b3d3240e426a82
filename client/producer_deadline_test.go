package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestProducerExpiredContextSendsNothing: a send whose context's deadline
// has already passed sends nothing and fails with the context's error, on
// SendSync's path and on both of SendAsync's. Sent anyway, the message
// would be stored while its caller is told it failed (and retries it),
// and the group that never saw a late answer would be marked stalled, so
// that other sends avoid a healthy group.
func TestProducerExpiredContextSendsNothing(t *testing.T) {
	_, _, log, p := twoGroups(t)
	// Routes cached and both groups' connections open: SendAsync takes
	// its callback path.
	for i := 0; i < 4; i++ {
		if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("warm"))); err != nil {
			t.Fatal(err)
		}
	}
	before := log.requests()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for i := 0; i < 2; i++ {
		if _, err := p.SendSync(expired, NewMessage("T", []byte("late"))); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SendSync with an expired context: %v, want DeadlineExceeded", err)
		}
		done := make(chan error, 1)
		if err := p.SendAsync(expired, NewMessage("T", []byte("late")), func(_ *SendResult, err error) { done <- err }); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("SendAsync with an expired context: %v", err)
			}
		} else if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SendAsync callback with an expired context: %v, want DeadlineExceeded", err)
		}
	}
	if n := log.requests() - before; n != 0 {
		t.Fatalf("%d requests sent for callers whose deadline had passed", n)
	}
	for _, b := range []string{"broker-a", "broker-b"} {
		if !p.fault.responsive(b) {
			t.Fatalf("%s marked stalled by sends that never reached it", b)
		}
	}
}

// TestSendAsyncCancelledContextSendsNothing: SendAsync called with a
// context already cancelled sends nothing and reports the cancellation,
// as SendSync does: its message was sent (and reported stored) although
// its caller had given up before the call.
func TestSendAsyncCancelledContextSendsNothing(t *testing.T) {
	_, _, log, p := twoGroups(t)
	for i := 0; i < 4; i++ { // routes and connections ready: the callback path is open
		if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("warm"))); err != nil {
			t.Fatal(err)
		}
	}
	before := log.requests()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 2; i++ {
		done := make(chan error, 1)
		if err := p.SendAsync(cancelled, NewMessage("T", []byte("late")), func(_ *SendResult, err error) { done <- err }); err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("SendAsync with a cancelled context: %v", err)
			}
		} else if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("SendAsync callback with a cancelled context: %v, want Canceled", err)
		}
	}
	if n := log.requests() - before; n != 0 {
		t.Fatalf("%d requests sent for callers that had cancelled", n)
	}
}

// TestAutoBatchEndedContextSendsNothing: with AutoBatch, a send whose
// context has already ended sends nothing and fails with the context's
// error, as without it: a cancelled caller's message went out alone
// (its batch ran under the producer's context) and was reported stored.
func TestAutoBatchEndedContextSendsNothing(t *testing.T) {
	_, _, log, p := twoGroupsOf(t, 2, AutoBatch(8, 1<<20, 0))
	if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("warm"))); err != nil {
		t.Fatal(err)
	}
	before := log.requests()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		if _, err := p.SendSync(c.ctx, NewMessage("T", []byte("late"))); !errors.Is(err, c.want) || !errors.Is(err, ErrSendFailed) {
			t.Fatalf("SendSync with an ended context: %v, want %v", err, c.want)
		}
	}
	if n := log.requests() - before; n != 0 {
		t.Fatalf("%d requests sent for callers that had given up", n)
	}
}
