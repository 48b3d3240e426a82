package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPortBand: single ports come from below the kernel's ephemeral range,
// each from its own slot (so derived ports at −2/+4 stay clear of the
// others), and each can be bound for TCP.
func TestPortBand(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if p < Low || p >= High {
			t.Fatalf("port %d outside %d-%d", p, Low, High)
		}
		s := (p - Low) / Slot
		if seen[s] {
			t.Fatalf("slot of port %d handed out twice", p)
		}
		seen[s] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("bind %d: %v", p, err)
		}
		l.Close()
	}
}

// TestBlocksDisjoint: blocks of several slots never overlap each other or
// single ports, and start on a slot boundary.
func TestBlocksDisjoint(t *testing.T) {
	taken := map[int]bool{}
	claim := func(from, to int) {
		t.Helper()
		for p := from; p < to; p++ {
			if taken[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			taken[p] = true
		}
	}
	for i := range 20 {
		n := 5 + 13*i%37
		base, err := Block(n)
		if err != nil {
			t.Fatal(err)
		}
		if (base-Low)%Slot != 0 || base < Low || base+n > High {
			t.Fatalf("block %d+%d not slot-aligned inside the band", base, n)
		}
		claim(base, base+n)
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		claim(p, p+1)
	}
}
