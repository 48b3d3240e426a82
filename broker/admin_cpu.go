package broker

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// processInstance identifies this OS process for the runtime info: a PID
// alone repeats across hosts and restarts, the start time and host do not
// together with it.
var processInstance = func() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano())
}()

// runtimeCPUKeys adds the process's CPU time and identity to the runtime
// info (wire.RuntimeProcessCPUMicros, wire.RuntimeProcessInstance), which
// `raftmq bench` samples around a run for each member's µs per message.
func runtimeCPUKeys(t map[string]string) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		t[wire.RuntimeProcessCPUMicros] = strconv.FormatInt((ru.Utime.Nano()+ru.Stime.Nano())/1e3, 10)
	}
	t[wire.RuntimeProcessInstance] = processInstance
}
