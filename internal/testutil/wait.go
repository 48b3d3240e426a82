package testutil

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond every few milliseconds until it returns true or the
// deadline passes, in which case it fails the test with msg. Tests use it
// instead of sleeping for a fixed time (style.md rule 9).
func WaitFor(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", timeout, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ports handed out by FreePort come from a band below Linux's default
// ephemeral range (ip_local_port_range 32768-60999). A port the kernel picks
// for ":0" lies in that range, and so does the local port of every outgoing
// connection: between FreePort and the caller's bind, a client connection
// of the same test (the official RocketMQ client opens many) could take it,
// and a group member then failed with "address already in use". Below the
// range only another listener can take it.
const (
	freePortLow  = 12000
	freePortHigh = 20000
	// portBlock: each port handed out is the middle of its own block of 10,
	// and a block is handed out once per process (until all were), so the
	// ports servers derive from their listen port (the VIP channel at −2,
	// metrics at +3) do not land on another caller's port.
	portBlock = 10
)

var (
	portMu   sync.Mutex
	portUsed = map[int]bool{} // guarded by portMu; blocks handed out
)

// FreePort returns a port on 127.0.0.1 that is free for both TCP and UDP
// (memberlist gossip binds both) at the time of the call, picked at random
// (test binaries running at the same time rarely meet) from a block no
// earlier call of this process got. Another process can still bind the port
// before the caller does; tests accept that small race.
func FreePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	blocks := (freePortHigh - freePortLow) / portBlock
	for range 4 * blocks {
		if len(portUsed) >= blocks {
			clear(portUsed) // every block was handed out: start over
		}
		b := rand.IntN(blocks)
		if portUsed[b] {
			continue
		}
		portUsed[b] = true
		if p := freePortLow + b*portBlock + portBlock/2; portFree(p) {
			return p
		}
	}
	t.Fatalf("free port: none free in %d-%d", freePortLow, freePortHigh)
	return 0
}

func portFree(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}
