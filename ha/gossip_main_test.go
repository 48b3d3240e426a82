package ha

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind. No
// memberlist goroutine is ignored: its Shutdown closes the transport and
// stops the schedulers, and goleak's retries cover the few handlers that
// return a moment after.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
