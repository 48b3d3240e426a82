package acl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/storage"
	"go.uber.org/zap"
)

// Store holds the rules of one plain_acl.yml and keeps them current: the
// file is polled (Watch) and reloaded when its modification time or size
// changes; the admin commands (Update, Delete, SetGlobalWhite) rewrite it.
// A file that fails to parse keeps the previous rules in force and logs
// why, as RocketMQ keeps its last good configuration.
type Store struct {
	path string
	log  *zap.Logger
	now  func() time.Time

	rules atomic.Pointer[Rules]

	mu    sync.Mutex // serialises reloads and rewrites
	stamp fileStamp  // guarded by mu: the file as last loaded
	// lastErr is the last reload's error, reported once per change.
	lastErr string // guarded by mu
}

// fileStamp tells file versions apart. The change time and inode are in
// it because an edit can keep the size and the modification time (cp -p,
// rsync -t, touch -r): no tool can set the change time, and a rename-over
// brings another inode.
type fileStamp struct {
	mod, change time.Time
	size        int64
	ino         uint64
}

func stampOf(fi fs.FileInfo) fileStamp {
	st := fileStamp{size: fi.Size(), mod: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.change, st.ino = time.Unix(sys.Ctim.Unix()), sys.Ino
	}
	return st
}

// Open loads path. A missing or invalid file is an error: with aclEnable
// set, starting with no rules would refuse every request, the admin
// account's included, with no way to add one.
func Open(path string, log *zap.Logger) (*Store, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Store{path: path, log: log, now: time.Now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.reloadLocked(true); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the file the rules come from.
func (s *Store) Path() string { return s.path }

// Rules returns the rules in force.
func (s *Store) Rules() *Rules { return s.rules.Load() }

// Reload re-reads the file if its stamp (times, size, inode) changed (or
// always, with force) and reports whether new rules took effect.
func (s *Store) Reload(force bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(force)
}

func (s *Store) reloadLocked(force bool) (bool, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	st := stampOf(fi)
	if !force && st == s.stamp {
		return false, nil
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	r, err := Compile(data)
	if err != nil {
		return false, fmt.Errorf("%s: %w", s.path, err)
	}
	s.stamp = st
	if old := s.rules.Load(); old != nil && old.Hash == r.Hash {
		return false, nil
	}
	s.rules.Store(r)
	s.log.Info("ACL rules loaded", zap.String("file", s.path), zap.Int("accounts", r.Accounts),
		zap.Int64("version", r.Version.Counter), zap.String("hash", r.Hash))
	return true, nil
}

// Watch polls the file every interval until quit closes. Polling rather
// than inotify: it needs no dependency, sees the rename-over that editors
// and config management tools do (an inotify watch on the old inode would
// miss it) and costs one stat per interval. A change is loaded once the
// file's stamp held still for one interval, so a file caught half
// written (truncated, not yet filled) is not taken for the new rules.
func (s *Store) Watch(quit <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var prev fileStamp
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		fi, err := os.Stat(s.path)
		if err != nil {
			continue // reported by the next poll that reaches Reload
		}
		st := stampOf(fi)
		if st != prev {
			prev = st
			continue
		}
		_, err = s.Reload(false)
		s.mu.Lock()
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != s.lastErr {
			s.lastErr = msg
			if err != nil {
				s.log.Error("ACL file not reloaded; the previous rules stay in force", zap.String("file", s.path), zap.Error(err))
			}
		}
		s.mu.Unlock()
	}
}

// Update adds an account or replaces the fields of an existing one
// (RocketMQ's updateAccessConfig): an empty secret key or default
// permission and a nil list keep the stored value, admin is always taken
// from a, and with setWhite (the request carried whiteRemoteAddress) the
// white address is replaced, cleared when empty: RocketMQ tests that
// field for null, not empty, so an empty one withdraws an address's unsigned
// access.
func (s *Store) Update(a Account, setWhite bool) error {
	return s.rewrite(func(f *File) error {
		for i := range f.Accounts {
			old := &f.Accounts[i]
			if old.AccessKey != a.AccessKey {
				continue
			}
			if a.SecretKey != "" {
				old.SecretKey = a.SecretKey
			}
			if setWhite {
				old.WhiteRemoteAddress = a.WhiteRemoteAddress
			}
			old.Admin = a.Admin
			if a.DefaultTopicPerm != "" {
				old.DefaultTopicPerm = a.DefaultTopicPerm
			}
			if a.DefaultGroupPerm != "" {
				old.DefaultGroupPerm = a.DefaultGroupPerm
			}
			if a.TopicPerms != nil {
				old.TopicPerms = a.TopicPerms
			}
			if a.GroupPerms != nil {
				old.GroupPerms = a.GroupPerms
			}
			return old.Validate()
		}
		if err := a.Validate(); err != nil {
			return err
		}
		f.Accounts = append(f.Accounts, a)
		return nil
	})
}

// Delete removes an account.
func (s *Store) Delete(accessKey string) error {
	return s.rewrite(func(f *File) error {
		i := slices.IndexFunc(f.Accounts, func(a Account) bool { return a.AccessKey == accessKey })
		if i < 0 {
			return fmt.Errorf("%w: accessKey %q", ErrNoAccount, accessKey)
		}
		f.Accounts = slices.Delete(f.Accounts, i, i+1)
		return nil
	})
}

// SetGlobalWhite replaces globalWhiteRemoteAddresses.
func (s *Store) SetGlobalWhite(addrs []string) error {
	return s.rewrite(func(f *File) error {
		f.GlobalWhiteRemoteAddresses = addrs
		return nil
	})
}

// rewrite applies change to the file's current content, bumps its
// dataVersion, checks the result compiles, writes it (a temporary file
// renamed over the old one) and loads it.
func (s *Store) rewrite(change func(*File) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	f, err := ParseFile(data)
	if err != nil {
		return err
	}
	if err := change(f); err != nil {
		if errors.Is(err, ErrNoAccount) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	var v DataVersion
	if len(f.DataVersion) > 0 {
		v = f.DataVersion[0]
	}
	f.DataVersion = []DataVersion{{Counter: v.Counter + 1, Timestamp: s.now().UnixMilli()}}
	out, err := f.Marshal()
	if err != nil {
		return err
	}
	if _, err := Compile(out); err != nil {
		return err
	}
	// The file holds secret keys: a new one is private, an existing one
	// keeps the mode its operator gave it.
	perm := fs.FileMode(0o600)
	if fi, err := os.Stat(s.path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := storage.WriteFileAtomicPerm(storage.OSFS(), s.path, out, perm); err != nil {
		return err
	}
	_, err = s.reloadLocked(true)
	return err
}
