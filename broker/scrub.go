package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/raftlog"
)

// Damage to the acknowledged log (below the recovery anchor, where Open
// does not look):
//
//   - the scrub (runScrub) verifies every closed CommitLog segment's
//     frames in the background, paced to raftScrubBytesPerSecond, first
//     scrubStartDelay after the start (never slowing the restart), then a
//     pass every scrubPassGap;
//   - every read that hands stored bytes out checks them: pulls and
//     lookups check each message's CRC (package store), CATCHUP_READ
//     each frame's (raftlog.ReadRange). A damaged range is refused with
//     SYSTEM_ERROR and a remark naming the file and offset. A message
//     damage seen by a read is confirmed by verifying its segment's
//     frames before the member stops (a ConsumeQueue unit that disagrees
//     with an intact log is logged, and refused, but stops nothing);
//   - damage stops the member (noteDamage): an error log naming the file
//     and offset, the raft_log_damaged metric, a DAMAGED marker that makes
//     the next start refuse, leadership handed to a follower if it leads,
//     and its Raft member shut down, so it neither votes nor leads with a
//     log it cannot serve. Its peers hold intact copies; the repair is the
//     operator's wipe-and-catch-up (docs/operations.md).

const (
	// scrubStartDelay is the wait after the start before the first pass.
	scrubStartDelay = 5 * time.Second
	// scrubPassGap is the pause between two passes.
	scrubPassGap = 10 * time.Minute
)

// scrubTiming is the scrub's schedule (groupOptions.scrub in tests).
type scrubTiming struct{ startDelay, passGap time.Duration }

// damageState is the scrub's counters and the damage that stopped this
// member.
type damageState struct {
	err       atomic.Pointer[error]
	passes    atomic.Uint64
	bytes     atomic.Uint64
	verifying atomic.Bool
	// wg tracks the confirmation and stop goroutines (closeParts waits).
	wg sync.WaitGroup
	// done closes when runScrub returns (nil when the scrub is off).
	done chan struct{}
}

// LogDamaged is the damage that stopped this member's Raft log (nil while
// none was found).
func (g *Group) LogDamaged() error {
	if p := g.damage.err.Load(); p != nil {
		return *p
	}
	return nil
}

// startScrub starts the scrub goroutine unless raftScrubBytesPerSecond is 0.
func (g *Group) startScrub(t *scrubTiming) {
	if g.cfg.ScrubBytesPerSecond <= 0 {
		return
	}
	st := scrubTiming{startDelay: scrubStartDelay, passGap: scrubPassGap}
	if t != nil {
		st = *t
	}
	g.damage.done = make(chan struct{})
	go g.runScrub(st)
}

// waitScrub waits for the scrub and any damage handling (g.quit is closed).
func (g *Group) waitScrub() {
	if g.damage.done != nil {
		<-g.damage.done
	}
	g.damage.wg.Wait()
}

// runScrub is the scrub loop; it ends with g.quit or at the first damage.
func (g *Group) runScrub(t scrubTiming) {
	defer close(g.damage.done)
	ctx, cancel := g.quitContext()
	defer cancel()
	wait := func(d time.Duration) bool {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !wait(t.startDelay) {
		return
	}
	for {
		began := time.Now()
		pace := newPacer(g.cfg.ScrubBytesPerSecond)
		var pos, n int64
		for {
			next, ok, err := g.logs.ScrubSegment(pos, func(b int) error {
				g.damage.bytes.Add(uint64(b))
				n += int64(b)
				return pace.wait(ctx, b)
			})
			if errors.Is(err, raftlog.ErrDamagedLog) {
				g.noteDamage(err, "scrub")
				return
			}
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, raftlog.ErrClosed) {
					return
				}
				g.log.Warn("raft log scrub pass ended early; the next pass retries", zap.Error(err))
				break
			}
			if !ok {
				break
			}
			pos = next
		}
		g.damage.passes.Add(1)
		g.log.Debug("raft log scrub pass done", zap.Int64("bytes", n), zap.Duration("took", time.Since(began)))
		if !wait(t.passGap) {
			return
		}
	}
}

// noteReadDamage is called by a read (pull, lookup) that found a damaged
// message at CommitLog offset phy: the segment's frames are verified in
// the background and the member stops if they are damaged. One check at a
// time; the read itself was refused either way.
func (g *Group) noteReadDamage(phy int64, readErr error) {
	if g.LogDamaged() != nil || !g.damage.verifying.CompareAndSwap(false, true) {
		return
	}
	g.damage.wg.Add(1)
	go func() {
		defer g.damage.wg.Done()
		defer g.damage.verifying.Store(false)
		err := g.logs.VerifySegmentAt(phy)
		switch {
		case errors.Is(err, raftlog.ErrDamagedLog):
			g.noteDamage(err, "read")
		case err == nil:
			g.log.Error("a read found a damaged message but its segment's frames verify (a ConsumeQueue unit that disagrees with the log?); "+
				"the message is not served", zap.Int64("offset", phy), zap.NamedError("read", readErr))
		}
	}()
}

// noteDamage stops this member for the damage err (a *raftlog.DamageError)
// found by found ("scrub", "read", "catch-up read"); see the file comment.
func (g *Group) noteDamage(err error, found string) {
	if !g.damage.err.CompareAndSwap(nil, &err) {
		return
	}
	var de *raftlog.DamageError
	errors.As(err, &de)
	fields := []zap.Field{zap.String("group", g.cfg.Raft.DLegerGroup), zap.String("foundBy", found), zap.Error(err)}
	if de != nil {
		fields = append(fields, zap.String("file", de.Path), zap.Int64("fileOffset", de.FileOffset), zap.Int64("logPosition", de.Position))
	}
	g.log.Error("damaged Raft log: this member stops voting, leading and serving the damaged range; "+
		"its peers hold intact copies; wipe it and let it catch up (docs/operations.md)", fields...)
	if werr := writeMarkerFile(g.diskFS, g.damagedMarkerPath(), err.Error()); werr != nil {
		g.log.Warn("could not record the damage; the next start relies on the scrub finding it again", zap.Error(werr))
	}
	if !g.ready.Load() {
		// Raft's start read it: the start fails (newRaftChecked); or Raft
		// runs already and newGroup's markReady stops it.
		return
	}
	g.goStopForDamage()
}

// markReady marks Raft running for the damage handling; damage noted in
// between NewRaft's return and this call (Raft's goroutines read entries
// already) stops the member here, since noteDamage left it to the start.
func (g *Group) markReady() {
	g.ready.Store(true)
	if g.LogDamaged() != nil {
		g.goStopForDamage()
	}
}

func (g *Group) goStopForDamage() {
	g.damage.wg.Add(1)
	go func() {
		defer g.damage.wg.Done()
		g.stopForDamage()
	}()
}

// GetLog implements raft.LogStore: an entry Raft cannot read (replication
// to a follower, apply, the start's configuration scan) is damage.
func (t *timedLogStore) GetLog(index uint64, l *raft.Log) error {
	err := t.LogStore.GetLog(index, l)
	if err != nil && t.damaged != nil && errors.Is(err, raftlog.ErrDamagedLog) {
		t.damaged(err)
	}
	return err
}

// stopForDamage hands leadership away (a transfer, not an election gap)
// and shuts the Raft member down. TransferLeadership flushes the coalesced
// offset commits first: new entries go to the log's intact tail.
func (g *Group) stopForDamage() {
	if g.raft.State() == raft.Leader && g.hasOtherVoter() {
		if err := g.TransferLeadership(""); err != nil {
			g.log.Warn("leadership transfer away from the damaged member failed; stopping anyway", zap.Error(err))
		}
	}
	g.stopRaft()
}

// damagedMarkerPath records the damage for the next start
// (storePathRootDir/raft/DAMAGED).
func (g *Group) damagedMarkerPath() string {
	return filepath.Join(g.cfg.Store.StorePathRootDir, "raft", "DAMAGED")
}

// checkDamagedMarker refuses a start after damage was found (the scrub
// would find it again, but only after the member voted).
func (g *Group) checkDamagedMarker() error {
	why, err := readMarkerFile(g.diskFS, g.damagedMarkerPath())
	if why == "" || err != nil {
		return err
	}
	return fmt.Errorf("%w: %s does not start: its Raft log was found damaged (%s, recorded in %s); "+
		"wipe %s, start it with raftJoin=true and re-add it (`raftmq admin removeMember` then `addMember`, docs/operations.md)",
		raftlog.ErrDamagedLog, g.cfg.Raft.DLegerSelfID, why, g.damagedMarkerPath(), g.cfg.Store.StorePathRootDir)
}

// noteStoreReadError is the read paths' hook (pull, lookup): a damaged
// message starts the confirmation of its segment.
func (c *Controller) noteStoreReadError(err error) {
	if !errors.Is(err, store.ErrCorruptMessage) {
		return
	}
	g, ok := c.rep.(*Group)
	if !ok {
		return
	}
	var ce *store.CorruptEntryError
	if errors.As(err, &ce) {
		g.noteReadDamage(ce.Offset, err)
	}
}

// scrubCollectors are the scrub's metrics.
func (g *Group) scrubCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "raft_log_damaged",
			Help: "1 when this member found its acknowledged Raft log damaged and stopped (the log names the file and offset); wipe it and let it catch up.",
		}, func() float64 {
			if g.LogDamaged() != nil {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "raft_scrub_bytes_total",
			Help: "Bytes of closed CommitLog segments the background scrub verified.",
		}, func() float64 { return float64(g.damage.bytes.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "raft_scrub_passes_total",
			Help: "Completed scrub passes over the closed CommitLog segments.",
		}, func() float64 { return float64(g.damage.passes.Load()) }),
	}
}

// newRaftChecked is raft.NewRaft, which panics when it cannot read an entry
// of the log it scans for configurations at the start: damage there
// (raftlog.ErrDamagedLog) becomes the start's error, naming the file and
// offset, instead of a crash. Nothing runs yet at that point.
func newRaftChecked(conf *raft.Config, fsm raft.FSM, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore,
	trans raft.Transport) (r *raft.Raft, err error) {
	defer func() {
		if p := recover(); p != nil {
			perr, ok := p.(error)
			if !ok || !errors.Is(perr, raftlog.ErrDamagedLog) {
				panic(p)
			}
			r, err = nil, perr
		}
	}()
	return raft.NewRaft(conf, fsm, logs, stable, snaps, trans)
}
