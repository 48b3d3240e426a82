package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Index of a backfilled range: a member that installed a snapshot and then
// fetched the CommitLog before it (full-data catch-up) indexes those older
// messages into files of their own, built under <index>/backfill and moved
// in front of the live files as each is completed. The live tail keeps
// indexing meanwhile (BuildIndex skips nothing it should not: the older
// messages are below everything it indexed, in files it never writes).
// Both write through putKeys, so a message gets the same entries either way.
//
// Progress is the completed files: a file is moved in when it is full and
// at Commit; a new IndexBackfill first removes what an interrupted one left
// under backfill/ and skips messages within a file already moved in
// (BeginPhyOffset..EndPhyOffset), so a restart re-indexes only what the
// last incomplete file held, and never indexes a message twice.

const backfillDirName = "backfill"

// Index returns the store's index service (nil when messageIndexEnable is
// false).
func (s *MessageStore) Index() *IndexService { return s.idx }

// IndexBackfill indexes messages older than the live files'. It is used by
// one goroutine.
type IndexBackfill struct {
	s   *IndexService
	dir string
	// covered are the [begin, end] CommitLog ranges of the files already
	// in the service when it started.
	covered [][2]int64
	cur     *IndexFile
	curMF   *storage.MappedFile
	seq     int
	lastPhy int64
	// Indexed counts the messages indexed.
	Indexed int64
	// Moved are the [begin, end] CommitLog ranges of the files moved in.
	Moved [][2]int64
}

// BeginBackfill starts indexing an older range, removing the files an
// interrupted backfill left; the files in the service now are taken as
// indexed.
func (s *IndexService) BeginBackfill() (*IndexBackfill, error) {
	return s.BeginBackfillCovered(s.CoveredRanges())
}

// CoveredRanges returns the [begin, end] CommitLog ranges of the index
// files in the service.
func (s *IndexService) CoveredRanges() [][2]int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var covered [][2]int64
	for _, f := range s.files {
		if f.IndexCount() > 1 {
			covered = append(covered, [2]int64{f.BeginPhyOffset(), f.EndPhyOffset()})
		}
	}
	return covered
}

// BeginBackfillCovered is BeginBackfill taking only the given ranges as
// indexed: a caller that runs while the live tail indexes (which may
// append to the last file and so widen its range over the backfill's)
// takes the ranges before the live tail starts.
func (s *IndexService) BeginBackfillCovered(covered [][2]int64) (*IndexBackfill, error) {
	dir := filepath.Join(s.dir, backfillDirName)
	if err := storage.MkdirAllDurable(s.fsys, dir); err != nil {
		return nil, fmt.Errorf("index backfill: %w", err)
	}
	ents, err := s.fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("index backfill: %w", err)
	}
	for _, e := range ents {
		if err := s.fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("index backfill: remove a leftover: %w", err)
		}
	}
	return &IndexBackfill{s: s, dir: dir, lastPhy: -1, covered: slices.Clone(covered)}, nil
}

// Dispatch implements Dispatcher: it indexes one message of the older
// range (in CommitLog order) unless a file already in the service covers
// its offset.
func (b *IndexBackfill) Dispatch(req *DispatchRequest) error {
	if !indexable(req.Keys, req.UniqKey, req.SysFlag) {
		return nil
	}
	if req.CommitLogOffset <= b.lastPhy {
		return fmt.Errorf("%w: index backfill at %d after %d", ErrInvalidConfig, req.CommitLogOffset, b.lastPhy)
	}
	for _, c := range b.covered {
		if req.CommitLogOffset >= c[0] && req.CommitLogOffset <= c[1] {
			return nil
		}
	}
	if err := putKeys(b.writable, 0, req.Topic, req.Keys, req.UniqKey, req.CommitLogOffset, req.StoreTimestamp); err != nil {
		return err
	}
	b.lastPhy = req.CommitLogOffset
	b.Indexed++
	return nil
}

// writable returns the file being built, moving a full one in first.
func (b *IndexBackfill) writable() (*IndexFile, error) {
	if b.cur != nil && !b.cur.IsWriteFull() {
		return b.cur, nil
	}
	if b.cur != nil {
		if err := b.moveIn(); err != nil {
			return nil, err
		}
	}
	b.seq++
	mf, f, err := b.s.openFile(filepath.Join(b.dir, strconv.Itoa(b.seq)), 0, 0)
	if err != nil {
		return nil, err
	}
	b.cur, b.curMF = f, mf
	return f, nil
}

// Commit moves the last file in; the backfilled range is then queryable.
func (b *IndexBackfill) Commit() error {
	if b.cur == nil {
		return nil
	}
	return b.moveIn()
}

// Close releases the file being built (an abandoned backfill; the next
// one removes it).
func (b *IndexBackfill) Close() error {
	if b.curMF == nil {
		return nil
	}
	err := b.curMF.Close()
	b.cur, b.curMF = nil, nil
	return err
}

// moveIn makes the current file durable, names it so that it sorts between
// the files around its range (names order the files at Load), renames it
// into the index directory and inserts it into the service's list.
func (b *IndexBackfill) moveIn() error {
	f, mf := b.cur, b.curMF
	b.cur, b.curMF = nil, nil
	if f.IndexCount() <= 1 {
		return mf.Destroy()
	}
	if _, err := mf.Flush(); err != nil {
		mf.Close()
		return fmt.Errorf("index backfill: flush %s: %w", mf.Path(), err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	at := len(s.files)
	for i, g := range s.files {
		if g.IndexCount() <= 1 || g.BeginPhyOffset() > f.EndPhyOffset() {
			at = i
			break
		}
	}
	name, err := b.nameBetween(at, f.BeginTimestamp())
	if err != nil {
		mf.Close()
		return fmt.Errorf("index backfill: CommitLog offsets [%d, %d]: %w", f.BeginPhyOffset(), f.EndPhyOffset(), err)
	}
	path := filepath.Join(s.dir, name)
	if err := mf.Close(); err != nil {
		return fmt.Errorf("index backfill: %w", err)
	}
	if err := s.fsys.Rename(filepath.Join(b.dir, strconv.Itoa(b.seq)), path); err != nil {
		return fmt.Errorf("index backfill: %w", err)
	}
	if err := s.fsys.SyncDir(s.dir); err != nil {
		return fmt.Errorf("index backfill: %w", err)
	}
	nmf, nf, err := s.openFile(path, 0, 0)
	if err != nil {
		return err
	}
	nf.markSynced(nf.IndexCount(), nf.EndTimestamp())
	s.files = slices.Insert(s.files, at, nf)
	s.mfs = slices.Insert(s.mfs, at, nmf)
	s.maxIndexedPhy = max(s.maxIndexedPhy, nf.EndPhyOffset())
	b.Moved = append(b.Moved, [2]int64{nf.BeginPhyOffset(), nf.EndPhyOffset()})
	s.log.Info("index backfill: file moved in", zap.String("file", path), zap.Int64("fromPhy", nf.BeginPhyOffset()),
		zap.Int64("toPhy", nf.EndPhyOffset()), zap.Int("entries", nf.IndexCount()-1))
	return nil
}

// nameBetween names a file going in at position at: by its first store
// time (as a file created then would be named), or, when that does not
// sort between its neighbours (another clock named them), just after the
// previous file's name or a little before the next one's.
func (b *IndexBackfill) nameBetween(at int, beginTs int64) (string, error) {
	var prev, next string
	if at > 0 {
		prev = filepath.Base(b.s.files[at-1].Name())
	}
	if at < len(b.s.files) {
		next = filepath.Base(b.s.files[at].Name())
	}
	fits := func(n string) bool { return (prev == "" || n > prev) && (next == "" || n < next) }
	cands := []string{indexFileName(time.UnixMilli(beginTs))}
	if prev != "" {
		cands = append(cands, nextIndexFileName(prev))
	}
	if next != "" {
		if t, err := time.ParseInLocation(indexFileNameLayout, next[:14]+"."+next[14:], time.Local); err == nil {
			// A minute before, so that later backfill files fit after it.
			cands = append(cands, indexFileName(t.Add(-time.Minute)), indexFileName(t.Add(-time.Millisecond)))
		}
	}
	for _, n := range cands {
		if fits(n) {
			return n, nil
		}
	}
	return "", fmt.Errorf("no file name sorts between %s and %s", prev, next)
}
