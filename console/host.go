package console

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// hostCheck refuses a request whose Host header is not a name of this
// console. A page of another site can make a visitor's browser send
// requests to the console by rebinding its own DNS name to the console's
// address (DNS rebinding): the browser then takes the console for that
// site, same-origin, and reads its answers and posts actions. Such a
// request still names the other site in Host, which is what is checked.
func (c *Console) hostCheck(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.hostAllowed(r.Host) {
			writeError(w, http.StatusForbidden, "Host "+r.Host+" is not a name of this console: reach it by an IP address, "+
				"localhost or its metricsBindAddr, or add the name to consoleAllowedHosts (namesrv.conf)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether host (a Host header, port optional) names
// this console: an IP address (a rebinding needs a DNS name, so an address
// is what the browser was pointed at), localhost, the monitoring port's
// bind address, or one of Options.AllowedHosts ("*" allows any). An empty
// Host (HTTP/1.0, never a browser) is allowed.
func (c *Console) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")), ".")
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if name == "localhost" {
		return true
	}
	if bind := strings.ToLower(c.ns.Config().MetricsBindAddr); bind != "" && name == strings.TrimSuffix(bind, ".") {
		return true
	}
	for _, a := range c.opts.AllowedHosts {
		if a == "*" || name == strings.TrimSuffix(strings.ToLower(a), ".") {
			return true
		}
	}
	return false
}
