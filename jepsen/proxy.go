package jepsen

import (
	"errors"
	"io"
	"net"
	"sync"

	"go.uber.org/zap"
)

// Link is a one-way userspace TCP proxy for the Raft connections that one
// node (from) opens to another (to): from's dLegerPeers entry for to points
// at the link's listener, which forwards to to's real Raft port. Because
// hashicorp/raft sends its RPCs on connections the caller dials and reads
// the answers on the same connection, "forward" bytes are from's messages
// to to and "back" bytes are to's answers to from.
//
// Blocking a direction freezes it: the copier stops reading, so the
// sender's kernel buffers fill up and its writes stall, as with packets
// dropped by a firewall. Nothing is discarded; when the block is lifted
// the held bytes flow again (like TCP retransmissions after a heal), so
// the streams stay intact.
type Link struct {
	From, To int
	target   string
	ln       net.Listener
	log      *zap.Logger

	mu        sync.Mutex
	cond      *sync.Cond
	blockFwd  bool // guarded by mu
	blockBack bool // guarded by mu
	closed    bool // guarded by mu
	conns     map[net.Conn]struct{}

	wg sync.WaitGroup
}

// newLink listens on 127.0.0.1:0 and forwards every accepted connection
// to target.
func newLink(from, to int, target string, log *zap.Logger) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{From: from, To: to, target: target, ln: ln, log: log, conns: map[net.Conn]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr is the listener address the from node dials.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// SetBlocked freezes or releases each direction.
func (l *Link) SetBlocked(fwd, back bool) {
	l.mu.Lock()
	l.blockFwd, l.blockBack = fwd, back
	l.mu.Unlock()
	l.cond.Broadcast()
}

// Blocked reports the current blocks.
func (l *Link) Blocked() (fwd, back bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blockFwd, l.blockBack
}

// Close stops the listener, closes every proxied connection and waits for
// the copiers.
func (l *Link) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.cond.Broadcast()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Link) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *Link) acceptLoop() {
	defer l.wg.Done()
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(in) {
			continue
		}
		l.wg.Add(1)
		go l.serve(in)
	}
}

// serve dials the target and runs the two copiers. A dial failure (the
// target process is dead) closes the accepted connection, which the
// dialer sees as a reset, as it would without the proxy.
func (l *Link) serve(in net.Conn) {
	defer l.wg.Done()
	defer l.untrack(in)
	defer in.Close()
	out, err := net.Dial("tcp", l.target)
	if err != nil {
		return
	}
	if !l.track(out) {
		return
	}
	defer l.untrack(out)
	defer out.Close()
	done := make(chan struct{}, 2)
	l.wg.Add(2)
	go func() { defer l.wg.Done(); l.copy(out, in, true); done <- struct{}{} }()
	go func() { defer l.wg.Done(); l.copy(in, out, false); done <- struct{}{} }()
	<-done
	// One side ended: close both so the other copier returns too.
	_ = in.Close()
	_ = out.Close()
	<-done
}

// copy moves bytes from src to dst, waiting before each write while its
// direction is blocked.
func (l *Link) copy(dst, src net.Conn, fwd bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.waitOpen(fwd) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				l.log.Debug("proxy copy ended", zap.Int("from", l.From), zap.Int("to", l.To), zap.Error(err))
			}
			return
		}
	}
}

// waitOpen blocks while the direction is blocked; false once the link is
// closed.
func (l *Link) waitOpen(fwd bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && ((fwd && l.blockFwd) || (!fwd && l.blockBack)) {
		l.cond.Wait()
	}
	return !l.closed
}
