package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ServerConfig configures a Server. Zero fields take the defaults of
// DefaultServerConfig.
type ServerConfig struct {
	// ListenAddr is the TCP address to listen on; "127.0.0.1:0" picks a
	// free port (see Server.Addr).
	ListenAddr string
	// MaxFrameSize is the largest accepted frame length (default 16 MiB).
	MaxFrameSize int
	// IdleTimeout closes connections that sent nothing for this long
	// (default 120 s, RocketMQ's serverChannelMaxIdleTimeSeconds).
	IdleTimeout time.Duration
	// FrameReadTimeout bounds receiving the rest of a frame once its first
	// byte arrived (default 10 s): a half-sent frame closes the connection.
	FrameReadTimeout time.Duration
	// WriteTimeout bounds one socket flush (default 10 s).
	WriteTimeout time.Duration
	// WriteQueueSize is the per-connection queue of encoded frames
	// (default 1024).
	WriteQueueSize int
	// IncompleteFrameBudget bounds the bytes held by frames still arriving,
	// summed over all connections (default 256 MiB). A frame's buffer grows
	// as its bytes arrive, so one connection holds at most four times what it
	// sent of its current frame (and never more than MaxFrameSize); a
	// connection whose frame cannot grow within the budget is closed.
	IncompleteFrameBudget int64
	// MaxConns bounds the open connections of the listener and
	// MaxConnsPerIP those from one remote IP (defaults DefaultMaxConns,
	// DefaultMaxConnsPerIP); a connection beyond either is closed at
	// accept (see limits.go).
	MaxConns, MaxConnsPerIP int
	// WriteQueueBytes bounds the encoded frames queued on a connection
	// (default DefaultWriteQueueBytes; one frame always fits). An answer
	// that finds no room waits at most WriteTimeout, then the connection
	// is closed: a peer that never reads holds a bounded amount.
	WriteQueueBytes int
	// QueuedRequestBudget bounds the bytes of the request frames handed
	// to processors and not yet handled (queued or running; for
	// asynchronous processors, inline ones too, until answered), summed
	// over all connections (default DefaultQueuedRequestBudget).
	// A request that does not fit is answered SYSTEM_BUSY like a full
	// queue; one request always fits. Without it, a processor's queue of
	// thousands of slots holds as many maximal frames while its workers
	// are busy. Asynchronous requests (sends) may hold only
	// asyncBudgetShare of it, so sends waiting for a stalled group leave
	// room for heartbeats, pulls and the members' own requests.
	QueuedRequestBudget int64
	// TLSMode and TLS secure the listener (see TLSMode); TLS is required
	// unless the mode is TLSDisabled.
	TLSMode TLSMode
	TLS     *tls.Config
}

// DefaultIncompleteFrameBudget is ServerConfig.IncompleteFrameBudget's
// default: sixteen frames of the default maximum size.
const DefaultIncompleteFrameBudget = 16 * DefaultMaxFrameSize

// DefaultQueuedRequestBudget is ServerConfig.QueuedRequestBudget's
// default: sixteen frames of the default maximum size.
const DefaultQueuedRequestBudget = 16 * DefaultMaxFrameSize

// DefaultServerConfig returns the defaults, listening on 127.0.0.1:0.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		ListenAddr:       "127.0.0.1:0",
		MaxFrameSize:     DefaultMaxFrameSize,
		IdleTimeout:      120 * time.Second,
		FrameReadTimeout: 10 * time.Second,
		WriteTimeout:     10 * time.Second,
		WriteQueueSize:   1024,

		IncompleteFrameBudget: DefaultIncompleteFrameBudget,
		QueuedRequestBudget:   DefaultQueuedRequestBudget,
		MaxConns:              DefaultMaxConns,
		MaxConnsPerIP:         DefaultMaxConnsPerIP,
		WriteQueueBytes:       DefaultWriteQueueBytes,
	}
}

func (c ServerConfig) withDefaults() ServerConfig {
	d := DefaultServerConfig()
	if c.ListenAddr == "" {
		c.ListenAddr = d.ListenAddr
	}
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = d.MaxFrameSize
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
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
	if c.IncompleteFrameBudget <= 0 {
		c.IncompleteFrameBudget = d.IncompleteFrameBudget
	}
	if c.QueuedRequestBudget <= 0 {
		c.QueuedRequestBudget = d.QueuedRequestBudget
	}
	if c.MaxConns <= 0 {
		c.MaxConns = d.MaxConns
	}
	if c.MaxConnsPerIP <= 0 {
		c.MaxConnsPerIP = d.MaxConnsPerIP
	}
	if c.WriteQueueBytes <= 0 {
		c.WriteQueueBytes = d.WriteQueueBytes
	}
	return c
}

func (c ServerConfig) connOptions(budget *frameBudget, limits *serverLimits) connOptions {
	return connOptions{
		budget:          budget,
		writeQueueBytes: c.WriteQueueBytes,
		stalls:          &limits.writeStalls,
		frameTimeouts:   &limits.frameTimeouts,
		maxFrameSize:    c.MaxFrameSize,
		idleTimeout:     c.IdleTimeout,
		frameTimeout:    c.FrameReadTimeout,
		writeTimeout:    c.WriteTimeout,
		writeQueue:      c.WriteQueueSize,
	}
}

type registration struct {
	h     HandlerFunc
	async *asyncReg // set for RegisterAsync processors (h is nil)
	pool  *workerPool
}

// routeTable is an immutable snapshot of how requests are routed: a
// reader looks at it for every request, so it is published whole rather
// than read under the server's lock (a read lock shared by every
// connection's reader is a contended cache line on the send path).
type routeTable struct {
	processors  map[int16]registration
	defaultProc *registration
	guard       Guard // see guard.go
	// lazyExt holds the codes registered with AsyncOptions.LazyExt.
	lazyExt map[int16]bool
}

// updateRoutesLocked publishes a copy of the route table changed by f;
// the caller holds mu, so updates never race each other.
func (s *Server) updateRoutesLocked(f func(t *routeTable)) {
	cur := s.routes.Load()
	next := &routeTable{
		processors:  maps.Clone(cur.processors),
		defaultProc: cur.defaultProc,
		guard:       cur.guard,
		lazyExt:     maps.Clone(cur.lazyExt),
	}
	f(next)
	s.routes.Store(next)
}

// Server is a RocketMQ remoting server: it accepts connections and hands
// each request to the processor registered for its code, through that
// processor's bounded worker pool.
type Server struct {
	cfg     ServerConfig
	log     *zap.Logger
	connLog *zap.Logger // for its connections (connlog.go)
	hooks   hookList
	// routes is what every request's routing reads: replaced (copied on
	// write) under mu, read by the connections' readers without a lock.
	routes atomic.Pointer[routeTable]

	mu      sync.RWMutex
	pools   []*workerPool    // guarded by mu; every pool ever created
	onClose []func(*Conn)    // guarded by mu
	conns   map[uint64]*Conn // guarded by mu
	ln      net.Listener     // guarded by mu
	started bool             // guarded by mu
	closing bool             // guarded by mu

	async asyncTracker // asynchronous requests not answered yet

	// frames bounds the memory of incomplete frames (IncompleteFrameBudget).
	frames frameBudget
	// limits counts connections per IP and the refusals (limits.go).
	limits serverLimits
	// queued is the bytes of request frames in the pools, and of
	// asynchronous requests not yet answered (QueuedRequestBudget).
	queued atomic.Int64

	acceptDone chan struct{}
	connWG     sync.WaitGroup // reader and writer goroutines of every conn
	readers    sync.WaitGroup // reader goroutines of every conn (they submit to the pools)
}

// NewServer creates a server; nothing listens until Start. log may be nil.
func NewServer(cfg ServerConfig, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:        cfg,
		log:        log.Named("remoting.server"),
		connLog:    connLogger(log.Named("remoting.server")),
		conns:      make(map[uint64]*Conn),
		acceptDone: make(chan struct{}),
	}
	s.frames.limit = cfg.IncompleteFrameBudget
	s.routes.Store(&routeTable{processors: map[int16]registration{}, lazyExt: map[int16]bool{}})
	return s
}

// IncompleteFrameBytes is the memory held now by frames still arriving,
// counted against ServerConfig.IncompleteFrameBudget.
func (s *Server) IncompleteFrameBytes() int64 { return s.frames.used.Load() }

// IncompleteFrameRefusals counts the connections closed because their
// incomplete frame did not fit in ServerConfig.IncompleteFrameBudget.
func (s *Server) IncompleteFrameRefusals() int64 { return s.frames.refused.Load() }

// Register installs h for requests with this code, served by its own pool
// of workers goroutines behind a queue of queueSize; a full queue answers
// SYSTEM_BUSY. Registering a code again replaces the handler.
func (s *Server) Register(code int16, h HandlerFunc, workers, queueSize int) {
	s.RegisterShared([]int16{code}, h, workers, queueSize)
}

// RegisterShared installs h for requests with any of codes, all served by
// one pool of workers goroutines behind a queue of queueSize (as RocketMQ
// registers several codes with one executor): they queue behind each
// other, never behind the server's other codes.
func (s *Server) RegisterShared(codes []int16, h HandlerFunc, workers, queueSize int) {
	name := "code"
	for _, code := range codes {
		name += fmt.Sprintf("-%d", code)
	}
	p := newWorkerPool(name, workers, queueSize)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateRoutesLocked(func(t *routeTable) {
		for _, code := range codes {
			t.processors[code] = registration{h: h, pool: p}
			delete(t.lazyExt, code) // a synchronous handler reads ExtFields
		}
	})
	s.addPoolLocked(p)
}

// AsyncOptions configure an asynchronous processor (RegisterAsync).
type AsyncOptions struct {
	// Workers and QueueSize size its pool: the handler runs on a worker
	// unless Inline says otherwise; a full queue answers SYSTEM_BUSY.
	Workers, QueueSize int
	// MaxPending bounds the requests admitted and not yet answered
	// (queued, running or waiting for Respond); beyond it the server
	// answers SYSTEM_BUSY. Default 1.
	MaxPending int
	// Inline, when set and true for a request, runs the handler on the
	// connection's reader goroutine instead of handing it to a worker: it
	// saves a goroutine wake-up per request (the largest scheduling delay
	// of the send path on a loaded host). Only for requests whose handler
	// cannot block for long: while it runs, the connection reads nothing
	// (TCP back-pressure on that one client). Inline runs on the reader
	// too and must be a cheap look at the request.
	Inline func(req *RemotingCommand) bool
	// LazyExt decodes this code's requests with their ROCKETMQ extFields
	// left raw: req.ExtFields is nil, and the handler (and the server's
	// hooks) read the fields with ExtValue/RangeExt. A send header has
	// 13–14 fields: the map is most of the decode cost on the reader
	// (BenchmarkDecodeSendRequest: 6 → 2 allocations). JSON requests
	// (the official clients) still get ExtFields.
	LazyExt bool
}

// RegisterAsync installs an asynchronous processor for code: its handler
// may answer later through its Responder (see AsyncHandlerFunc), so a
// request waiting for replication holds no goroutine. Shutdown waits for
// pending answers.
func (s *Server) RegisterAsync(code int16, h AsyncHandlerFunc, o AsyncOptions) {
	p := newWorkerPool(fmt.Sprintf("code-%d", code), o.Workers, o.QueueSize)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateRoutesLocked(func(t *routeTable) {
		t.processors[code] = registration{
			async: &asyncReg{h: h, maxPending: int64(max(o.MaxPending, 1)), inline: o.Inline}, pool: p}
		// Every registration sets it: re-registering a code never
		// inherits the previous handler's choice.
		delete(t.lazyExt, code)
		if o.LazyExt {
			t.lazyExt[code] = true
		}
	})
	s.addPoolLocked(p)
}

// lazyRequest reports whether requests with code are decoded with their
// extFields left raw (AsyncOptions.LazyExt).
func (s *Server) lazyRequest(code int16) bool {
	return s.routes.Load().lazyExt[code]
}

// RegisterDefault installs the handler for codes without their own
// processor (RocketMQ's defaultRequestProcessor).
func (s *Server) RegisterDefault(h HandlerFunc, workers, queueSize int) {
	p := newWorkerPool("default", workers, queueSize)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateRoutesLocked(func(t *routeTable) { t.defaultProc = &registration{h: h, pool: p} })
	s.addPoolLocked(p)
}

func (s *Server) addPoolLocked(p *workerPool) {
	s.pools = append(s.pools, p)
	if s.started && !s.closing {
		p.start(s.runTask)
	}
}

func (s *Server) runTask(t task) {
	if t.async != nil {
		s.runAsync(t) // its bytes are released by its answer
		return
	}
	defer s.queued.Add(-t.size)
	runTask(t, &s.hooks, s.log)
}

// OnConnClose registers f to run once for every connection that closes,
// for whatever reason (e.g. the name server drops a broker whose channel
// closed). f runs on the goroutine that closed the connection.
func (s *Server) OnConnClose(f func(c *Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onClose = append(s.onClose, f)
}

// AddHook adds an RPC hook run around every handled request.
func (s *Server) AddHook(h RPCHook) { s.hooks.add(h) }

// Start listens on ListenAddr and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrServerClosed
	}
	if s.started {
		return errors.New("remoting: server already started")
	}
	ln, err := net.Listen("tcp", s.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("remoting: listen on %s: %w", s.cfg.ListenAddr, err)
	}
	if ln, err = s.cfg.tlsListener(ln); err != nil {
		return err
	}
	s.ln = ln
	s.started = true
	for _, p := range s.pools {
		p.start(s.runTask)
	}
	go s.acceptLoop(ln)
	s.log.Info("remoting server listening", zap.String("addr", ln.Addr().String()))
	return nil
}

// Addr returns the listening address (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Conns returns the currently open connections.
func (s *Server) Conns() []*Conn {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	return out
}

func (s *Server) acceptLoop(ln net.Listener) {
	defer close(s.acceptDone)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off instead of
			// spinning (net/http's approach).
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff < time.Second {
				backoff *= 2
			}
			s.log.Warn("accept failed", zap.Error(err), zap.Duration("retry_in", backoff))
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c := newConn(nc, s.cfg.connOptions(&s.frames, &s.limits), s.connLog, s.handleRequest, s.connClosed)
		c.lazyRequest = s.lazyRequest
		ip := connIP(nc)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		if limit, ok := s.admitLocked(ip); !ok {
			s.mu.Unlock()
			_ = nc.Close()
			s.warnRefusal(ip, limit)
			continue
		}
		s.conns[c.id] = c
		c.readers = &s.readers
		s.readers.Add(1)
		c.start(&s.connWG)
		s.mu.Unlock()
		c.log.Debug("connection accepted")
	}
}

func (s *Server) connClosed(c *Conn) {
	s.mu.Lock()
	if _, ok := s.conns[c.id]; ok {
		delete(s.conns, c.id)
		s.releaseLocked(connIP(c.nc))
	}
	cbs := s.onClose
	s.mu.Unlock()
	for _, f := range cbs {
		f(c)
	}
}

// route returns the registration for code (or the default processor's)
// and the guard to run first.
func (s *Server) route(code int16) (registration, bool, Guard) {
	rt := s.routes.Load()
	reg, ok := rt.processors[code]
	if !ok && rt.defaultProc != nil {
		reg, ok = *rt.defaultProc, true
	}
	return reg, ok, rt.guard
}

// handleRequest runs on the connection's reader: it only routes (and runs
// asynchronous handlers that asked to run inline).
func (s *Server) handleRequest(c *Conn, req *RemotingCommand, size int) {
	reg, ok, g := s.route(req.Code)
	if guarded(g, c, req) {
		return
	}
	if !ok {
		c.log.Debug("request code not supported", zap.Int16("code", req.Code))
		_ = c.WriteResponse(req, notSupportedResponse(int32(req.Code)))
		return
	}
	if reg.async != nil && !reg.async.admit() {
		reg.pool.warnOverload(s.log, "pending asynchronous requests at their bound")
		_ = c.WriteResponse(req, busyResponse())
		return
	}
	t := task{h: reg.h, async: reg.async, conn: c, req: req, size: int64(size)}
	var why string
	if !s.admitQueued(t.size, reg.async != nil) {
		reg.pool.warnOverload(s.log, "queued requests at their byte bound (maxQueuedRequestBytes)")
		why = " (queued requests at maxQueuedRequestBytes)"
	} else if reg.async != nil && reg.async.inline != nil && reg.async.inline(req) {
		s.runAsync(t)
		return
	} else if reg.pool.submit(t, s.log) {
		return
	} else {
		s.queued.Add(-t.size)
	}
	if reg.async != nil {
		reg.async.pending.Add(-1)
	}
	busy := busyResponse()
	busy.Remark += why
	_ = c.WriteResponse(req, busy)
}

// asyncBudgetShare is the part of QueuedRequestBudget asynchronous
// requests may hold between them: the rest is kept for the synchronous
// ones (a consumer's heartbeat, a pull, a peer's RAFT_STATUS), which
// would otherwise be refused while sends wait for a stalled group, and
// consumers dropped for missing heartbeats.
const asyncBudgetShare = 0.75

// admitQueued reserves size bytes of the queued-request budget, false
// when they do not fit (async: within asyncBudgetShare of it); a request
// always fits while nothing is queued.
func (s *Server) admitQueued(size int64, async bool) bool {
	limit := s.cfg.QueuedRequestBudget
	if async {
		limit = int64(float64(limit) * asyncBudgetShare)
	}
	if used := s.queued.Add(size); used > limit && used != size {
		s.queued.Add(-size)
		s.limits.queuedRefused.Add(1)
		return false
	}
	return true
}

// QueuedRequestBytes is the bytes of request frames handed to processors
// and not yet handled (asynchronous ones: not yet answered), counted
// against QueuedRequestBudget.
func (s *Server) QueuedRequestBytes() int64 { return s.queued.Load() }

// QueuedRequestRefusals counts the requests answered SYSTEM_BUSY because
// they did not fit in QueuedRequestBudget.
func (s *Server) QueuedRequestRefusals() int64 { return s.limits.queuedRefused.Load() }

// Shutdown stops accepting connections and requests, waits for queued and
// in-flight requests to finish and their responses to be written — for
// asynchronous processors, until every pending request was answered —
// then closes every connection. If ctx ends first, asynchronous requests
// still pending are answered SYSTEM_ERROR, connections are closed at once
// (handlers see their ctx cancelled) and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.closing = true
	started := s.started
	if s.ln != nil {
		_ = s.ln.Close()
	}
	s.mu.Unlock()
	if started {
		<-s.acceptDone
	}

	// No accept loop any more: the connection set can only shrink.
	conns := s.Conns()
	for _, c := range conns {
		c.stopReading()
	}
	for _, c := range conns {
		<-c.readerDone // readers exit at once: their deadline is in the past
	}
	// Connections that closed before (removed from the set) may still have
	// a reader dispatching its last request: wait for those too before
	// the pools' queues close.
	s.readers.Wait()

	// No reader can submit now; let the pools drain.
	s.mu.RLock()
	pools := append([]*workerPool(nil), s.pools...)
	s.mu.RUnlock()
	var drainErr error
	for _, p := range pools {
		if p.started {
			p.stop()
		}
	}
	for _, p := range pools {
		if p.started && drainErr == nil {
			drainErr = p.wait(ctx)
		}
	}
	// Workers are done (or ctx ended): no new asynchronous request can
	// start, so wait for the pending ones' answers, failing what is left
	// at the deadline — before the writers flush and the sockets close.
	// The failures are queued answers: still flush them unless the pools
	// themselves did not drain (then handlers may be stuck writing).
	graceful := drainErr == nil
	if n := s.async.wait(ctx); n > 0 {
		s.log.Warn("asynchronous requests unanswered at shutdown deadline; answered SYSTEM_ERROR", zap.Int("requests", n))
		drainErr = errors.Join(drainErr, ctx.Err())
	}

	for _, c := range s.Conns() {
		c.close(nil, graceful)
	}
	s.connWG.Wait()
	if drainErr != nil {
		return fmt.Errorf("remoting: shutdown: in-flight requests not drained: %w", drainErr)
	}
	s.log.Info("remoting server stopped")
	return nil
}
