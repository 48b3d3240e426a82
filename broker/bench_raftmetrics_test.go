package broker

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics"
)

// raftMetrics, with RAFTMQ_BENCH_RAFTMETRICS=1, collects hashicorp/raft's
// own timers (storeLogs, dispatchLog, commitTime, appendEntries, fsm.apply)
// for the benchmark and logs their means at the end: where a replication
// round's time goes.
func raftMetrics(b *testing.B) {
	if os.Getenv("RAFTMQ_BENCH_RAFTMETRICS") != "1" {
		return
	}
	sink := metrics.NewInmemSink(time.Hour, time.Hour)
	cfg := metrics.DefaultConfig("raft")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, iv := range sink.Data() {
			var keys []string
			for k := range iv.Samples {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				s := iv.Samples[k]
				if s.Count < 100 {
					continue
				}
				fmt.Fprintf(os.Stderr, "%-60s n=%7d mean=%8.3fms\n", k, s.Count, s.AggregateSample.Mean())
			}
		}
		off := metrics.DefaultConfig("raft")
		off.EnableRuntimeMetrics = false // its collector goroutine never stops (goleak)
		_, _ = metrics.NewGlobal(off, &metrics.BlackholeSink{})
	})
}
