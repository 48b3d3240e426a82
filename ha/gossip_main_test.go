package ha

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestMain fails the package if a test leaves goroutines behind. No
// memberlist goroutine is ignored: its Shutdown closes the transport and
// stops the schedulers, and goleak's retries cover the few handlers that
// return a moment after. With childEnv set the binary is a gossip node
// for a test to freeze (runGossipChild), not a test run.
//
// The tests that wait on gossip timers (probes, suspicion, rejoin rounds)
// with nodes of their own, on ports from testutil.FreePort, call
// t.Parallel(): go test runs them after the sequential ones, at least six
// at a time (testutil.WaitingParallel), so their waits overlap; a test
// that keeps a core busy (TestResyncWhileMetaChanges) stays sequential.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runGossipChild(spec))
	}
	testutil.WaitingParallel(6)
	goleak.VerifyTestMain(m)
}
