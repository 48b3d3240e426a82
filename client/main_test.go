package client

import (
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
)

func TestMain(m *testing.M) {
	// The official client (used by the comparison benchmark) logs every
	// route refresh at info level.
	rlog.SetLogLevel("error")
	goleak.VerifyTestMain(runThenCloseShared{m}, testutil.OfficialClientGoroutines()...)
}
