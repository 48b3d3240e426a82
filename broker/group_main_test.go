package broker

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines after all tests of the package
// (Raft members, batchers, role observers and the processors' servers). The
// official client's known background goroutines are allowed
// (integration_goleak_test.go).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, officialClientGoroutines()...)
}
