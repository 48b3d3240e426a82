package jepsen

import (
	"fmt"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/storage"
)

// diskPressureMargin is how far below the brokers' forced-deletion ratio
// the run directory's file system may be before the report warns: a run
// writes a few GiB, which can push it over.
const diskPressureMargin = 3

// diskPressureNote warns when the file system under dir is nearly as full,
// as the brokers measure it (df's Use%, RocketMQ's disk ratio), as
// CleanForciblyRatio: above it every member's retention deletes its oldest
// CommitLog segments whether expired or not, so queue heads go on every
// replica (the replica check counts them below a
// replica's retention floor) and early %DLQ% messages vanish everywhere
// (the DLQ check then reports them missing). "" when there is room.
func diskPressureNote(dir string) string {
	used, total, err := storage.OSFS().DiskUsage(dir)
	if err != nil || total == 0 {
		return ""
	}
	pct := float64(used) * 100 / float64(total)
	limit := store.DefaultRetentionConfig().CleanForciblyRatio
	if pct < float64(limit-diskPressureMargin) {
		return ""
	}
	return fmt.Sprintf("WARNING: the file system under %s is %.1f %% used (df's Use%%, as the brokers count it); "+
		"above %d %% their retention deletes the oldest CommitLog segments on every member, so early messages and %%DLQ%% entries "+
		"leave every replica; put -dir on a file system with room (e.g. /dev/shm)", dir, pct, limit)
}
