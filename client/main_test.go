package client

import (
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestMain checks for leaked goroutines once the shared clusters are
// closed.
//
// Tests that spend their time waiting (a fake broker holding or refusing a
// request, a timeout, a rebalance interval) on brokers and name servers of
// their own call t.Parallel(): go test runs them after the sequential
// ones, at least six at a time (testutil.WaitingParallel), so their waits
// overlap. Tests on a shared cluster stay sequential (SharedCluster), as
// do those that keep a core busy.
func TestMain(m *testing.M) {
	// The official client (used by the comparison benchmark) logs every
	// route refresh at info level.
	rlog.SetLogLevel("error")
	testutil.WaitingParallel(6)
	goleak.VerifyTestMain(runThenCloseShared{m}, testutil.OfficialClientGoroutines()...)
}
