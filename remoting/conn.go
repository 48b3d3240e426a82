package remoting

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// connOptions are the per-connection limits shared by server and client.
type connOptions struct {
	maxFrameSize int
	// idleTimeout closes a connection on which no byte arrived for this
	// long; 0 disables it.
	idleTimeout time.Duration
	// frameTimeout bounds receiving the rest of a frame once its first
	// byte arrived, so a half-sent frame cannot pin the connection.
	frameTimeout time.Duration
	// writeTimeout bounds one flush to the socket; a peer that stops
	// reading gets its connection closed instead of blocking workers.
	writeTimeout time.Duration
	// writeQueue is the number of encoded frames waiting for the writer.
	writeQueue int
	// writeQueueBytes, when set (servers), also bounds the bytes waiting
	// for the writer; a frame is queued while fewer are waiting.
	writeQueueBytes int
	// stalls, when set (servers), counts connections closed because the
	// peer did not read (a flush or an answer's wait for room timed out).
	stalls *atomic.Int64
	// frameTimeouts, when set (servers), counts connections closed
	// because a started frame was not complete within frameTimeout.
	frameTimeouts *atomic.Int64
	// budget, when set (servers), bounds the memory held by the
	// incomplete large frames of all the server's connections.
	budget *frameBudget
	// closeSilentAfter, when set (clients), closes the connection when a
	// call that waited at least this long times out and not one byte
	// arrived since it was written (see Conn.timedOut).
	closeSilentAfter time.Duration
}

// frameBudget is a server's bound on the bytes held by frames still
// arriving. A frame's buffer grows as its bytes arrive (readLarge), and
// each growth is reserved here first: a connection whose growth does not
// fit is closed, so peers that claim large frames and send them slowly
// cannot make the server hold more than limit between them.
type frameBudget struct {
	limit   int64
	used    atomic.Int64
	refused atomic.Int64 // connections closed because a growth did not fit
}

func (b *frameBudget) reserve(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		b.refused.Add(1)
		return false
	}
	return true
}

func (b *frameBudget) release(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// future is one request waiting for its response (RocketMQ's
// ResponseFuture). Completed exactly once by the reader (response), the
// sweeper (timeout), the connection closing, or the caller giving up.
type future struct {
	opaque    int32
	code      int16
	deadline  time.Time // zero: no sweep deadline
	done      chan struct{}
	completed atomic.Bool
	resp      *RemotingCommand
	err       error
	// lazy: decode the response with its extFields left raw
	// (RemotingCommand.LazyResponseExt).
	lazy bool
	// cb, when set, runs on the goroutine that completes the future
	// (reader, sweeper or closer): it must not block.
	cb func(*RemotingCommand, error)
	// send says whether startCall is still queueing the request (and so
	// encoding it: a frame waiting for room is encoded once room appears).
	// A close, FailAsyncCalls or a timeout can complete the future then;
	// cb must not run before the encoder is done with the request, which
	// cb's owner may recycle or encode its next attempt into, so that
	// completer leaves cb to startCall.
	send atomic.Int32
	// received is the connection's read count when the call was
	// registered, and sentAt the time (only with closeSilentAfter): a
	// timeout with the count unchanged means nothing came back since.
	received uint64
	sentAt   time.Time
}

func (f *future) complete(resp *RemotingCommand, err error) {
	// A CAS, not a sync.Once: later completers need not wait for the
	// first (waiters read resp/err only after done is closed), and the
	// reader completes one future per answer.
	if !f.completed.CompareAndSwap(false, true) {
		return
	}
	f.resp, f.err = resp, err
	if f.done != nil {
		close(f.done)
	}
	if f.cb != nil && !f.send.CompareAndSwap(sendQueueing, sendCompletedWhileQueueing) {
		f.cb(resp, err)
	}
}

// future.send states.
const (
	sendQueueing int32 = iota
	sendQueued
	sendCompletedWhileQueueing
)

// queued marks f's request as no longer used by its connection and runs
// the callback of a completion that came while it was (see future.send).
func (f *future) queued() {
	if f.cb != nil && !f.send.CompareAndSwap(sendQueueing, sendQueued) {
		f.cb(f.resp, f.err)
	}
}

// Conn is one remoting connection: an accepted connection on a Server, or
// a dialed connection of a Client. Requests can flow both ways on it (the
// broker calls clients on their own connection). One goroutine reads, one
// goroutine writes; responses may leave in any order and are matched by
// opaque.
type Conn struct {
	id     uint64
	nc     net.Conn
	remote string
	// remoteAP is remote parsed (IPv4-mapped addresses unmapped), the
	// zero value if it is not an ip:port; a send stores it in every
	// message as BORNHOST.
	remoteAP netip.AddrPort
	local    string
	log      *zap.Logger
	opts     connOptions

	// handleRequest receives every request read from the peer. It runs on
	// the reader goroutine and must only enqueue work.
	// size is the request's frame length.
	handleRequest func(c *Conn, req *RemotingCommand, size int)
	// onClosed runs once, after the connection is marked closed.
	onClosed func(c *Conn)
	// lazyRequest, when set (servers), says which request codes are
	// decoded with their extFields left raw (AsyncOptions.LazyExt).
	lazyRequest func(code int16) bool

	// ctx is cancelled when the connection closes; handlers get it.
	ctx    context.Context
	cancel context.CancelFunc

	// Frames waiting for the writer are appended to one buffer (wbuf)
	// instead of a channel of frames: a burst of answers (one Raft
	// entry's) or of concurrent requests lands in one buffer, costs one
	// writer wake-up and one write system call, and no per-frame hand-off.
	wmu     sync.Mutex
	wbuf    []byte        // guarded by wmu: encoded frames, in order
	wframes int           // guarded by wmu: frames in wbuf (bounded by opts.writeQueue)
	wspace  chan struct{} // guarded by wmu: closed when the writer takes wbuf (senders waiting for room)
	wkick   chan struct{} // cap 1: wbuf became non-empty

	quit       chan struct{} // closed by close(); stops the writer
	readerDone chan struct{}
	// readers, when set (servers), counts this reader until it exits, so
	// Shutdown can wait for the readers of connections that already
	// closed on their own: they may still be dispatching a request.
	readers    *sync.WaitGroup
	writerDone chan struct{}
	stopRead   atomic.Bool // set by a draining server: reader exits quietly
	closeOnce  sync.Once
	// received counts the socket reads that returned bytes: the reader
	// bumps it, a timed-out call compares it with its own snapshot.
	received atomic.Uint64

	mu      sync.Mutex
	pending map[int32]*future // guarded by mu
	closed  bool              // guarded by mu
}

var connSeq atomic.Uint64

func newConn(nc net.Conn, opts connOptions, log *zap.Logger,
	handle func(*Conn, *RemotingCommand, int), onClosed func(*Conn)) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		id:            connSeq.Add(1),
		nc:            nc,
		remote:        nc.RemoteAddr().String(),
		local:         nc.LocalAddr().String(),
		opts:          opts,
		handleRequest: handle,
		onClosed:      onClosed,
		ctx:           ctx,
		cancel:        cancel,
		wkick:         make(chan struct{}, 1),
		quit:          make(chan struct{}),
		readerDone:    make(chan struct{}),
		writerDone:    make(chan struct{}),
		pending:       make(map[int32]*future),
	}
	if ap, err := netip.ParseAddrPort(c.remote); err == nil {
		c.remoteAP = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	c.log = log.With(zap.String("remote", c.remote), zap.Uint64("conn", c.id))
	return c
}

// start launches the reader and writer; wg tracks both so the owner's
// Close/Shutdown can wait for them.
func (c *Conn) start(wg *sync.WaitGroup) {
	wg.Add(2)
	go func() { defer wg.Done(); c.readLoop() }()
	go func() { defer wg.Done(); c.writeLoop() }()
}

// RemoteAddr returns the peer's "ip:port".
func (c *Conn) RemoteAddr() string { return c.remote }

// RemoteAddrPort returns the peer's address parsed, an IPv4-mapped IPv6
// address unmapped; not IsValid if RemoteAddr is not an ip:port.
func (c *Conn) RemoteAddrPort() netip.AddrPort { return c.remoteAP }

// LocalAddr returns our side's "ip:port".
func (c *Conn) LocalAddr() string { return c.local }

// ID returns a process-unique connection id, handy as a map key.
func (c *Conn) ID() uint64 { return c.id }

// Context is cancelled when the connection closes, so handlers that hold a
// request (long polling) can give up early.
func (c *Conn) Context() context.Context { return c.ctx }

// Closed reports whether the connection has been closed.
func (c *Conn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close closes the connection gracefully: frames already queued are
// flushed (bounded by the write timeout), pending calls fail with
// ErrConnClosed at once.
func (c *Conn) Close() error {
	c.close(nil, true)
	return nil
}

// close marks the connection closed once and reports whether this call
// did. cause nil means a deliberate close; graceful lets the writer flush
// what is queued before the socket closes, otherwise the socket closes
// immediately.
func (c *Conn) close(cause error, graceful bool) (closed bool) {
	c.closeOnce.Do(func() {
		closed = true
		c.mu.Lock()
		c.closed = true
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()

		c.cancel()
		close(c.quit)
		if !graceful {
			_ = c.nc.Close()
		}
		err := ErrConnClosed
		if cause != nil {
			err = fmt.Errorf("%w: %v", ErrConnClosed, cause)
		}
		for _, f := range pending {
			f.complete(nil, err)
		}
		if c.onClosed != nil {
			c.onClosed(c)
		}
	})
	return closed
}

// stopReading makes the reader exit without closing the connection, so a
// draining server takes no new requests but can still write responses.
func (c *Conn) stopReading() {
	c.stopRead.Store(true)
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
}

// readLoop reads frames until the connection fails. Every protocol
// violation closes the connection with exactly one Warn line naming why.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	if c.readers != nil {
		defer c.readers.Done()
	}
	br := bufio.NewReaderSize(countingReader{c}, 32<<10)
	var lenBuf [lengthFieldSize]byte
	var scratch []byte
	for {
		if wholeFrameBuffered(br) {
			// No read below can block, so no deadline is needed: after a
			// burst (one Raft entry's answers, many clients' requests)
			// most frames are whole in the buffer, and each deadline
			// change costs clock reads and a runtime timer update.
			if c.stopRead.Load() {
				return
			}
		} else {
			// Phase 1: wait for the first byte of the next frame (idle timer).
			var d time.Time
			if c.opts.idleTimeout > 0 {
				d = time.Now().Add(c.opts.idleTimeout)
			}
			_ = c.nc.SetReadDeadline(d)
			if c.stopRead.Load() { // checked after the deadline write; see stopReading
				return
			}
			if _, err := br.Peek(1); err != nil {
				c.readFailed(err, true)
				return
			}
			// Phase 2: the frame has started; the rest must arrive promptly.
			if c.opts.frameTimeout > 0 {
				_ = c.nc.SetReadDeadline(time.Now().Add(c.opts.frameTimeout))
				if c.stopRead.Load() {
					return
				}
			}
		}
		if _, err := io.ReadFull(br, lenBuf[:]); err != nil {
			c.readFailed(err, false)
			return
		}
		n := int64(int32(binary.BigEndian.Uint32(lenBuf[:])))
		if n < 4 {
			c.protocolError(fmt.Errorf("%w: frame length %d below minimum 4", ErrInvalidFrame, n))
			return
		}
		if n > int64(c.opts.maxFrameSize) {
			c.protocolError(fmt.Errorf("%w: frame length %d exceeds max %d", ErrFrameTooLarge, n, c.opts.maxFrameSize))
			return
		}
		// Frames up to scratchFrameMax are read into one reused buffer:
		// decoding copies every header string, so only a body must be
		// copied out (a send answer has none; a request's 1 KiB body is
		// one allocation of its own size instead of the frame's).
		var frame []byte
		if n <= scratchFrameMax {
			if int64(cap(scratch)) < n {
				scratch = make([]byte, max(n, 4<<10))
			}
			frame = scratch[:n]
			if _, err := io.ReadFull(br, frame); err != nil {
				c.readFailed(err, false)
				return
			}
		} else if c.opts.budget == nil {
			// A client's peer is a server it chose to dial: its large
			// answers (pulls) are read in one allocation.
			frame = make([]byte, n)
			if _, err := io.ReadFull(br, frame); err != nil {
				c.readFailed(err, false)
				return
			}
		} else if frame = c.readLarge(br, int(n)); frame == nil {
			return
		}
		var f *future // the response's call, taken from pending by pick
		cmd, err := decodeFrame(frame, func(h *RemotingCommand) bool {
			if !h.IsResponse() {
				return c.lazyRequest != nil && c.lazyRequest(h.Code)
			}
			f = c.takePending(h.Opaque)
			return f != nil && f.lazy
		})
		if rh, ok := err.(*refusedHeader); ok && !rh.cmd.IsResponse() {
			// The frame is whole and its fixed fields are known: answer
			// it and read on, as a handler answers a bad custom header.
			c.log.Debug("request header refused", zap.Int16("code", rh.cmd.Code), zap.Error(err))
			_ = c.WriteResponse(rh.cmd, NewResponse(ResponseSystemError,
				fmt.Sprintf("bad request header for code %d: %v", rh.cmd.Code, err)))
			continue
		}
		if err != nil {
			if f != nil {
				f.complete(nil, fmt.Errorf("%w: %v", ErrConnClosed, err))
			}
			c.protocolError(err)
			return
		}
		if n <= scratchFrameMax && len(cmd.Body) > 0 {
			cmd.Body = bytes.Clone(cmd.Body)
		}
		if !cmd.IsResponse() {
			if cmd.wideCode != 0 {
				c.log.Debug("request code not supported", zap.Int32("code", cmd.wideCode))
				_ = c.WriteResponse(cmd, notSupportedResponse(cmd.wideCode))
				continue
			}
			c.handleRequest(c, cmd, int(n))
			continue
		}
		if f == nil {
			// RocketMQ peers answer requests we already gave up on; drop.
			c.log.Debug("response for unknown opaque dropped", zap.Int32("opaque", cmd.Opaque), zap.Int16("code", cmd.Code))
			continue
		}
		f.complete(cmd, nil)
	}
}

// countingReader reads the connection's socket and counts the reads that
// returned bytes, partial frames included: a large answer still arriving
// shows the connection alive.
type countingReader struct{ c *Conn }

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	if n > 0 {
		r.c.received.Add(1)
	}
	return n, err
}

// wholeFrameBuffered reports whether br holds the next frame entirely.
func wholeFrameBuffered(br *bufio.Reader) bool {
	b := br.Buffered()
	if b < lengthFieldSize {
		return false
	}
	head, _ := br.Peek(lengthFieldSize)
	n := int64(int32(binary.BigEndian.Uint32(head)))
	return n >= 0 && int64(b)-lengthFieldSize >= n
}

// readLarge reads a frame of n bytes (n > scratchFrameMax) into a buffer
// that grows as the bytes arrive, fourfold each time it fills: a peer
// that claims a large frame and stops sending holds at most four times
// what it sent, not the claimed size (fourfold rather than doubling: a
// large frame that does arrive costs a third more allocation, not twice).
// Each growth is reserved in the server's incomplete-frame budget until
// the frame is whole. nil means the connection failed (and is closed).
func (c *Conn) readLarge(br *bufio.Reader, n int) []byte {
	budget := c.opts.budget
	var reserved int64
	defer func() { budget.release(reserved) }()
	var buf []byte
	for len(buf) < n {
		if len(buf) == cap(buf) {
			// The first step is what already arrived (at least 4 KiB).
			next := min(n, max(4*cap(buf), br.Buffered(), 4<<10))
			if !budget.reserve(int64(next - cap(buf))) {
				c.log.Warn("closing connection: incomplete frames over the server's budget",
					zap.Int("frame_bytes", n), zap.Int("received", len(buf)),
					zap.Int64("budget", budget.limit), zap.String("key", "maxIncompleteFrameBytes"))
				c.close(fmt.Errorf("%w: incomplete frames over the server budget of %d bytes", ErrFrameTooLarge, budget.limit), false)
				return nil
			}
			reserved += int64(next - cap(buf))
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(br, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			c.readFailed(err, false)
			return nil
		}
	}
	return buf
}

// scratchFrameMax bounds the frames read into a connection's reused
// buffer; larger ones (pull answers) get their own, which the body aliases.
const scratchFrameMax = 64 << 10

// takePending removes and returns the call waiting for opaque, or nil.
func (c *Conn) takePending(opaque int32) *future {
	c.mu.Lock()
	f := c.pending[opaque]
	delete(c.pending, opaque)
	c.mu.Unlock()
	return f
}

func (c *Conn) protocolError(err error) {
	c.log.Warn("closing connection: bad frame", zap.String("reason", err.Error()))
	c.close(err, false)
}

// readFailed classifies a read error. atBoundary is true when no byte of
// the next frame had arrived yet.
func (c *Conn) readFailed(err error, atBoundary bool) {
	if c.stopRead.Load() || c.Closed() {
		return // we are closing or draining: not the peer's fault
	}
	timeout := errors.Is(err, os.ErrDeadlineExceeded)
	switch {
	case atBoundary && timeout:
		c.log.Info("closing idle connection", zap.Duration("idle", c.opts.idleTimeout))
	case atBoundary && errors.Is(err, io.EOF):
		c.log.Debug("peer closed connection")
	case timeout:
		if c.opts.frameTimeouts != nil {
			c.opts.frameTimeouts.Add(1)
		}
		c.log.Warn("closing connection: incomplete frame, read timed out",
			zap.String("reason", "half-sent frame"), zap.Duration("timeout", c.opts.frameTimeout))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Warn("closing connection: peer closed mid-frame", zap.String("reason", "truncated frame"))
	default:
		c.log.Info("closing connection: read error", zap.Error(err))
	}
	c.close(err, false)
}

// writeLoop owns the socket's write side: it takes everything queued in
// wbuf and writes it with one system call. On quit it writes what is
// queued (bounded by the write timeout), then closes the socket.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	var spare []byte  // the buffer the writer owns between takes
	var wdl time.Time // the write deadline last set
	// Large buffers of a connection that goes idle are dropped after
	// idleTrimDelay, not at once: a pipelining peer leaves the queue
	// empty between most writes, and regrowing the buffer each time
	// costs more than the write.
	var trim *time.Timer
	var trimC <-chan time.Time // nil while no trim is pending
	defer func() {
		if trim != nil {
			trim.Stop()
		}
	}()
	for {
		select {
		case <-trimC:
			trimC = nil
			if c.trimIdle() && cap(spare) > maxIdleWriteBuffer {
				spare = nil
			}
		case <-c.wkick:
			c.gather()
			buf := c.take(spare)
			if len(buf) == 0 {
				spare = buf // a stale kick: buf is detached and ours
				continue
			}
			if c.opts.writeTimeout > 0 {
				// Moving the deadline is a runtime timer update per
				// write; one set less than a tenth of writeTimeout ago
				// still gives this write ≥ 90 % of it.
				if d := time.Now().Add(c.opts.writeTimeout); d.Sub(wdl) > c.opts.writeTimeout/10 {
					_ = c.nc.SetWriteDeadline(d)
					wdl = d
				}
			}
			if _, err := c.nc.Write(buf); err != nil {
				if !c.Closed() {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						c.stalled("flush blocked", len(buf))
					} else {
						c.log.Info("closing connection: write failed", zap.Error(err))
					}
				}
				c.close(err, false)
				_ = c.nc.Close()
				return
			}
			spare = buf[:0]
			if cap(spare) > maxSpareWriteBuffer {
				spare = nil // a huge frame went out: do not keep its buffer
			}
			if trimC == nil && (cap(spare) > maxIdleWriteBuffer || c.queueCap() > maxIdleWriteBuffer) {
				if trim == nil {
					trim = time.NewTimer(idleTrimDelay)
				} else {
					trim.Reset(idleTrimDelay)
				}
				trimC = trim.C
			}
		case <-c.quit:
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.writeTimeout))
			if buf := c.take(nil); len(buf) > 0 {
				_, _ = c.nc.Write(buf)
			}
			_ = c.nc.Close()
			return
		}
	}
}

// gather lets goroutines that are runnable right now queue their frames
// before the write: answers of one Raft entry (or a burst of client
// requests) are made ready together but encoded one after another, and
// without the yield the writer writes after the first few, paying a write
// per frame on this side and a read wake-up per frame on the peer. Gosched
// returns at once when nothing else is runnable; the bound keeps a steady
// trickle from starving the write.
func (c *Conn) gather() {
	for i := 0; i < maxWriteYields; i++ {
		c.wmu.Lock()
		n, size := c.wframes, len(c.wbuf)
		c.wmu.Unlock()
		if size >= writeGatherBytes {
			return
		}
		runtime.Gosched()
		c.wmu.Lock()
		grew := c.wframes != n
		c.wmu.Unlock()
		if !grew {
			return
		}
	}
}

// take swaps the queued frames out for spare (emptied) and wakes senders
// waiting for room.
func (c *Conn) take(spare []byte) []byte {
	c.wmu.Lock()
	buf := c.wbuf
	c.wbuf, c.wframes = spare[:0], 0
	if c.wspace != nil {
		close(c.wspace)
		c.wspace = nil
	}
	c.wmu.Unlock()
	return buf
}

// queueCap is the capacity of the queue's buffer.
func (c *Conn) queueCap() int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return cap(c.wbuf)
}

// trimIdle reports whether nothing waits for the writer, and then drops
// the queue's buffer if it is large: a large buffer is reused only while
// answers keep coming. Kept by an idle connection, two per connection up
// to maxSpareWriteBuffer each, a client asking each of thousands of
// connections once for a large answer made the server hold gigabytes.
func (c *Conn) trimIdle() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wframes > 0 {
		return false
	}
	if cap(c.wbuf) > maxIdleWriteBuffer {
		c.wbuf = nil
	}
	return true
}

const (
	// maxIdleWriteBuffer caps the buffers a connection keeps once
	// nothing waits to be written (trimIdle).
	maxIdleWriteBuffer = 64 << 10
	// idleTrimDelay is how long after a write with large buffers the
	// writer drops them if nothing is queued then.
	idleTrimDelay = 500 * time.Millisecond
	// maxWriteYields bounds the Gosched calls before one write.
	maxWriteYields = 4
	// writeGatherBytes: with this much queued, write without yielding.
	writeGatherBytes = 32 << 10
	// maxSpareWriteBuffer caps the buffer the writer keeps for reuse.
	maxSpareWriteBuffer = 4 << 20
)

// send queues an encoded frame for the writer.
func (c *Conn) send(ctx context.Context, frame []byte) error {
	return c.enqueue(ctx, time.Time{}, func(b []byte) ([]byte, error) { return append(b, frame...), nil })
}

// sendCmd encodes cmd straight into the write buffer (no frame-sized
// allocation and copy per command). deadline, when set, also bounds a
// wait for room.
func (c *Conn) sendCmd(ctx context.Context, deadline time.Time, cmd *RemotingCommand) error {
	return c.enqueue(ctx, deadline, func(b []byte) ([]byte, error) { return AppendFrame(growFor(b, len(cmd.Body)), cmd) })
}

// growFor makes room in the write buffer for a frame with a body of
// bodyLen bytes, at least doubling it: append grows a large slice by a
// quarter, and a queue of large answers (pulls) then copies its whole
// content several times over on the way up to the write-queue bound.
func growFor(b []byte, bodyLen int) []byte {
	need := bodyLen + 1024 // header room; AppendFrame still grows if short
	if cap(b)-len(b) >= need || bodyLen < 64<<10 {
		return b
	}
	grown := make([]byte, len(b), max(2*cap(b), len(b)+need))
	copy(grown, b)
	return grown
}

// enqueue appends one frame to the write buffer with appendFrame (which
// returns the grown buffer, or an error and nothing appended), waiting
// while opts.writeQueue frames are queued, until ctx ends or deadline
// (zero: none) passes. The frame is bounded by maxFrameSize.
func (c *Conn) enqueue(ctx context.Context, deadline time.Time, appendFrame func([]byte) ([]byte, error)) error {
	var expired <-chan time.Time
	for {
		select {
		case <-c.quit:
			return ErrConnClosed
		default:
		}
		c.wmu.Lock()
		if c.wframes < c.opts.writeQueue && (c.opts.writeQueueBytes <= 0 || len(c.wbuf) < c.opts.writeQueueBytes) {
			before := len(c.wbuf)
			b, err := appendFrame(c.wbuf)
			if err == nil && len(b)-before-lengthFieldSize > c.opts.maxFrameSize {
				err = fmt.Errorf("%w: %d bytes, max %d", ErrFrameTooLarge, len(b)-before-lengthFieldSize, c.opts.maxFrameSize)
			}
			if err != nil {
				if b != nil {
					c.wbuf = b[:before] // keep the grown buffer, drop the frame
				}
				c.wmu.Unlock()
				return err
			}
			c.wbuf = b
			c.wframes++
			first := c.wframes == 1
			c.wmu.Unlock()
			if first {
				select {
				case c.wkick <- struct{}{}:
				default:
				}
			}
			return nil
		}
		if c.wspace == nil {
			c.wspace = make(chan struct{})
		}
		room := c.wspace
		c.wmu.Unlock()
		if expired == nil && !deadline.IsZero() {
			t := getTimer(time.Until(deadline))
			defer putTimer(t)
			expired = t.C
		}
		select {
		case <-room:
		case <-c.quit:
			return ErrConnClosed
		case <-ctx.Done():
			return ctxError(ctx, "queueing request")
		case <-expired:
			return fmt.Errorf("%w: queueing request", ErrTimeout)
		}
	}
}

// timerPool recycles the timers that bound sync calls: one per call
// otherwise (Go ≥ 1.23 timers: after Stop, a Reset timer delivers no
// stale tick).
var timerPool sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timerPool.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timerPool.Put(t)
}

// ctxError maps a finished context to ErrTimeout (deadline) or its own
// error (cancellation).
func ctxError(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s", ErrTimeout, what)
	}
	return fmt.Errorf("remoting: %s: %w", what, ctx.Err())
}

// startCall registers a future for req and queues the frame. req.Opaque is
// kept unless a call with the same opaque is already pending here. An
// error means f was never completed and never will be; a call that a
// close completed while its frame waited for room is returned as started.
func (c *Conn) startCall(ctx context.Context, req *RemotingCommand, deadline time.Time,
	cb func(*RemotingCommand, error)) (*future, error) {
	// A request sent for a caller that has given up would still be applied
	// by the server while the caller reports a failure.
	if ctx.Err() != nil {
		return nil, ctxError(ctx, fmt.Sprintf("code %d to %s", req.Code, c.remote))
	}
	req.Flag &^= FlagResponse | FlagOneway
	f := &future{code: req.Code, deadline: deadline, cb: cb, lazy: req.LazyResponseExt}
	if cb == nil {
		f.done = make(chan struct{}) // only a waiting caller reads it
	}
	if c.opts.closeSilentAfter > 0 {
		f.sentAt = time.Now()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrConnClosed
	}
	f.received = c.received.Load()
	for {
		if _, busy := c.pending[req.Opaque]; !busy {
			break
		}
		req.Opaque = nextOpaque()
	}
	f.opaque = req.Opaque
	c.pending[f.opaque] = f
	c.mu.Unlock()

	if err := c.sendCmd(ctx, deadline, req); err != nil {
		c.mu.Lock()
		mine := c.pending[f.opaque] == f
		if mine {
			delete(c.pending, f.opaque)
		}
		c.mu.Unlock()
		if mine {
			return nil, err
		}
		// A close (or FailAsyncCalls, or the sweep) took the entry while
		// the frame waited: it completes f, so f's outcome is that one and
		// the caller must not also treat the call as not sent.
	}
	f.queued()
	return f, nil
}

// dropPending removes f from pending and reports whether it was still
// there (a response, the sweep or a close may have taken it, and its
// opaque may belong to a newer call by now).
func (c *Conn) dropPending(f *future) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[f.opaque] != f {
		return false
	}
	delete(c.pending, f.opaque)
	return true
}

// InvokeSync sends req on this connection and waits for its response
// until ctx ends (ErrTimeout on deadline) or the connection closes
// (ErrConnClosed). Used by servers to call clients.
func (c *Conn) InvokeSync(ctx context.Context, req *RemotingCommand) (*RemotingCommand, error) {
	return c.invokeSync(ctx, req, time.Time{})
}

// invokeSync is InvokeSync bounded also by deadline (zero: only ctx),
// waited for with a pooled timer instead of a context per call.
func (c *Conn) invokeSync(ctx context.Context, req *RemotingCommand, deadline time.Time) (*RemotingCommand, error) {
	sweepAt := deadline
	if d, ok := ctx.Deadline(); ok && (sweepAt.IsZero() || d.Before(sweepAt)) {
		sweepAt = d
	}
	f, err := c.startCall(ctx, req, sweepAt, nil)
	if err != nil {
		return nil, err
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := getTimer(time.Until(deadline))
		defer putTimer(t)
		expired = t.C
	}
	select {
	case <-f.done:
		return f.resp, f.err
	case <-ctx.Done():
		if c.dropPending(f) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.timedOut(f)
		}
		return nil, ctxError(ctx, fmt.Sprintf("code %d to %s", req.Code, c.remote))
	case <-expired:
		if c.dropPending(f) {
			c.timedOut(f)
		}
		return nil, fmt.Errorf("%w: code %d to %s", ErrTimeout, req.Code, c.remote)
	}
}

// InvokeOneway sends req with the oneway flag; the peer sends no response.
func (c *Conn) InvokeOneway(ctx context.Context, req *RemotingCommand) error {
	req.Flag = (req.Flag &^ FlagResponse) | FlagOneway
	return c.sendCmd(ctx, time.Time{}, req)
}

// WriteResponse answers req with resp on this connection: resp gets the
// request's opaque and serialize type and the response flag. Handlers that
// hold a request (long polling) return (nil, nil) and call this later.
// Responses to oneway requests are dropped.
func (c *Conn) WriteResponse(req, resp *RemotingCommand) error {
	if req.IsOneway() {
		return nil
	}
	resp.Opaque = req.Opaque
	resp.SerializeType = req.SerializeType
	resp.Flag = (resp.Flag | FlagResponse) &^ FlagOneway
	var deadline time.Time
	err := c.sendCmd(noWait, deadline, resp)
	if errors.Is(err, context.Canceled) {
		// No room: only now does the answer need its deadline (the clock
		// is read once per waiting answer, not once per answer).
		if c.opts.stalls != nil && c.opts.writeTimeout > 0 {
			deadline = time.Now().Add(c.opts.writeTimeout)
		}
		err = c.sendCmd(context.Background(), deadline, resp)
	}
	if errors.Is(err, ErrTimeout) && !deadline.IsZero() {
		// The write queue stayed full for a whole write timeout: the
		// peer is not reading its answers.
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if !closed {
			c.wmu.Lock()
			queued := len(c.wbuf)
			c.wmu.Unlock()
			c.stalled("answer found no room in the write queue", queued)
		}
		return err
	}
	if errors.Is(err, ErrFrameTooLarge) {
		// Tell the caller instead of leaving it to time out.
		small := NewResponse(ResponseSystemError, err.Error())
		small.Opaque, small.SerializeType = req.Opaque, req.SerializeType
		if f, e := EncodeFrame(small); e == nil {
			_ = c.send(context.Background(), f)
		}
	}
	return err
}

// noWait is a context already cancelled: enqueue with it appends when the
// write queue has room and fails at once otherwise.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// stalled closes a connection whose peer does not read its answers and
// counts it (servers), once: the write loop's blocked flush and an answer
// finding no room can both find the same peer stalled.
func (c *Conn) stalled(how string, queued int) {
	if !c.close(fmt.Errorf("%w: peer does not read (%s)", ErrTimeout, how), false) {
		return
	}
	if c.opts.stalls != nil {
		c.opts.stalls.Add(1)
	}
	c.log.Warn("closed connection: peer does not read", zap.String("reason", how), zap.Int("queued_bytes", queued),
		zap.Duration("timeout", c.opts.writeTimeout), zap.String("key", "maxWriteQueueBytes"))
}

// sweep completes, with ErrTimeout, every pending call whose deadline has
// passed (RocketMQ's scanResponseTable).
func (c *Conn) sweep(now time.Time) {
	var expired []*future
	c.mu.Lock()
	for op, f := range c.pending {
		if !f.deadline.IsZero() && now.After(f.deadline) {
			expired = append(expired, f)
			delete(c.pending, op)
		}
	}
	c.mu.Unlock()
	for _, f := range expired {
		c.timedOut(f)
		f.complete(nil, fmt.Errorf("%w: code %d opaque %d to %s (swept)", ErrTimeout, f.code, f.opaque, c.remote))
	}
}

// timedOut is told of a call that timed out, taken from pending but not
// yet completed. When the call waited at least closeSilentAfter and not
// one byte arrived since it was written, the connection is closed (its
// other calls fail with ErrConnClosed, the client's next call dials): the
// peer or the path to it is gone, and a socket that a partition froze
// stays open, so what is written on it after the partition heals waits
// out TCP's backed-off retransmission timer. A connection that received
// anything meanwhile stays: a live peer is answering, only this call is
// slow, and closing would fail its other calls for nothing. RocketMQ's
// client closes on every sync timeout (clientCloseSocketIfTimeout).
func (c *Conn) timedOut(f *future) {
	if c.opts.closeSilentAfter <= 0 || c.received.Load() != f.received {
		return
	}
	waited := time.Since(f.sentAt)
	if waited < c.opts.closeSilentAfter {
		return
	}
	resetOnClose(c.nc)
	if c.close(fmt.Errorf("%w: code %d got no answer in %v and nothing else arrived", ErrTimeout, f.code, waited), false) {
		c.log.Warn("closing connection: a call timed out and nothing arrived since it was sent",
			zap.Int16("code", f.code), zap.Duration("waited", waited))
	}
}

// resetOnClose makes closing nc drop what the socket has not delivered
// (SO_LINGER 0: a reset instead of a FIN after the queued bytes). A
// connection given up for silence may hold requests the peer never got;
// sent after the close, they would arrive after the calls that follow
// them on a new connection (an ordered producer's next message), stored
// out of order.
func resetOnClose(nc net.Conn) {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = u.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}
