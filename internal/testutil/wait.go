package testutil

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/freeport"
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

// FreePort returns a port on 127.0.0.1 that is free for both TCP and UDP
// at the time of the call, from the process's one allocator (package
// freeport: below the ephemeral range, never a slot handed out before, so
// the ports a server derives from it stay clear of other callers').
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
