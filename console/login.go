package console

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Refused credentials are limited per remote address: the first
// loginFreeFailures in a row cost nothing (typos), each later one locks
// the address out for twice as long as the one before (loginBaseLockout,
// 2 s, 4 s, ...) up to loginMaxLockout. While locked out, credentials are
// not even compared: the answer is 429 with Retry-After. An address whose
// last failure and lock-out are loginForget in the past starts over, and
// a sign-in that succeeds clears its address.
const (
	loginFreeFailures = 5
	loginBaseLockout  = time.Second
	loginMaxLockout   = 5 * time.Minute
	loginForget       = 15 * time.Minute
	// loginMaxAddrs bounds the addresses remembered. Past it, after the
	// forgotten ones are dropped, further addresses share one entry
	// (loginOverflow): an attacker holding many addresses is slowed down
	// as one, and memory stays bounded.
	loginMaxAddrs = 4096
	loginOverflow = "*"
)

// loginLimiter is the per-address count of refused credentials.
type loginLimiter struct {
	mu    sync.Mutex
	now   func() time.Time
	addrs map[string]*loginFailures
	swept time.Time // the last sweep of forgotten entries
}

type loginFailures struct {
	n     int       // refused in a row
	last  time.Time // the last refusal
	until time.Time // locked out until
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{now: time.Now, addrs: map[string]*loginFailures{}}
}

// loginKey is the limited unit of a request's RemoteAddr: the IP address,
// or the /64 of an IPv6 one (one host is commonly given a whole /64).
func loginKey(remoteAddr string) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// forgotten reports whether f is old enough to start over at now.
func (f *loginFailures) forgotten(now time.Time) bool {
	return now.Sub(f.last) > loginForget && now.Sub(f.until) > loginForget
}

// wait is how long key must wait before its credentials are compared (0:
// now). A key not remembered while the overflow entry exists shares it.
func (l *loginLimiter) wait(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.addrs[key]
	if f == nil {
		f = l.addrs[loginOverflow]
	}
	if f == nil {
		return 0
	}
	return max(f.until.Sub(l.now()), 0)
}

// failed counts a refusal of key's credentials.
func (l *loginLimiter) failed(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.addrs[key]
	if f == nil && len(l.addrs) >= loginMaxAddrs && now.Sub(l.swept) >= time.Minute {
		// At most once a minute: the entries are kept loginForget.
		l.swept = now
		for k, o := range l.addrs {
			if o.forgotten(now) {
				delete(l.addrs, k)
			}
		}
	}
	if f == nil && len(l.addrs) >= loginMaxAddrs {
		key = loginOverflow
		f = l.addrs[key]
	}
	if f == nil || f.forgotten(now) {
		f = &loginFailures{}
		l.addrs[key] = f
	}
	f.n++
	f.last = now
	if over := f.n - loginFreeFailures; over > 0 {
		f.until = now.Add(min(loginBaseLockout<<min(over-1, 20), loginMaxLockout))
	}
}

// succeeded forgets key's refusals.
func (l *loginLimiter) succeeded(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.addrs, key)
}

// size is the number of entries (tests).
func (l *loginLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}
