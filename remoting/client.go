package remoting

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ClientConfig configures a Client. Zero fields take the defaults of
// DefaultClientConfig.
type ClientConfig struct {
	// ConnectTimeout bounds dialing (default 3 s, RocketMQ's
	// connectTimeoutMillis).
	ConnectTimeout time.Duration
	// DefaultTimeout applies to calls whose ctx has no deadline (default 3 s).
	DefaultTimeout time.Duration
	// MaxAsyncInflight bounds InvokeAsync calls awaiting a response
	// (default 65535, RocketMQ's clientAsyncSemaphoreValue).
	MaxAsyncInflight int
	// ScanInterval is how often expired calls are swept (default 1 s,
	// RocketMQ's scanResponseTable period).
	ScanInterval time.Duration
	// MaxFrameSize is the largest accepted frame (default 16 MiB).
	MaxFrameSize int
	// IdleTimeout closes client connections that received nothing for this
	// long; 0 (the default) keeps them: a long poll can be silent for 30 s.
	IdleTimeout time.Duration
	// CloseSilentAfter: a call that times out after waiting at least this
	// long, with not one byte received on its connection since it was
	// written, closes the connection, so the next call dials a new one
	// (default 100 ms, RocketMQ's MIN_CLOSE_TIMEOUT_MILLIS; negative keeps
	// such connections). A connection still receiving anything stays.
	CloseSilentAfter time.Duration
	// FrameReadTimeout bounds receiving the rest of a started frame
	// (default 10 s).
	FrameReadTimeout time.Duration
	// WriteTimeout bounds one socket flush (default 10 s).
	WriteTimeout time.Duration
	// WriteQueueSize is the per-connection queue of frames (default 1024).
	WriteQueueSize int
	// ProcessorWorkers and ProcessorQueueSize size the pool serving
	// server-initiated requests (defaults 4 and 256).
	ProcessorWorkers, ProcessorQueueSize int
	// TLS, when set, secures every connection (see NewClientTLS); the
	// handshake is part of the dial.
	TLS *tls.Config
}

// DefaultClientConfig returns the defaults.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		ConnectTimeout:     3 * time.Second,
		DefaultTimeout:     3 * time.Second,
		MaxAsyncInflight:   65535,
		ScanInterval:       time.Second,
		CloseSilentAfter:   100 * time.Millisecond,
		MaxFrameSize:       DefaultMaxFrameSize,
		FrameReadTimeout:   10 * time.Second,
		WriteTimeout:       10 * time.Second,
		WriteQueueSize:     1024,
		ProcessorWorkers:   4,
		ProcessorQueueSize: 256,
	}
}

func (c ClientConfig) withDefaults() ClientConfig {
	d := DefaultClientConfig()
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = d.DefaultTimeout
	}
	if c.MaxAsyncInflight <= 0 {
		c.MaxAsyncInflight = d.MaxAsyncInflight
	}
	if c.ScanInterval <= 0 {
		c.ScanInterval = d.ScanInterval
	}
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = d.MaxFrameSize
	}
	if c.CloseSilentAfter == 0 {
		c.CloseSilentAfter = d.CloseSilentAfter
	}
	if c.FrameReadTimeout <= 0 {
		c.FrameReadTimeout = d.FrameReadTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.WriteQueueSize <= 0 {
		c.WriteQueueSize = d.WriteQueueSize
	}
	if c.ProcessorWorkers <= 0 {
		c.ProcessorWorkers = d.ProcessorWorkers
	}
	if c.ProcessorQueueSize <= 0 {
		c.ProcessorQueueSize = d.ProcessorQueueSize
	}
	return c
}

// clientEntry holds the connection to one address; mu serializes dialing
// so concurrent callers share one connection.
type clientEntry struct {
	mu   sync.Mutex
	conn *Conn // guarded by mu; nil or closed means dial on next use
	// dropped is set when CloseConn takes the entry out of the table
	// (guarded by Client.mu). A call that looked the entry up before
	// then still holds it, and a dial it makes would be a connection no
	// sweep or Close finds: it fails instead, as CloseConn fails the
	// calls pending on the connection it closes.
	dropped bool
}

// Client is a RocketMQ remoting client: one connection per address,
// dialed lazily and redialed after failure, with sync, async and oneway
// calls, and a processor table for requests the server sends to us. Calls
// to one address are written in call order.
type Client struct {
	cfg   ClientConfig
	log   *zap.Logger
	hooks hookList
	sem   chan struct{} // one token per in-flight InvokeAsync
	pool  *workerPool

	mu      sync.Mutex
	entries map[string]*clientEntry                  // guarded by mu
	procs   map[int16]HandlerFunc                    // guarded by mu
	onOpen  []func(ctx context.Context, addr string) // guarded by mu
	onClose []func(addr string)                      // guarded by mu
	closed  bool                                     // guarded by mu

	quit   chan struct{}
	connWG sync.WaitGroup // reader and writer goroutines
	bgWG   sync.WaitGroup // sweeper
}

// NewClient creates a client and starts its response-table sweeper.
// log may be nil.
func NewClient(cfg ClientConfig, log *zap.Logger) *Client {
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	c := &Client{
		cfg:     cfg,
		log:     log.Named("remoting.client"),
		sem:     make(chan struct{}, cfg.MaxAsyncInflight),
		pool:    newWorkerPool("client-processors", cfg.ProcessorWorkers, cfg.ProcessorQueueSize),
		entries: make(map[string]*clientEntry),
		procs:   make(map[int16]HandlerFunc),
		quit:    make(chan struct{}),
	}
	c.pool.start(func(t task) { runTask(t, &c.hooks, c.log) })
	c.bgWG.Add(1)
	go func() { defer c.bgWG.Done(); c.sweepLoop() }()
	return c
}

// RegisterProcessor installs h for requests with this code arriving from
// servers on our connections (e.g. NOTIFY_CONSUMER_IDS_CHANGED,
// GET_CONSUMER_RUNNING_INFO); the answer goes back on the same connection.
func (c *Client) RegisterProcessor(code int16, h HandlerFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs[code] = h
}

// AddHook adds an RPC hook run around every call this client makes and
// every server-initiated request it handles.
func (c *Client) AddHook(h RPCHook) { c.hooks.add(h) }

// OnConnOpen adds f, called with the address of every connection the
// client dials, once the connection is in place and before the call that
// dialed it is written, and with that call's context (f may tell its own
// calls' dials by a value it put there); a dial that fails calls nothing.
// A peer may tie state to the connection and drop it when the connection
// closes (a broker drops a client's group registrations, as RocketMQ's
// doChannelCloseEvent); f lets the caller register again at once on the
// new connection (RocketMQ's ChannelEventListener.onChannelActive). f runs
// on the dialing goroutine with no client lock held and must not block:
// it holds up that call.
func (c *Client) OnConnOpen(f func(ctx context.Context, addr string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onOpen = append(c.onOpen, f)
}

// OnConnClose adds f, called with the address a connection was dialed for
// once it has closed, for whatever reason (the peer closed it, a call
// timed out in silence, CloseConn, Close), after its calls failed. A peer
// may tie state to the connection (a name server drops the brokers that
// registered through it, as RocketMQ's onChannelDestroy); f lets the
// caller restore it (RocketMQ's ChannelEventListener.onChannelClose). f
// runs on the closing goroutine and must not block.
func (c *Client) OnConnClose(f func(addr string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onClose = append(c.onClose, f)
}

// connClosed tells the OnConnClose listeners that the connection to addr
// closed.
func (c *Client) connClosed(addr string) {
	c.mu.Lock()
	fs := c.onClose
	c.mu.Unlock()
	for _, f := range fs {
		f(addr)
	}
}

func (c *Client) handleRequest(conn *Conn, req *RemotingCommand, _ int) {
	c.mu.Lock()
	h := c.procs[req.Code]
	c.mu.Unlock()
	if h == nil {
		_ = conn.WriteResponse(req, notSupportedResponse(int32(req.Code)))
		return
	}
	if !c.pool.submit(task{h: h, conn: conn, req: req}, c.log) {
		_ = conn.WriteResponse(req, busyResponse())
	}
}

// conn returns the live connection to addr, dialing if there is none.
func (c *Client) conn(ctx context.Context, addr string) (*Conn, error) {
	return c.connUntil(ctx, addr, time.Time{})
}

// connUntil is conn with a dial also bounded by deadline (zero: none).
// The OnConnOpen listeners run after the entry's lock is released.
func (c *Client) connUntil(ctx context.Context, addr string, deadline time.Time) (*Conn, error) {
	conn, dialed, err := c.connOrDial(ctx, addr, deadline)
	if dialed {
		c.mu.Lock()
		fs := c.onOpen
		c.mu.Unlock()
		for _, f := range fs {
			f(ctx, addr)
		}
	}
	return conn, err
}

// connOrDial returns the entry's live connection, or dials one (dialed
// true).
func (c *Client) connOrDial(ctx context.Context, addr string, deadline time.Time) (conn *Conn, dialed bool, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, ErrClientClosed
	}
	e := c.entries[addr]
	if e == nil {
		e = &clientEntry{}
		c.entries[addr] = e
	}
	c.mu.Unlock()
	return c.dialInto(ctx, e, addr, deadline)
}

// dialInto is connOrDial once the entry is looked up.
func (c *Client) dialInto(ctx context.Context, e *clientEntry, addr string, deadline time.Time) (conn *Conn, dialed bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil && !e.conn.Closed() {
		return e.conn, false, nil
	}
	d := net.Dialer{Timeout: c.cfg.ConnectTimeout, Deadline: deadline}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			// The call's own time ran out while dialing: it timed out,
			// and, as any failed dial, nothing was sent.
			return nil, false, fmt.Errorf("%w (%w): dial %s: %v", ErrTimeout, ErrConnClosed, addr, err)
		}
		return nil, false, fmt.Errorf("%w: dial %s: %v", ErrConnClosed, addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if nc, err = c.cfg.clientTLS(ctx, nc, addr, deadline); err != nil {
		return nil, false, err
	}
	conn = newConn(nc, connOptions{
		maxFrameSize:     c.cfg.MaxFrameSize,
		idleTimeout:      c.cfg.IdleTimeout,
		frameTimeout:     c.cfg.FrameReadTimeout,
		writeTimeout:     c.cfg.WriteTimeout,
		writeQueue:       c.cfg.WriteQueueSize,
		closeSilentAfter: max(c.cfg.CloseSilentAfter, 0),
	}, c.log, c.handleRequest, func(*Conn) { c.connClosed(addr) })
	c.mu.Lock()
	if c.closed { // Close ran while we dialed
		c.mu.Unlock()
		_ = nc.Close()
		return nil, false, ErrClientClosed
	}
	if e.dropped {
		c.mu.Unlock()
		_ = nc.Close()
		return nil, false, fmt.Errorf("%w: %s: the connection was closed (CloseConn) while this call dialed it", ErrConnClosed, addr)
	}
	conn.start(&c.connWG)
	c.mu.Unlock()
	e.conn = conn
	c.log.Debug("connected", zap.String("addr", addr), zap.Uint64("conn", conn.id))
	return conn, true, nil
}

// liveConns snapshots the current connections (for sweeping and closing).
func (c *Client) liveConns() []*Conn {
	c.mu.Lock()
	entries := make([]*clientEntry, 0, len(c.entries))
	for _, e := range c.entries {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	var out []*Conn
	for _, e := range entries {
		if conn := e.current(); conn != nil {
			out = append(out, conn)
		}
	}
	return out
}

// current returns the entry's connection, closed or not (nil before the
// first dial).
func (e *clientEntry) current() *Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn
}

func (c *Client) withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.DefaultTimeout)
}

// InvokeSync sends req to addr and waits for the response until ctx's
// deadline (or DefaultTimeout when ctx has none): ErrTimeout then, or
// ErrConnClosed when the connection fails. req.Opaque may be changed.
func (c *Client) InvokeSync(ctx context.Context, addr string, req *RemotingCommand) (*RemotingCommand, error) {
	return c.InvokeSyncUntil(ctx, addr, req, time.Time{})
}

// InvokeSyncUntil is InvokeSync bounded by deadline as well as by ctx (the
// earlier wins; DefaultTimeout when neither has one). The deadline is
// waited for with a pooled timer, not a context: a caller with a
// per-attempt bound (the producer's AttemptTimeout) builds no context per
// call.
func (c *Client) InvokeSyncUntil(ctx context.Context, addr string, req *RemotingCommand, deadline time.Time) (*RemotingCommand, error) {
	// A deadline that ctx already enforces is left to ctx: its expiry
	// then sets ctx.Err() for the caller, as with InvokeSync.
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || !deadline.Before(d)) {
		deadline = time.Time{}
	} else if !ok && deadline.IsZero() {
		deadline = time.Now().Add(c.cfg.DefaultTimeout)
	}
	conn, err := c.connUntil(ctx, addr, deadline)
	if err != nil {
		return nil, err
	}
	c.hooks.before(addr, req)
	resp, err := conn.invokeSync(ctx, req, deadline)
	c.hooks.after(addr, req, resp)
	return resp, err
}

// InvokeAsync sends req to addr and returns once it is queued; cb gets the
// response or the error (ErrTimeout after the deadline of ctx or
// DefaultTimeout, found by the periodic sweep; ErrConnClosed as soon as
// the connection closes). At most MaxAsyncInflight calls wait at once:
// beyond that InvokeAsync waits for a slot until ctx ends, then returns
// ErrTooManyRequests. cb is not called when InvokeAsync returns an error.
// cb runs on the connection's reader or the sweeper (or on InvokeAsync's
// goroutine for a close that came while the frame was being queued), never
// while req is still being encoded: it must not block.
func (c *Client) InvokeAsync(ctx context.Context, addr string, req *RemotingCommand, cb func(*RemotingCommand, error)) error {
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	deadline, _ := ctx.Deadline()
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %d in flight (code %d to %s)", ErrTooManyRequests, cap(c.sem), req.Code, addr)
	}
	conn, err := c.conn(ctx, addr)
	if err != nil {
		<-c.sem
		return err
	}
	c.hooks.before(addr, req)
	_, err = conn.startCall(ctx, req, deadline, func(resp *RemotingCommand, err error) {
		defer func() { <-c.sem }()
		c.hooks.after(addr, req, resp)
		if cb != nil {
			cb(resp, err)
		}
	})
	if err != nil {
		<-c.sem
		return err
	}
	return nil
}

// InvokeOneway sends req to addr with the oneway flag and returns once it
// is queued for writing; no response comes back.
func (c *Client) InvokeOneway(ctx context.Context, addr string, req *RemotingCommand) error {
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	conn, err := c.conn(ctx, addr)
	if err != nil {
		return err
	}
	c.hooks.before(addr, req)
	err = conn.InvokeOneway(ctx, req)
	c.hooks.after(addr, req, nil)
	return err
}

// CloseConn closes the connection to addr (pending calls fail with
// ErrConnClosed); the next call redials.
func (c *Client) CloseConn(addr string) {
	c.mu.Lock()
	e := c.entries[addr]
	delete(c.entries, addr)
	if e != nil {
		e.dropped = true
	}
	c.mu.Unlock()
	if e == nil {
		return
	}
	if conn := e.current(); conn != nil {
		conn.close(nil, false)
	}
}

func (c *Client) sweepLoop() {
	t := time.NewTicker(c.cfg.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case now := <-t.C:
			for _, conn := range c.liveConns() {
				conn.sweep(now)
			}
		}
	}
}

// Close closes every connection (pending calls fail with ErrConnClosed),
// stops the sweeper and the processor pool, and waits for their goroutines.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	for _, conn := range c.liveConns() {
		conn.close(nil, false)
	}
	c.connWG.Wait() // readers gone: nothing submits to the pool any more
	c.pool.stop()
	c.pool.wg.Wait()
	close(c.quit)
	c.bgWG.Wait()
	return nil
}
