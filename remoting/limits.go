package remoting

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Connection and write-queue limits of a Server (ServerConfig.MaxConns,
// MaxConnsPerIP, WriteQueueBytes). Each refusal is counted so the owner
// can export it (Server.LimitCounts).

// Defaults of the server's connection and write-queue limits.
const (
	// DefaultMaxConns bounds one listener's open connections.
	DefaultMaxConns = 16384
	// DefaultMaxConnsPerIP bounds one remote IP's open connections on a
	// listener: a host running many clients (or a proxy) still fits.
	DefaultMaxConnsPerIP = 4096
	// DefaultWriteQueueBytes bounds the encoded frames queued on one
	// connection for its writer: one maximal frame.
	DefaultWriteQueueBytes = DefaultMaxFrameSize
)

// LimitCounts are the times a server's limits bit, since it started.
type LimitCounts struct {
	// ConnsRefused counts connections closed at accept because the
	// listener held MaxConns connections.
	ConnsRefused int64
	// ConnsRefusedPerIP counts connections closed at accept because their
	// remote IP held MaxConnsPerIP connections.
	ConnsRefusedPerIP int64
	// WriteStalls counts connections closed because their peer did not
	// read: a flush blocked for WriteTimeout, or an answer waited that
	// long for room in a full write queue (WriteQueueBytes or
	// WriteQueueSize frames).
	WriteStalls int64
	// IncompleteFrames counts connections closed because their
	// incomplete frame did not fit in IncompleteFrameBudget.
	IncompleteFrames int64
	// FrameTimeouts counts connections closed because a started frame
	// was not complete within FrameReadTimeout (a half-sent or trickled
	// frame).
	FrameTimeouts int64
	// QueuedRequestsRefused counts requests answered SYSTEM_BUSY because
	// their frame did not fit in QueuedRequestBudget.
	QueuedRequestsRefused int64
}

// LimitCounts returns how often each of the server's limits bit.
func (s *Server) LimitCounts() LimitCounts {
	return LimitCounts{
		ConnsRefused:      s.limits.connsRefused.Load(),
		ConnsRefusedPerIP: s.limits.connsRefusedPerIP.Load(),
		WriteStalls:       s.limits.writeStalls.Load(),
		IncompleteFrames:  s.frames.refused.Load(),
		FrameTimeouts:     s.limits.frameTimeouts.Load(),

		QueuedRequestsRefused: s.limits.queuedRefused.Load(),
	}
}

// serverLimits holds a server's limit counters and the per-IP counts of
// open connections.
type serverLimits struct {
	connsRefused      atomic.Int64
	connsRefusedPerIP atomic.Int64
	writeStalls       atomic.Int64
	frameTimeouts     atomic.Int64
	queuedRefused     atomic.Int64
	refusalWarn       WarnLimiter

	perIP map[string]int // guarded by Server.mu
}

// connIP is the remote IP a connection counts against (its whole
// address when it is not TCP).
func connIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return nc.RemoteAddr().String()
}

// admitLocked reserves room for a new connection from ip, or counts the
// refusal and says which key bit. Called with s.mu held.
func (s *Server) admitLocked(ip string) (limit string, ok bool) {
	switch {
	case len(s.conns) >= s.cfg.MaxConns:
		s.limits.connsRefused.Add(1)
		return "maxConnections", false
	case s.limits.perIP[ip] >= s.cfg.MaxConnsPerIP:
		s.limits.connsRefusedPerIP.Add(1)
		return "maxConnectionsPerIP", false
	}
	if s.limits.perIP == nil {
		s.limits.perIP = map[string]int{}
	}
	s.limits.perIP[ip]++
	return "", true
}

// releaseLocked returns a closed connection's room. Called with s.mu held.
func (s *Server) releaseLocked(ip string) {
	if n := s.limits.perIP[ip] - 1; n > 0 {
		s.limits.perIP[ip] = n
	} else {
		delete(s.limits.perIP, ip)
	}
}

// warnRefusal logs a refused connection at most once per WarnInterval,
// counting the ones held back: a flood of refusals must not become a flood
// of log lines.
func (s *Server) warnRefusal(ip, limit string) {
	ok, held := s.limits.refusalWarn.Allow()
	if !ok {
		return
	}
	n := s.cfg.MaxConnsPerIP
	if limit == "maxConnections" {
		n = s.cfg.MaxConns
	}
	s.log.Warn("connection refused: limit reached", zap.String("remote_ip", ip), zap.String("key", limit), zap.Int("limit", n),
		zap.Int64("refusalsNotLogged", held))
}

// WarnLimiter passes a warning that clients' requests or connections
// trigger at most once per WarnInterval and counts the ones it holds back:
// a flood of bad requests must not become a flood of log lines (each
// request still gets its answer with the reason). The zero value is ready.
type WarnLimiter struct {
	Now func() time.Time // the clock; nil is time.Now (tests set their own)

	mu         sync.Mutex
	next       time.Time // guarded by mu; when the next warning may pass
	suppressed int64     // guarded by mu; held back since the last one passed
}

// WarnInterval is the least time between two warnings of one WarnLimiter.
const WarnInterval = time.Second

// Allow reports whether to log now, and how many warnings were held back
// since the last one logged.
func (l *WarnLimiter) Allow() (ok bool, suppressed int64) {
	clock := l.Now
	if clock == nil {
		clock = time.Now
	}
	now := clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	l.next = now.Add(WarnInterval)
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
