package main

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testutil"
)

// adminMainEnv makes the test binary act as the raftmq binary: the exit
// code test re-executes itself with the arguments in this variable
// (separated by \x1f), so main's real os.Exit path is what is checked.
const adminMainEnv = "RAFTMQ_TEST_RUN_MAIN"

// mainEnv is the environment of a child process running this test binary
// as raftmq with args. Under -race a process that exits with status 0
// first sleeps GORACE's atexit_sleep_ms (1 s by default); the tests wait
// for their children to exit, so the children skip that sleep.
func mainEnv(args ...string) []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append(os.Environ(), "GORACE="+gorace, adminMainEnv+"="+strings.Join(args, "\x1f"))
}

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(adminMainEnv); ok {
		os.Args = append([]string{"raftmq"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, testutil.OfficialClientGoroutines()...)
}
