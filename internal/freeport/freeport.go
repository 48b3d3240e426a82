package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

const (
	// Low and High bound the band [Low, High) ports come from.
	Low  = 12000
	High = 32000
	// Slot is the unit of allocation: every block starts on a multiple of
	// Slot and spans whole slots, so the ports a server derives from its
	// listen port (VIP channel −2, gossip +2, metrics +3, Raft +4) stay
	// inside the caller's block when it listens mid-slot (see Port).
	Slot = 10
)

var (
	mu   sync.Mutex
	used = map[int]bool{} // guarded by mu; slots handed out by this process
)

// Block returns base such that every port in [base, base+n) was free for
// TCP and UDP (memberlist gossip binds both) on 127.0.0.1 at the time of
// the call, from slots no earlier call of this process got (until every
// slot was handed out). The first slot is picked at random, so test
// binaries running at the same time rarely meet. Another process can still
// bind a port before the caller does; callers accept that small race.
func Block(n int) (int, error) {
	if n < 1 {
		n = 1
	}
	slots := (n + Slot - 1) / Slot
	total := (High - Low) / Slot
	if slots > total {
		return 0, fmt.Errorf("freeport: %d ports do not fit in %d-%d", n, Low, High)
	}
	mu.Lock()
	defer mu.Unlock()
	for range 4 * total {
		if len(used)+slots > total {
			clear(used) // every slot was handed out: start over
		}
		first := rand.IntN(total - slots + 1)
		if anyUsed(first, slots) {
			continue
		}
		for s := first; s < first+slots; s++ {
			used[s] = true
		}
		base := Low + first*Slot
		if rangeFree(base, base+n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("freeport: no %d free ports in a row in %d-%d", n, Low, High)
}

// Port returns a single free port: the middle of a fresh slot, so the
// ports a raftmq server derives from it (−2 to +4) belong to no other
// caller.
func Port() (int, error) {
	base, err := Block(Slot)
	if err != nil {
		return 0, err
	}
	return base + Slot/2, nil
}

func anyUsed(first, slots int) bool {
	for s := first; s < first+slots; s++ {
		if used[s] {
			return true
		}
	}
	return false
}

// rangeFree reports whether every port in [from, to) can be bound for TCP
// and UDP on 127.0.0.1 right now.
func rangeFree(from, to int) bool {
	for p := from; p < to; p++ {
		if !Free(p) {
			return false
		}
	}
	return true
}

// Free reports whether port p can be bound for TCP and UDP on 127.0.0.1
// right now.
func Free(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	_ = u.Close()
	return true
}
