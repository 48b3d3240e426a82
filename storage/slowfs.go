//go:build slowfs

package storage

import (
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Under the slowfs build tag OSFS is wrapped in a SlowFS when
// SlowFSControlEnv is set (slowfs_control.go).

// slowFSPoll is how often the control file is read.
const slowFSPoll = 100 * time.Millisecond

func init() {
	if p := os.Getenv(SlowFSControlEnv); p != "" {
		defaultFS = NewSlowFS(defaultFS, p)
	}
}

// SlowFS wraps an FS and delays its flushes by the duration its control
// file holds. The file is re-read by the first flush after slowFSPoll has
// passed since the last read (no goroutine: the wrapper lives as long as
// the process).
type SlowFS struct {
	FS
	control string
	delay   atomic.Int64 // nanoseconds
	readAt  atomic.Int64 // unix nanoseconds of the last read; 0 = never
}

// NewSlowFS returns inner with flushes delayed per the control file.
func NewSlowFS(inner FS, control string) *SlowFS { return &SlowFS{FS: inner, control: control} }

// Delay is the current flush delay.
func (s *SlowFS) Delay() time.Duration {
	now := time.Now().UnixNano()
	if last := s.readAt.Load(); now-last >= int64(slowFSPoll) && s.readAt.CompareAndSwap(last, now) {
		s.poll()
	}
	return time.Duration(s.delay.Load())
}

func (s *SlowFS) poll() {
	var d time.Duration
	if b, err := os.ReadFile(s.control); err == nil {
		if v, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil && v > 0 {
			d = v
		}
	}
	s.delay.Store(int64(d))
}

func (s *SlowFS) wait() {
	if d := s.Delay(); d > 0 {
		time.Sleep(d)
	}
}

// OpenFile opens a file whose Sync and Msync are delayed.
func (s *SlowFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &slowFile{File: f, fs: s}, nil
}

// SyncDir delays, then syncs the directory.
func (s *SlowFS) SyncDir(path string) error {
	s.wait()
	return s.FS.SyncDir(path)
}

type slowFile struct {
	File
	fs *SlowFS
}

func (f *slowFile) Sync() error {
	f.fs.wait()
	return f.File.Sync()
}

func (f *slowFile) Msync(b []byte) error {
	f.fs.wait()
	return f.File.Msync(b)
}
