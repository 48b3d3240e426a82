package testutil

import (
	"flag"
	"runtime"
	"strconv"
)

// WaitingParallel lets at least n t.Parallel tests of the package run at
// once (go test's -parallel, GOMAXPROCS by default; never below that)
// unless the command line set it. Call it from TestMain of a package whose
// parallel tests spend most of their time waiting on timers (elections,
// timeouts, gossip rounds): on a 2-core machine GOMAXPROCS of them at a
// time leaves the cores mostly idle, while a few more still leave each
// test the CPU it needs.
func WaitingParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
	}
}
