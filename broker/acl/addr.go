package acl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// addrMatcher is a compiled whiteRemoteAddress or global white address
// (RocketMQ's RemoteAddressStrategyFactory): blank matches nothing; "*",
// "*.*.*.*" and "*:*:*:*:*:*:*:*" match every address; an IP matches
// itself; "a,b,c" any of the listed IPs; "192.168.1.{1,5,9}" the listed
// last octets; "192.168.1.*", "192.168.*.*", "192.168.1.1-100" and
// "192.168.1-3.*" ranges of IPv4 octets. IPv6 ranges are not supported
// and are refused when the file is loaded.
type addrMatcher struct {
	any   bool
	exact map[netip.Addr]bool
	// ranges: an IPv4 address matches when every octet lies in its range.
	ranges [][4][2]int
}

// compileAddr parses one white address pattern.
func compileAddr(pat string) (*addrMatcher, error) {
	pat = strings.TrimSpace(pat)
	m := &addrMatcher{}
	switch {
	case pat == "":
		return m, nil
	case pat == "*" || pat == "*.*.*.*" || pat == "*:*:*:*:*:*:*:*":
		m.any = true
		return m, nil
	case strings.HasSuffix(pat, "}"):
		open := strings.LastIndexByte(pat, '{')
		if open < 0 {
			return nil, fmt.Errorf("white address %q: '}' without '{'", pat)
		}
		head := pat[:open]
		for _, last := range strings.Split(pat[open+1:len(pat)-1], ",") {
			if err := m.addIP(head + strings.TrimSpace(last)); err != nil {
				return nil, fmt.Errorf("white address %q: %v", pat, err)
			}
		}
		return m, nil
	case strings.Contains(pat, ","):
		for _, a := range strings.Split(pat, ",") {
			if err := m.addIP(strings.TrimSpace(a)); err != nil {
				return nil, fmt.Errorf("white address %q: %v", pat, err)
			}
		}
		return m, nil
	case strings.ContainsAny(pat, "*-"):
		r, err := parseRange(pat)
		if err != nil {
			return nil, fmt.Errorf("white address %q: %v", pat, err)
		}
		m.ranges = append(m.ranges, r)
		return m, nil
	}
	if err := m.addIP(pat); err != nil {
		return nil, fmt.Errorf("white address %q: %v", pat, err)
	}
	return m, nil
}

func (m *addrMatcher) addIP(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("%q is not an IP address", s)
	}
	if m.exact == nil {
		m.exact = map[netip.Addr]bool{}
	}
	m.exact[a.Unmap()] = true
	return nil
}

// parseRange parses an IPv4 pattern whose octets are numbers, "*" or
// "lo-hi"; as in RocketMQ, once an octet is a range the rest must be "*".
func parseRange(pat string) ([4][2]int, error) {
	var r [4][2]int
	if strings.Contains(pat, ":") {
		return r, fmt.Errorf("IPv6 ranges are not supported; list the addresses instead")
	}
	parts := strings.Split(pat, ".")
	if len(parts) != 4 {
		return r, fmt.Errorf("want four octets")
	}
	ranged := false
	for i, p := range parts {
		p = strings.TrimSpace(p)
		switch {
		case p == "*":
			r[i] = [2]int{0, 255}
			ranged = true
			continue
		case ranged:
			return r, fmt.Errorf("octet %d (%q) after a range must be *", i+1, p)
		case strings.Contains(p, "-"):
			lo, hi, _ := strings.Cut(p, "-")
			a, err1 := octet(lo)
			b, err2 := octet(hi)
			if err1 != nil || err2 != nil || a > b {
				return r, fmt.Errorf("octet %d (%q): want lo-hi within 0..255", i+1, p)
			}
			r[i] = [2]int{a, b}
			ranged = true
			continue
		}
		v, err := octet(p)
		if err != nil {
			return r, fmt.Errorf("octet %d (%q): %v", i+1, p, err)
		}
		r[i] = [2]int{v, v}
	}
	return r, nil
}

func octet(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 || v > 255 {
		return 0, fmt.Errorf("want 0..255")
	}
	return v, nil
}

// match reports whether the client address (an IP, no port) matches.
func (m *addrMatcher) match(ip netip.Addr) bool {
	if m == nil || !ip.IsValid() {
		return false
	}
	if m.any {
		return true
	}
	ip = ip.Unmap()
	if m.exact[ip] {
		return true
	}
	if !ip.Is4() {
		return false
	}
	b := ip.As4()
	for _, r := range m.ranges {
		ok := true
		for i := range 4 {
			if int(b[i]) < r[i][0] || int(b[i]) > r[i][1] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
