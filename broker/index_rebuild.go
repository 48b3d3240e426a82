package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// After a crash the store's Load drops the index files newer than its
// checkpoint (they may hold torn writes) and says where indexing must
// start again (IndexService.RebuildFrom). Raft re-applies only the entries
// after the local snapshot, so the messages from there up to the snapshot
// must be indexed again from the log. The live file can cover the whole
// CommitLog (maxIndexNum entries), so that is gigabytes to read: it runs
// after the member is up, not before, through the store's index backfill
// (files of their own placed before the live ones, as catch-up's index
// phase writes), paced like catch-up. Messages are served meanwhile; only
// QUERY_MESSAGE by key misses the range until the rebuild commits.
//
// The range is recorded in a marker (storePathRootDir/raft/INDEX_REBUILD,
// "<fromOffset> <toIndex>") before Raft starts and removed after the
// commit, so a crash during the rebuild resumes it at the next start. The
// files already indexed are taken before Raft starts too: the live tail may
// append to the last kept file, whose range then spans the rebuild's. A
// failed attempt is retried (with the files it moved in counted as done).

// indexRebuildEntryHook, when set (tests), runs before each entry the
// rebuild reads; an error ends the attempt (the marker stays).
var indexRebuildEntryHook atomic.Pointer[func(ctx context.Context, g *Group, index uint64) error]

// indexRebuild is a pending rebuild: the messages from CommitLog offset
// from through those of Raft entry to.
type indexRebuild struct {
	from int64
	to   uint64
	// covered are the CommitLog ranges of the index files kept at the start.
	covered [][2]int64
}

func (g *Group) indexRebuildMarkerPath() string {
	return filepath.Join(g.cfg.Store.StorePathRootDir, "raft", "INDEX_REBUILD")
}

// planIndexRebuild merges what this start's crash recovery dropped with an
// unfinished earlier rebuild and records the result before Raft starts
// (Raft's first snapshot after the start may move the snapshot past the
// range's end). ok is false when there is nothing to rebuild.
func (g *Group) planIndexRebuild() (r indexRebuild, ok bool, err error) {
	idx := g.ms.Index()
	if idx == nil {
		return r, false, nil
	}
	r.from = idx.RebuildFrom()
	prev, havePrev, err := g.readIndexRebuildMarker()
	if err != nil {
		return r, false, err
	}
	if r.from >= 0 {
		snaps, err := g.snaps.List()
		if err != nil {
			return r, false, err
		}
		if len(snaps) > 0 {
			r.to = snaps[0].Index
		} else {
			r.from = -1 // no snapshot: Raft re-applies, and so re-indexes, the whole log
		}
	}
	if havePrev {
		if r.from < 0 {
			r = prev
		} else {
			r.from, r.to = min(r.from, prev.from), max(r.to, prev.to)
		}
	}
	if r.from < 0 || r.to == 0 {
		return r, false, nil
	}
	r.covered = idx.CoveredRanges()
	if err := storage.WriteFileAtomic(g.diskFS, g.indexRebuildMarkerPath(), []byte(r.marker())); err != nil {
		return r, false, fmt.Errorf("broker: record the index rebuild after a crash: %w", err)
	}
	return r, true, nil
}

func (g *Group) readIndexRebuildMarker() (indexRebuild, bool, error) {
	s, err := readMarkerFile(g.diskFS, g.indexRebuildMarkerPath())
	if s == "" || err != nil {
		return indexRebuild{}, false, err
	}
	r, ok := parseIndexRebuildMarker(s)
	if !ok {
		return r, false, fmt.Errorf("broker: %s holds %q, not \"<fromOffset> <toIndex>\"; remove it and the index directory to re-index everything",
			g.indexRebuildMarkerPath(), s)
	}
	return r, true, nil
}

// marker is the INDEX_REBUILD file's text: "<fromOffset> <toIndex>".
func (r indexRebuild) marker() string { return fmt.Sprintf("%d %d\n", r.from, r.to) }

// parseIndexRebuildMarker reads marker's text back; ok is false for
// anything else.
func parseIndexRebuildMarker(s string) (r indexRebuild, ok bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return r, false
	}
	var err1, err2 error
	r.from, err1 = strconv.ParseInt(f[0], 10, 64)
	r.to, err2 = strconv.ParseUint(f[1], 10, 64)
	return r, err1 == nil && err2 == nil && r.from >= 0
}

// startIndexRebuild runs the rebuild in the background (tracked: Close
// waits for it).
func (g *Group) startIndexRebuild(r indexRebuild) {
	g.indexRebuildDone = make(chan struct{})
	go func() {
		defer close(g.indexRebuildDone)
		ctx, cancel := g.quitContext()
		defer cancel()
		began := time.Now()
		backoff := time.Second
		for {
			n, moved, err := g.rebuildIndex(ctx, r)
			if err == nil {
				g.log.Info("index rebuilt after a crash", zap.Int64("fromOffset", r.from), zap.Uint64("toIndex", r.to),
					zap.Int64("messages", n), zap.Duration("took", time.Since(began)))
				return
			}
			if ctx.Err() != nil {
				return
			}
			r.covered = append(r.covered, moved...)
			g.log.Warn("index rebuild after a crash failed; retrying (QUERY_MESSAGE by key misses the range until it ends)",
				zap.Int64("fromOffset", r.from), zap.Uint64("toIndex", r.to), zap.Duration("retryIn", backoff), zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Minute)
		}
	}()
}

// waitIndexRebuild waits for the rebuild (g.quit is closed).
func (g *Group) waitIndexRebuild() {
	if g.indexRebuildDone != nil {
		<-g.indexRebuildDone
	}
}

// rebuildIndex indexes the messages of r and removes the marker; moved are
// the ranges of the files it moved in, also when it fails.
func (g *Group) rebuildIndex(ctx context.Context, r indexRebuild) (indexed int64, moved [][2]int64, err error) {
	// One backfill at a time: a new one clears what another left.
	g.backfillMu.Lock()
	defer g.backfillMu.Unlock()
	first, err := g.logs.FirstIndex()
	if err != nil {
		return 0, nil, err
	}
	at, err := g.logs.FirstIndexFrom(r.from)
	if err != nil {
		return 0, nil, err
	}
	if at > first {
		first = at - 1 // the entry holding from starts before it
	}
	last, err := g.logs.LastIndex()
	if err != nil {
		return 0, nil, err
	}
	last = min(last, r.to)
	bf, err := g.ms.Index().BeginBackfillCovered(r.covered)
	if err != nil {
		return 0, nil, err
	}
	defer bf.Close()
	defer func() { moved = bf.Moved }()
	pace := newPacer(g.cfg.CatchupBytesPerSecond)
	var l raft.Log
	for i := first; first > 0 && i <= last; i++ {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		if hook := indexRebuildEntryHook.Load(); hook != nil {
			if err := (*hook)(ctx, g, i); err != nil {
				return 0, nil, err
			}
		}
		// Retention may remove the oldest entries meanwhile: their
		// messages need no index.
		if lo, err := g.logs.FirstIndex(); err == nil && i < lo {
			i = lo
		}
		if err := g.logs.GetLog(i, &l); err != nil {
			return 0, nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		c, err := DecodeCommand(l.Extensions, l.Data)
		if err != nil {
			return 0, nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if c.Type != CmdMessages && c.Type != CmdTxnEnd {
			continue
		}
		if err := g.indexEntry(bf.Dispatch, i, l.Data, l.AppendedAt.UnixMilli()); err != nil {
			return 0, nil, err
		}
		if err := pace.wait(ctx, len(l.Data)); err != nil {
			return 0, nil, err
		}
	}
	if err := bf.Commit(); err != nil {
		return 0, nil, err
	}
	if err := g.diskFS.Remove(g.indexRebuildMarkerPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, nil, err
	}
	return bf.Indexed, nil, g.diskFS.SyncDir(filepath.Dir(g.indexRebuildMarkerPath()))
}
