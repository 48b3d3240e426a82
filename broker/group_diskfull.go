package broker

import (
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/storage"
)

// Disk-full handling of a Raft member:
//
//   - every file operation of the member's store and Raft log (one FS seam),
//     and every Raft snapshot write, reports ENOSPC/EDQUOT to the store's disk
//     guard at once (store.MessageStore.NoteWriteError), rather than leaving
//     it to the next usage check;
//   - a leader whose guard is set hands leadership to the most caught-up
//     follower able to campaign (group_transfer.go), so a group whose
//     followers have room keeps taking writes.
//     hashicorp/raft's transfer first replicates the target up to the
//     leader's last index and gives up if it cannot within an election
//     timeout, so "a follower is up to date" is its check, not ours.
//     Transfers are rate-limited: a node cannot know whether its followers'
//     disks are full too, and without a gap two full nodes would pass
//     leadership back and forth;
//   - a member whose Raft log stopped after a write failure recovers it in
//     place every recoverRetry (recoverLog), on any role.

// diskStepDownConfig tunes the disk-full step-down. Defaults in
// defaultDiskStepDown; tests shorten them through groupOptions.
type diskStepDownConfig struct {
	// interval is how often the leader looks at its disk guard.
	interval time.Duration
	// gap is the minimum time between two transfers started by this node.
	gap time.Duration
	// retry is the wait after a transfer that failed (no follower caught
	// up in time, a transfer already running).
	retry time.Duration
	// recoverRetry is the wait between attempts to recover a stopped Raft
	// log (see recoverLog).
	recoverRetry time.Duration
}

func defaultDiskStepDown() diskStepDownConfig {
	return diskStepDownConfig{interval: 250 * time.Millisecond, gap: 30 * time.Second, retry: 5 * time.Second, recoverRetry: time.Second}
}

// recoverLog restarts writes of a Raft log that a write failure stopped (a
// member whose log refuses every append stays a voter that never
// acknowledges, and the group silently runs one node short). raftlog
// does not stop for ENOSPC (it refuses the batch); what stops it is an I/O error on a
// batch (EIO on write or sync), and LogStore.Recover cuts that batch back
// to what Raft last saw stored, zeroing and syncing its bytes, so nothing
// unsynced is ever served or acknowledged. It reports whether the log is
// writable afterwards.
func (g *Group) recoverLog() bool {
	f := g.logs.Failure()
	if f == nil {
		return true
	}
	if err := g.logs.Recover(); err != nil {
		g.log.Error("raft log stopped after a write failure and could not be recovered yet; this member acknowledges nothing until it is",
			zap.String("group", g.cfg.Raft.DLegerGroup), zap.NamedError("failure", f), zap.Error(err))
		return false
	}
	g.log.Warn("raft log recovered after a write failure: the failed batch was cut back, appends accepted again",
		zap.String("group", g.cfg.Raft.DLegerGroup), zap.NamedError("failure", f))
	return true
}

// LogStopped returns the write failure that stopped this member's Raft log
// (nil while it accepts appends). The step-down loop retries recovery every
// recoverRetry; a non-nil value that persists means the member needs a
// restart.
func (g *Group) LogStopped() error { return g.logs.Failure() }

// ApplyStopped returns the *ApplyStoppedError that stopped this member's
// FSM (nil while it applies): an entry's ConsumeQueue or index units could
// not be written within raftApplyRetryTimeout. The member keeps storing the
// Raft log but applies nothing more until it is restarted.
func (g *Group) ApplyStopped() error {
	if s := g.fsm.stopped.Load(); s != nil {
		return s
	}
	return nil
}

// runDiskStepDown is the step-down loop; it runs until g.quit closes.
func (g *Group) runDiskStepDown(cfg diskStepDownConfig) {
	defer close(g.stepDownDone)
	t := time.NewTicker(cfg.interval)
	defer t.Stop()
	var next time.Time        // no transfer before this
	var nextRecover time.Time // no log recovery attempt before this
	for {
		select {
		case <-g.quit:
			return
		case <-t.C:
		}
		if g.logs.Failure() != nil && !time.Now().Before(nextRecover) && !g.recoverLog() {
			nextRecover = time.Now().Add(cfg.recoverRetry)
		}
		// A leader whose FSM stopped (ApplyStopped) answers every write
		// with an error: it hands leadership away like a full one.
		// TransferLeadership flushes the coalesced offset commits first:
		// both can still replicate a small command entry (the disk guard
		// refuses messages, not commands, and a stopped FSM still lets
		// Raft commit entries that the other members apply), so the new
		// leader has every commit this one acknowledged.
		stopped := g.ApplyStopped()
		if !g.roles.IsLeader() || (!g.ms.DiskFull() && stopped == nil) || time.Now().Before(next) || !g.hasOtherVoter() {
			continue
		}
		from := g.raft.CurrentTerm()
		g.log.Warn("disk full or apply stopped on the leader: transferring leadership to the most caught-up follower",
			zap.String("group", g.cfg.Raft.DLegerGroup), zap.Uint64("term", from), zap.Bool("diskFull", g.ms.DiskFull()),
			zap.NamedError("applyStopped", stopped))
		if err := g.TransferLeadership(""); err != nil {
			next = time.Now().Add(cfg.retry)
			g.log.Warn("leadership transfer away from the disk-full leader failed; will retry",
				zap.Error(err), zap.Duration("in", cfg.retry))
			continue
		}
		next = time.Now().Add(cfg.gap)
		g.log.Warn("leadership transferred away from the disk-full leader",
			zap.String("newLeader", g.LeaderID()), zap.Uint64("term", g.raft.CurrentTerm()),
			zap.Duration("noTransferFor", cfg.gap))
	}
}

// hasOtherVoter reports whether the configuration has a voter besides this
// node (a single-node group has nobody to hand over to).
func (g *Group) hasOtherVoter() bool {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != g.cfg.Raft.DLegerSelfID {
			return true
		}
	}
	return false
}

// noSpaceFS is the member's store FS: it passes everything through and
// reports errors of mutating operations to the store's disk guard, which
// only acts on ENOSPC/EDQUOT. ms is set once the store is open; errors
// before that (recovery) are left to the usage check.
type noSpaceFS struct {
	storage.FS
	ms atomic.Pointer[store.MessageStore]
}

func (f *noSpaceFS) note(err error) error {
	if err != nil {
		if ms := f.ms.Load(); ms != nil {
			ms.NoteWriteError(err)
		}
	}
	return err
}

// OpenFile implements storage.FS.
func (f *noSpaceFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, f.note(err)
	}
	return &noSpaceFile{File: file, fs: f}, nil
}

// Rename implements storage.FS (checkpoint and meta files are renamed into place).
func (f *noSpaceFS) Rename(oldname, newname string) error {
	return f.note(f.FS.Rename(oldname, newname))
}

// MkdirAll implements storage.FS.
func (f *noSpaceFS) MkdirAll(path string, perm os.FileMode) error {
	return f.note(f.FS.MkdirAll(path, perm))
}

// SyncDir implements storage.FS.
func (f *noSpaceFS) SyncDir(path string) error { return f.note(f.FS.SyncDir(path)) }

// noSpaceFile reports its write errors to the disk guard.
type noSpaceFile struct {
	storage.File
	fs *noSpaceFS
}

// WriteAt implements storage.File.
func (f *noSpaceFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.note(err)
}

// Fallocate implements storage.File (a new segment on a full disk fails here).
func (f *noSpaceFile) Fallocate(size int64) error { return f.fs.note(f.File.Fallocate(size)) }

// Truncate implements storage.File.
func (f *noSpaceFile) Truncate(size int64) error { return f.fs.note(f.File.Truncate(size)) }

// Sync implements storage.File.
func (f *noSpaceFile) Sync() error { return f.fs.note(f.File.Sync()) }

// Msync implements storage.File.
func (f *noSpaceFile) Msync(b []byte) error { return f.fs.note(f.File.Msync(b)) }

// noSpaceSnapshots wraps the Raft snapshot store (hashicorp/raft's file
// store, outside the FS seam) so a snapshot that fails for lack of space
// sets the disk guard too.
type noSpaceSnapshots struct {
	raft.SnapshotStore
	note func(error) error
}

// Create implements raft.SnapshotStore.
func (s noSpaceSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, s.note(err)
	}
	return &noSpaceSink{SnapshotSink: sink, note: s.note}, nil
}

// noSpaceSink reports its write errors to the disk guard.
type noSpaceSink struct {
	raft.SnapshotSink
	note func(error) error
}

var _ io.Writer = (*noSpaceSink)(nil)

// Write implements raft.SnapshotSink.
func (s *noSpaceSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	return n, s.note(err)
}

// Close implements raft.SnapshotSink (the buffered tail and the fsync).
func (s *noSpaceSink) Close() error { return s.note(s.SnapshotSink.Close()) }
