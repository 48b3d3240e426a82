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

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(adminMainEnv); ok {
		os.Args = append([]string{"raftmq"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, testutil.OfficialClientGoroutines()...)
}
