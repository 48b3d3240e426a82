// Package testutil holds helpers shared by the tests of several packages.
// It lives in non-test files so that any package's tests can import it.
//
// # Files
//
//   - wait.go: WaitFor, polling a condition with a deadline instead of
//     sleeping; FreePort, a port from internal/freeport (below the
//     kernel's ephemeral range, so a client connection cannot take it
//     between pick and bind).
//   - certs.go: TestCA, a certificate authority made per test (keys in
//     memory and the test's temporary directory, never committed).
//   - official.go: goleak ignores for the goroutines the official RocketMQ
//     Go client leaves behind.
//   - configfile.go: CheckConfigFile, the property the config-file fuzz
//     targets of the broker and the name server check.
//   - parallel.go: WaitingParallel, a wider -parallel default for packages
//     whose parallel tests mostly wait.
package testutil
