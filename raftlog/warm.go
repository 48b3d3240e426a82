package raftlog

import (
	"os"
	"sync"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Segment warming (Options.WarmAhead). Segments are fallocated: their
// blocks are "unwritten" extents, so every sync after an append there also
// converts the extents it wrote and commits the file system journal — one
// more device flush per StoreLogs, and on ext4 the journal commits of all
// replicas sharing a disk queue behind each other. A warmer goroutine keeps
// the bytes ahead of the writer overwritten with durable zeros (pwrite +
// fdatasync through Options.FS, chunk by chunk), so the appends' syncs find
// written extents.
//
// Safety: every write into a segment happens under wmu (StoreLogs, the
// truncations, resets). The warmer claims a range strictly at or after the
// write position under wmu, writes it without the lock, and releases the
// claim under wmu; StoreLogs waits for a claim that its batch (or a blank
// filler closing the segment) could reach. A reset bumps warmGen so that a
// chunk finished for destroyed files does not count.
const (
	defaultWarmChunk = 1 << 20
	warmPage         = 4096
)

// warmState is guarded by wmu.
type warmState struct {
	ahead, chunk int64
	warmed       int64 // bytes before this position are warmed (or written)
	claimLo      int64 // claimed range [claimLo, claimHi) being zeroed; 0/0 = none
	claimHi      int64
	gen          uint64 // bumped by resets
	wake         chan struct{}
	quit         chan struct{}
	done         chan struct{}
	file         storage.File // open on fileOf's path
	fileOf       *storage.MappedFile
	stop         sync.Once
}

// startWarmer starts the warmer if Options.WarmAhead > 0.
func (s *LogStore) startWarmer() {
	if s.opts.WarmAhead <= 0 {
		return
	}
	w := &s.warm
	w.ahead, w.chunk = int64(s.opts.WarmAhead), int64(s.opts.WarmChunk)
	w.wake = make(chan struct{}, 1)
	w.quit = make(chan struct{})
	w.done = make(chan struct{})
	s.warmCond.L = &s.wmu
	go s.runWarmer()
	s.kickWarmerLocked()
}

// stopWarmer ends the warmer (before the files close). Not under wmu.
func (s *LogStore) stopWarmer() {
	w := &s.warm
	if w.quit == nil {
		return
	}
	w.stop.Do(func() {
		close(w.quit)
		<-w.done
		if w.file != nil {
			w.file.Close()
			w.file = nil
		}
	})
}

// kickWarmerLocked wakes the warmer when the writer got within half the
// warm distance of the warmed position.
func (s *LogStore) kickWarmerLocked() {
	w := &s.warm
	if w.wake == nil || s.nextPos+w.ahead/2 < w.warmed {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// waitWarmLocked waits (releasing wmu meanwhile) until no claimed range
// lies before the end a batch of logs could reach: the frames plus a blank
// header's reserve, or the segment end if the batch rolls over.
func (s *LogStore) waitWarmLocked(logs []*raft.Log) {
	w := &s.warm
	var n int64
	for _, l := range logs {
		n += int64(EncodedSize(l))
	}
	// nextPos is read again after every wait: other writers may move it
	// while wmu is released.
	for w.claimHi != 0 && w.claimLo < s.nextPos+n+BlankHeaderSize {
		s.warmCond.Wait()
	}
}

// resetWarmLocked forgets what was warmed (the segments are being replaced).
func (s *LogStore) resetWarmLocked() {
	s.warm.gen++
	s.warm.warmed = 0
}

func (s *LogStore) runWarmer() {
	w := &s.warm
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case <-w.wake:
		}
		for {
			select {
			case <-w.quit:
				return
			default:
			}
			more, err := s.warmChunk()
			if err != nil {
				// Only a speed-up is lost; the appends work without it.
				s.log.Warn("raftlog: warming segments ahead of the writer stopped", zap.Error(err))
				<-w.quit
				return
			}
			if !more {
				break
			}
		}
	}
}

// warmChunk zeroes the next chunk ahead of the writer, if any is due. It
// reports whether there may be more to do.
func (s *LogStore) warmChunk() (bool, error) {
	w := &s.warm
	s.wmu.Lock()
	if s.Failure() != nil || s.isClosed() {
		s.wmu.Unlock()
		return false, nil
	}
	mf := s.segQ.Last()
	if mf == nil {
		s.wmu.Unlock()
		return false, nil
	}
	segStart, segEnd := mf.FileFromOffset(), mf.FileFromOffset()+int64(mf.Size())
	// Stay a chunk ahead of the write position, page-aligned: the writer
	// never waits for a claim unless it outruns the warmer by a chunk (after
	// a segment roll the first chunk stays cold).
	lo := max(w.warmed, segStart, (s.nextPos+w.chunk+warmPage-1)/warmPage*warmPage)
	hi := min(lo+w.chunk, segEnd, s.nextPos+w.ahead)
	if lo >= hi {
		s.wmu.Unlock()
		return false, nil
	}
	if w.fileOf != mf {
		if w.file != nil {
			w.file.Close()
			w.file = nil
		}
		f, err := s.fsys.OpenFile(mf.Path(), os.O_RDWR, 0)
		if err != nil {
			s.wmu.Unlock()
			return false, err
		}
		w.file, w.fileOf = f, mf
	}
	f, gen := w.file, w.gen
	w.claimLo, w.claimHi = lo, hi
	s.wmu.Unlock()

	err := writeZeros(f, lo-segStart, int(hi-lo))
	if err == nil {
		err = f.Sync()
	}

	s.wmu.Lock()
	w.claimLo, w.claimHi = 0, 0
	if err == nil && gen == w.gen {
		w.warmed = hi
	}
	s.warmCond.Broadcast()
	s.wmu.Unlock()
	return err == nil, err
}

// zeros is the source of writeZeros' pwrites.
var zeros = make([]byte, 256<<10)

func writeZeros(f storage.File, off int64, n int) error {
	for n > 0 {
		k := min(n, len(zeros))
		if _, err := f.WriteAt(zeros[:k], off); err != nil {
			return err
		}
		off += int64(k)
		n -= k
	}
	return nil
}

// isClosed reports whether Close has begun.
func (s *LogStore) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}
