package broker

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestMain checks for leaked goroutines after all tests of the package
// (Raft members, batchers, role observers and the processors' servers). The
// official client's known background goroutines are allowed
// (integration_goleak_test.go).
//
// Tests that spend their time waiting (for timeouts, back-offs, elections,
// a hung peer) and share nothing with the others call t.Parallel(): go
// test runs them after the sequential ones, at least four at a time
// (testutil.WaitingParallel), so their waits overlap. "Share nothing"
// means their own name server, ports from testutil.FreePort, their own
// directories, no package variable or hook (catchupHoldHook and the like),
// no t.Setenv, no goleak check of their own, and no timing bound a waiting
// neighbour could break. Tests that keep a core busy stay sequential:
// beside each other they would starve their clusters' timers.
func TestMain(m *testing.M) {
	testutil.WaitingParallel(4)
	goleak.VerifyTestMain(m, officialClientGoroutines()...)
}
