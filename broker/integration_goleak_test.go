package broker

import (
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
)

// officialClientGoroutines is what the package's TestMain passes to
// goleak.VerifyTestMain (see testutil.OfficialClientGoroutines).
func officialClientGoroutines() []goleak.Option { return testutil.OfficialClientGoroutines() }
