//go:build unix

package client_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the process used so far;
// benchmarks report it per message because it varies far less with the
// load of a shared machine than throughput does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
