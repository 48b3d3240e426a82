package jepsen

// Saturation profile: the full profile's nemeses and duration, but the
// main producers run an unpaced closed loop with many workers, so the
// brokers' batches are full and senders wait on backpressure when faults
// hit (where the steady 400 sends/s never goes). 4 producers × 16 workers =
// 64 sends in flight at all times.
const (
	saturationWorkers = 16
	// saturationTmpfs: an unpaced run writes several times what full does.
	saturationTmpfs = 4 << 30
)

func saturation(full Profile) Profile {
	p := full
	p.Name = "saturation"
	p.Workload.OpsPerSecond = 0
	p.Workload.WorkersPerProducer = saturationWorkers
	p.TmpfsBytes = saturationTmpfs
	return p
}
