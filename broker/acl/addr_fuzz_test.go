package acl

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzCompileAddr: a white address pattern of any text compiles or is
// refused, never a panic; what compiles matches every address it names
// (each listed IP, each range's lowest and highest address), and a pattern
// that is not "*"-like and holds no IPv4 range matches no IPv4 address it
// does not list.
func FuzzCompileAddr(f *testing.F) {
	for _, s := range []string{"", "*", "*.*.*.*", "*:*:*:*:*:*:*:*", "192.168.1.1", "::1", "::ffff:10.0.0.1",
		"10.0.0.1,10.0.0.2", "192.168.1.{1,5,9}", "192.168.{1,2}", "192.168.1.*", "192.168.*.*", "192.168.1.1-100",
		"192.168.1-3.*", "1.2.3", "1.2.3.4.5", "1.2.*.4", "1.2.3.300", "1.2.3.5-4", "fe80::*", "}", "{1}", " 1.2.3.4 "} {
		f.Add(s)
	}
	probe := netip.MustParseAddr("203.0.113.77")
	f.Fuzz(func(t *testing.T, pat string) {
		m, err := compileAddr(pat)
		if err != nil {
			if !strings.Contains(err.Error(), "white address") {
				t.Fatalf("refusal %q does not name the white address", err)
			}
			return
		}
		for ip := range m.exact {
			if !m.match(ip) {
				t.Fatalf("%q does not match its own %v", pat, ip)
			}
		}
		for _, r := range m.ranges {
			lo := netip.AddrFrom4([4]byte{byte(r[0][0]), byte(r[1][0]), byte(r[2][0]), byte(r[3][0])})
			hi := netip.AddrFrom4([4]byte{byte(r[0][1]), byte(r[1][1]), byte(r[2][1]), byte(r[3][1])})
			for i := range 4 {
				if r[i][0] < 0 || r[i][1] > 255 || r[i][0] > r[i][1] {
					t.Fatalf("%q compiled to the range %v", pat, r)
				}
			}
			if !m.match(lo) || !m.match(hi) {
				t.Fatalf("%q does not match its range's ends %v, %v", pat, lo, hi)
			}
		}
		if !m.any && len(m.ranges) == 0 && m.match(probe) != m.exact[probe] {
			t.Fatalf("%q matches %v, which it does not list", pat, probe)
		}
		if m.match(netip.Addr{}) {
			t.Fatalf("%q matches the zero address", pat)
		}
	})
}
