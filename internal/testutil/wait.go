// Package testutil holds helpers shared by the tests of several packages.
// It lives in a non-test file so that any package's tests can import it.
package testutil

import (
	"net"
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

// FreePort asks the kernel for a free TCP port on 127.0.0.1. The port can be
// taken by someone else before the caller binds it; tests accept that small race.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
