package remoting

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestStartCallClosedWhileQueueing: a call whose frame waits for room in
// the write queue when the connection closes has exactly one outcome, the
// close's: startCall reports it started, and its callback runs once.
// Reporting an error as well made callers (SendAsync, InvokeAsync) take a
// second path for the same call.
func TestStartCallClosedWhileQueueing(t *testing.T) {
	nc, peer := net.Pipe()
	defer peer.Close()
	// Not started: no writer drains the queue of one frame.
	c := newConn(nc, connOptions{maxFrameSize: 1 << 20, writeQueue: 1}, zap.NewNop(), nil, nil)
	if err := c.sendCmd(context.Background(), time.Time{}, NewRequest(10, nil, nil)); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var cbErr atomic.Value
	type started struct {
		f   *future
		err error
	}
	ret := make(chan started, 1)
	go func() {
		f, err := c.startCall(context.Background(), NewRequest(10, nil, nil), time.Time{}, func(_ *RemotingCommand, err error) {
			calls.Add(1)
			cbErr.Store(err)
		})
		ret <- started{f, err}
	}()
	testutil.WaitFor(t, 5*time.Second, "the call is pending", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pending) == 1
	})
	c.close(nil, false)
	r := <-ret
	if r.err != nil || r.f == nil {
		t.Fatalf("startCall = %v, %v after the close completed the call; want it started", r.f, r.err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("callback ran %d times, want 1", n)
	}
	if err, _ := cbErr.Load().(error); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("callback got %v, want ErrConnClosed", err)
	}
}
