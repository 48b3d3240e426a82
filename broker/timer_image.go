package broker

import (
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/timerindex"
)

// The timer index travels in snapshots. A replica that installs a snapshot
// holds none of the log before it, so it cannot derive the records of timer
// messages stored before the snapshot that are still pending; without them
// its bucket files differ from its peers' and the replicated cursor, which
// counts records by position, would point at other records on it. The
// snapshot therefore carries the index as of the snapshot (its files at the
// snapshot's applied mark, after the tables); full-data catch-up brings the
// messages those records point at (ADR 0019).

// writeTimerImage appends the timer index's image at the snapshot to the
// sink; nothing for an index never written, so snapshots of groups without
// timers keep their bytes.
func (s *fsmSnapshot) writeTimerImage(w io.Writer) error {
	if s.timers == nil || s.timerCut.Empty() {
		return nil
	}
	return s.timers.WriteImage(w, s.timerCut)
}

// restoreTimerImage reads the timer image after a snapshot's tables (none:
// a snapshot of an earlier version or without timers) and replaces the
// local index with it when the local index is behind the image's mark: a
// replica that installed the snapshot after falling behind or being wiped.
// A restart's restore of its own snapshot finds its files at or past the
// mark and keeps them (they are exact, see timerindex).
func (f *fsm) restoreTimerImage(r io.Reader) error {
	img, err := timerindex.ReadImage(r)
	if err != nil {
		return fmt.Errorf("broker: snapshot timer image: %w", err)
	}
	if img == nil || f.timers == nil {
		return nil
	}
	if local := f.timers.Applied(); local >= img.Applied {
		return nil
	}
	if err := f.timers.Replace(img); err != nil {
		return fmt.Errorf("broker: snapshot timer image: %w", err)
	}
	f.log.Info("timer index taken from the snapshot", zap.Uint64("timerApplied", img.Applied))
	return nil
}
