package broker

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/storage"
)

// fullFS is the real file system whose disk can be made "full": while full,
// fallocate and pwrite fail with ENOSPC and the usage check (usageFS)
// reports 99 %, as on a disk a filler file has filled (jepsen's disk-full
// nemesis). Writes into and syncs of already allocated space keep working,
// as they do on a real full disk.
type fullFS struct {
	usageFS
}

// OpenFile implements storage.FS.
func (f *fullFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &fullFile{File: file, fs: f}, nil
}

// fullFile fails space-taking operations while its fullFS is full.
type fullFile struct {
	storage.File
	fs *fullFS
}

func (f *fullFile) noSpace(op string) error {
	return &os.PathError{Op: op, Path: f.File.Name(), Err: unix.ENOSPC}
}

// WriteAt implements storage.File: a write that extends the file fails (a
// write into fallocated space does not need new blocks).
func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.full.Load() {
		if size, err := f.File.Size(); err != nil || off+int64(len(p)) > size {
			return 0, f.noSpace("write")
		}
	}
	return f.File.WriteAt(p, off)
}

// Fallocate implements storage.File.
func (f *fullFile) Fallocate(size int64) error {
	if f.fs.full.Load() {
		return f.noSpace("fallocate")
	}
	return f.File.Fallocate(size)
}

// A follower whose disk fills up refuses appends (fallocate of
// a new CommitLog segment fails), but its Raft log must not stop for good:
// once space returns it catches up, every acknowledged message is on it, and
// its CommitLog is byte-identical to the others' up to the commit index.
func TestGroupFollowerDiskFullCatchesUp(t *testing.T) {
	c := newTestCluster(t, clusterOpts{prodTimings: true, segmentSize: 1 << 20, sync: true, tune: func(cfg *GroupConfig) {
		cfg.Store.CleanResourceInterval = 100 * time.Millisecond // the disk-full retention pass runs too
	}})
	fss := make([]*fullFS, len(c.nodes))
	for i := range c.nodes {
		c.stop(i)
	}
	sd := defaultDiskStepDown()
	sd.interval = 50 * time.Millisecond
	for i := range c.nodes {
		c.startOn(i, func(fsys storage.FS) storage.FS { fss[i] = &fullFS{usageFS{FS: fsys}}; return fss[i] }, &sd)
	}
	c.createTopic("T", 2)
	var acks []ack
	send := func(k int) { acks = append(acks, c.sendSeq(k, 8<<10)) }
	for k := range 20 {
		send(k)
	}
	// Every member has applied the first sends, so its ConsumeQueue files
	// exist: the fault this test is about is the Raft log's (a new
	// CommitLog segment), not a queue file that cannot be created (an
	// apply failure, after which the member serves no consistent reads).
	c.waitCaughtUp()
	l := c.leader()
	fi := c.followerOf(l)
	f := c.nodes[fi]
	before, _ := f.g().LogStore().LastIndex()
	fss[fi].full.Store(true)
	// ~4 MiB of messages: the follower needs new 1 MiB segments.
	for k := 20; k < 520; k++ {
		send(k)
	}
	behind, _ := f.g().LogStore().LastIndex()
	commit := l.g().Raft().CommitIndex()
	t.Logf("follower %s: last index %d before the disk filled, %d with it full; commit index %d", f.id, before, behind, commit)
	if behind >= commit {
		t.Fatalf("follower %s stored up to %d with a full disk (commit %d): the fault did not bite", f.id, behind, commit)
	}
	if err := f.g().LogStopped(); err != nil {
		t.Fatalf("follower's Raft log stopped by ENOSPC: %v", err)
	}
	fss[fi].full.Store(false)
	commit = c.waitCaughtUp()
	for _, n := range c.nodes {
		if err := n.g().LogStopped(); err != nil {
			t.Fatalf("%s: Raft log stopped: %v", n.id, err)
		}
		checkAcked(t, n, acks)
	}
	c.checkIdentical(0, commit, 2)
	testutil.WaitFor(t, 5*time.Second, "follower's disk guard lifts", func() bool { return !f.g().Store().DiskFull() })
}
