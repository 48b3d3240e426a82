package storage

// SlowFSControlEnv names the environment variable that, under the slowfs
// build tag, points at a control file: while it holds a duration (e.g.
// "80ms"), every Sync, Msync and SyncDir of OSFS waits that long first, like
// a disk whose flushes are slow. Empty, missing or "0" means no delay. The
// chaos suite's slow-disk nemesis writes the file of one node and clears it
// on heal, so a running process turns slow and fast again without a restart.
const SlowFSControlEnv = "RAFTMQ_SLOWFS_CONTROL"
