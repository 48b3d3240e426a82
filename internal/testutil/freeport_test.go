package testutil

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortBand: ports come from below the kernel's ephemeral range, each
// from its own block of ten (so derived ports at −2/+3 stay clear of the
// others), and each can be bound for TCP.
func TestFreePortBand(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if p < freePortLow || p >= freePortHigh {
			t.Fatalf("port %d outside %d-%d", p, freePortLow, freePortHigh)
		}
		b := (p - freePortLow) / portBlock
		if seen[b] {
			t.Fatalf("block of port %d handed out twice", p)
		}
		seen[b] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("bind %d: %v", p, err)
		}
		l.Close()
	}
}
