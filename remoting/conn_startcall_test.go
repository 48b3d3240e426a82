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

// blockingExt signals when the encoder reaches the command's extFields and
// holds the encoder there until released.
type blockingExt struct {
	reached chan struct{}
	release chan struct{}
	once    atomic.Bool
}

func (b *blockingExt) AppendExt(w *ExtWriter) {
	if b.once.CompareAndSwap(false, true) {
		close(b.reached)
		<-b.release
	}
	w.String("k", "v")
}

// TestStartCallCloseDuringEncodeDefersCallback: a close that completes a
// callback call while its frame is being encoded (it waited for room in a
// full write queue and the writer just made some) runs the callback only
// once the encoder is done with the request. Callbacks recycle their
// request (the SDK's send pool) or encode the next attempt into it; run
// during the encode, the frame was built from a zeroed request (here: the
// body gone) and the graceful close still wrote it.
func TestStartCallCloseDuringEncodeDefersCallback(t *testing.T) {
	nc, peer := net.Pipe()
	defer peer.Close()
	// Not started: the test plays the writer.
	c := newConn(nc, connOptions{maxFrameSize: 1 << 20, writeQueue: 1}, zap.NewNop(), nil, nil)
	if err := c.sendCmd(context.Background(), time.Time{}, NewRequest(10, nil, nil)); err != nil {
		t.Fatal(err)
	}
	ext := &blockingExt{reached: make(chan struct{}), release: make(chan struct{})}
	req := NewRequest(10, nil, []byte("payload"))
	req.SerializeType = SerializeRocketMQ
	req.ExtAppender = ext
	var calls atomic.Int32
	var cbErr atomic.Value
	ret := make(chan error, 1)
	go func() {
		_, err := c.startCall(context.Background(), req, time.Time{}, func(_ *RemotingCommand, err error) {
			calls.Add(1)
			cbErr.Store(err)
			*req = RemotingCommand{} // what recycling the request does
		})
		ret <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "the call waits for room", func() bool {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		return c.wspace != nil
	})
	c.take(nil) // the writer takes the queued frame: room for the call's
	<-ext.reached
	c.close(nil, true)
	ranDuringEncode := calls.Load() != 0
	close(ext.release)
	if err := <-ret; err != nil {
		t.Fatalf("startCall: %v", err)
	}
	if ranDuringEncode {
		t.Error("the callback ran while the request was still being encoded")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("callback ran %d times, want 1", n)
	}
	if err, _ := cbErr.Load().(error); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("callback got %v, want ErrConnClosed", err)
	}
	frame := c.take(nil)
	if len(frame) < lengthFieldSize {
		t.Fatal("no frame queued")
	}
	got, err := DecodeFrame(frame[lengthFieldSize:])
	if err != nil {
		t.Fatalf("queued frame: %v", err)
	}
	if string(got.Body) != "payload" || got.ExtFields["k"] != "v" {
		t.Fatalf("queued frame has body %q, extFields %v; want the request's", got.Body, got.ExtFields)
	}
}
