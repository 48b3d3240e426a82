package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/wire"
)

// Full-data catch-up (ADR 0019).
//
// A member whose Raft log was reset for a snapshot (it joined empty, was
// wiped, or fell behind the leader's retained log) holds the replicated
// tables and every entry after the snapshot, but none of the messages
// before it: its queues restart at the leader's next offsets. raftlog keeps
// a backfill record for that; while it exists this loop fetches, from the
// leader, the retained CommitLog bytes before the snapshot (in checksummed
// chunks, paced to GroupConfig.CatchupBytesPerSecond), lets raftlog verify
// and commit them at their positions, then takes the leader's ConsumeQueue
// units for the offsets before each queue's start, checked against the
// fetched messages. Until the record is gone the member does not stand for
// election (catchup_vote.go): old messages have fewer copies than the group
// promises, and as leader it could not serve them.

// catchupChunk is how many bytes one fetch asks for; catchupUnits how many
// queue units.
const (
	catchupChunk = 1 << 20
	catchupUnits = 16 << 10
	// catchupPoll is how often the loop looks for a backfill record;
	// catchupRetry how long it waits after a failed attempt.
	catchupPoll  = 200 * time.Millisecond
	catchupRetry = time.Second
)

// catchupSource is the peer a member fetches retained data from.
type catchupSource interface {
	// logStart returns the peer's first retained index and its position.
	logStart(ctx context.Context) (index uint64, pos int64, err error)
	// readLog returns up to n bytes of the peer's log at pos, verified
	// against the peer's checksum.
	readLog(ctx context.Context, pos int64, n int) ([]byte, error)
	// readUnits returns up to n consecutive units of the peer's queue and
	// the offset of the first: max(from, the queue's minimum), or past a
	// queue file missing there (store.ConsumeQueue.UnitsFrom).
	readUnits(ctx context.Context, topic string, queueID int32, from int64, n int) (start int64, units []store.CQUnit, err error)
	// pace returns the bytes per second the peer wants catch-ups fetched
	// at (0: no opinion; catchup_pace.go).
	pace(ctx context.Context) (int64, error)
}

// CatchupStatus is a member's catch-up progress (RAFT_STATUS "catchup").
type CatchupStatus = wire.CatchupStatus

// catchupState is the loop's progress, read by status calls.
type catchupState struct {
	mu   sync.Mutex
	st   CatchupStatus
	done chan struct{} // closed when the loop returns (nil: never started)
	once sync.Once
	// completed counts finished catch-ups (tests wait on it).
	completed atomic.Int64
	// pace is the adaptive pace this member asks for while it leads and
	// serves a catch-up (catchup_pace.go).
	pace paceController
}

func (c *catchupState) update(f func(*CatchupStatus)) {
	c.mu.Lock()
	f(&c.st)
	c.mu.Unlock()
}

// CatchupStatus returns this member's catch-up progress.
func (g *Group) CatchupStatus() CatchupStatus {
	g.catchup.mu.Lock()
	st := g.catchup.st
	g.catchup.mu.Unlock()
	st.Pending = g.logs.BackfillPending()
	if st.Phase == "" {
		st.PaceBytesPerSecond = g.catchup.pace.current(time.Now())
	}
	return st
}

// catchupBlocksVoting reports whether this member must not stand for
// election: its log lacks data before a snapshot reset.
func (g *Group) catchupBlocksVoting() bool { return g.logs != nil && g.logs.BackfillPending() }

// startCatchup starts the catch-up loop once; source returns the source
// for the leader's remoting address.
func (g *Group) startCatchup(source func(leaderAddr string) catchupSource) {
	g.catchup.once.Do(func() {
		g.catchup.done = make(chan struct{})
		go g.runCatchup(source)
	})
}

// stopCatchup waits for the loop (g.quit is closed).
func (g *Group) stopCatchup() {
	if g.catchup.done != nil {
		<-g.catchup.done
	}
}

func (g *Group) runCatchup(source func(leaderAddr string) catchupSource) {
	defer close(g.catchup.done)
	ctx, cancel := g.quitContext()
	defer cancel()
	t := time.NewTicker(catchupPoll)
	defer t.Stop()
	var retryAt time.Time
	for {
		select {
		case <-g.quit:
			return
		case <-t.C:
		}
		if !g.logs.BackfillPending() || time.Now().Before(retryAt) || g.IsLeader() {
			continue
		}
		addr := g.LeaderAddr()
		if addr == "" {
			continue
		}
		if err := g.catchupOnce(ctx, source(addr)); err != nil {
			if ctx.Err() != nil {
				return
			}
			retryAt = time.Now().Add(catchupRetry)
			g.catchup.update(func(s *CatchupStatus) { s.LastError = err.Error(); s.Phase = "" })
			g.log.Warn("catch-up attempt failed; retrying", zap.String("from", addr), zap.Duration("in", catchupRetry), zap.Error(err))
		}
	}
}

// catchupOnce runs (or resumes) one catch-up to the end.
func (g *Group) catchupOnce(ctx context.Context, src catchupSource) error {
	st, gen, ok := g.logs.Backfill()
	if !ok {
		return nil
	}
	began := time.Now()
	if !st.Committed {
		first, err := g.logs.FirstIndex()
		if err != nil {
			return err
		}
		if first != 0 && first != st.NextIndex {
			// Below it, the log holds entries before the recorded reset:
			// the reset never completed, nothing is missing. Above it,
			// retention deleted segments past the reset (a disk filled by
			// this very catch-up forces it): nothing before it would be
			// retained, and the commit, which needs the log to start at
			// the reset, could never succeed.
			return g.finishCatchup(gen, began)
		}
		peerFirst, peerPos, err := src.logStart(ctx)
		if err != nil {
			return fmt.Errorf("peer log start: %w", err)
		}
		if peerFirst == 0 || peerFirst >= st.NextIndex {
			g.log.Info("catch-up: the leader retains nothing before this member's snapshot", zap.Uint64("leaderFirstIndex", peerFirst),
				zap.Uint64("snapshotNext", st.NextIndex))
			return g.finishCatchup(gen, began)
		}
		if err := g.catchupLog(ctx, src, gen, st, peerFirst, peerPos); err != nil {
			return err
		}
	}
	if err := g.catchupQueues(ctx, src); err != nil {
		return err
	}
	if cur, curGen, ok := g.logs.Backfill(); ok && curGen == gen {
		st = cur // with the start the log fetch recorded
	}
	if err := g.catchupIndex(ctx, src, st); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	// Everything before the snapshot is in the queues and the index now,
	// also on a member that has applied nothing after it yet (reads of a
	// message stop at the dispatched offset).
	g.ms.Reput().DispatchedThrough(st.NextPos)
	if err := g.ms.FlushLogics(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return g.finishCatchup(gen, began)
}

// finishCatchup removes the backfill record and records the catch-up as
// done (also when there was nothing to fetch).
func (g *Group) finishCatchup(gen uint64, began time.Time) error {
	if err := g.logs.BackfillFinish(gen); err != nil {
		return err
	}
	took := time.Since(began)
	g.catchup.update(func(s *CatchupStatus) { s.Phase, s.LastError, s.TookMillis = "", "", took.Milliseconds() })
	g.catchup.completed.Add(1)
	cs := g.CatchupStatus()
	g.log.Info("catch-up complete: this member holds the retained data again and may stand for election",
		zap.Int64("bytes", cs.BytesDone), zap.Int64("units", cs.Units), zap.Duration("took", took))
	return nil
}

// catchupLog fetches [peerPos, st.NextPos) and commits it.
func (g *Group) catchupLog(ctx context.Context, src catchupSource, gen uint64, st raftlog.BackfillState, peerFirst uint64, peerPos int64) error {
	pos, err := g.logs.BackfillBegin(gen, peerFirst, peerPos)
	if err != nil {
		return err
	}
	g.catchup.update(func(s *CatchupStatus) {
		s.Phase, s.BytesTotal, s.BytesDone = "log", st.NextPos-peerPos, pos-peerPos
	})
	g.log.Info("catch-up: fetching the retained CommitLog before the snapshot", zap.Uint64("fromIndex", peerFirst),
		zap.Int64("fromPos", pos), zap.Int64("toPos", st.NextPos), zap.Int64("bytesPerSecond", g.cfg.CatchupBytesPerSecond))
	pace := g.newFetchPace(ctx, src)
	for pos < st.NextPos {
		b, err := src.readLog(ctx, pos, int(min(catchupChunk, st.NextPos-pos)))
		if err != nil {
			return fmt.Errorf("read peer log at %d: %w", pos, err)
		}
		if len(b) == 0 {
			return fmt.Errorf("peer returned no bytes at %d", pos)
		}
		if err := g.logs.BackfillWrite(gen, pos, b); err != nil {
			return err
		}
		pos += int64(len(b))
		g.catchup.update(func(s *CatchupStatus) { s.BytesDone += int64(len(b)) })
		pace.hold(ctx)
		if err := pace.wait(ctx, len(b)); err != nil {
			return err
		}
	}
	return g.logs.BackfillCommit(gen)
}

// catchupQueues takes the leader's units before each local queue's
// minimum, keeping those whose message this member's CommitLog holds.
func (g *Group) catchupQueues(ctx context.Context, src catchupSource) error {
	g.catchup.update(func(s *CatchupStatus) { s.Phase = "queues" })
	pace := g.newFetchPace(ctx, src)
	for _, cq := range g.ms.ConsumeQueues().All() {
		if err := g.catchupQueue(ctx, src, cq, pace); err != nil {
			return fmt.Errorf("queue %s/%d: %w", cq.Topic(), cq.QueueID(), err)
		}
	}
	return nil
}

func (g *Group) catchupQueue(ctx context.Context, src catchupSource, cq *store.ConsumeQueue, pace *fetchPace) error {
	localMin := cq.MinOffset()
	if localMin == 0 {
		return nil
	}
	peerMin, units, err := src.readUnits(ctx, cq.Topic(), cq.QueueID(), 0, catchupUnits)
	if err != nil {
		return err
	}
	if peerMin >= localMin {
		return nil
	}
	all := make([]store.CQUnit, 0, min(localMin-peerMin, 1<<20))
	for next := peerMin; ; {
		pace.hold(ctx)
		if err := pace.wait(ctx, len(units)*store.CQUnitSize); err != nil {
			return err
		}
		for _, u := range units {
			if next >= localMin {
				break
			}
			all = append(all, u)
			next++
		}
		if next >= localMin || len(units) == 0 {
			break
		}
		start, more, err := src.readUnits(ctx, cq.Topic(), cq.QueueID(), next, catchupUnits)
		if err != nil {
			return err
		}
		if start > next {
			// The leader holds no units from next to start (a queue file
			// missing between others, or its retention ran meanwhile): a
			// backfill ends at localMin without a hole, so it starts there.
			all, peerMin, next = all[:0], start, start
		}
		units = more
	}
	if peerMin >= localMin {
		return nil
	}
	if int64(len(all)) != localMin-peerMin {
		return fmt.Errorf("leader gave %d units for [%d, %d)", len(all), peerMin, localMin)
	}
	// Keep the longest suffix whose messages this member holds and that
	// check out: earlier ones are below its retained CommitLog.
	k := len(all)
	for k > 0 {
		if err := g.checkUnit(cq, all[k-1]); err != nil {
			if all[k-1].PhyOffset >= g.logs.MinPosition() {
				return fmt.Errorf("unit at offset %d: %w", peerMin+int64(k-1), err)
			}
			break
		}
		k--
	}
	kept := all[k:]
	if len(kept) == 0 {
		return nil
	}
	if err := cq.Backfill(localMin-int64(len(kept)), kept); err != nil {
		return err
	}
	g.catchup.update(func(s *CatchupStatus) { s.Units += int64(len(kept)) })
	return nil
}

// catchupHoldHook, when set (tests), runs between the chunks of the log
// and queue phases. It may block to hold the fetch (a duty-cycle A/B of
// what catch-up traffic adds to producer latency) and reports whether it
// did.
var catchupHoldHook atomic.Pointer[func(ctx context.Context) bool]

// hold runs catchupHoldHook; after a hold the pacer starts afresh and the
// pace is asked again, so the fetch does not make up the held time in a
// burst.
func (f *fetchPace) hold(ctx context.Context) {
	if h := catchupHoldHook.Load(); h != nil && (*h)(ctx) {
		f.asked = time.Time{}
		f.p.start, f.p.sent = time.Now(), 0
	}
}

// checkUnit checks that the local CommitLog holds, at the unit's position,
// an intact message of the unit's size for the queue's topic and id.
func (g *Group) checkUnit(cq *store.ConsumeQueue, u store.CQUnit) error {
	mf := g.segQ.FindByOffset(u.PhyOffset)
	if mf == nil {
		return fmt.Errorf("no segment holds physical offset %d", u.PhyOffset)
	}
	sl, err := mf.Read(int(u.PhyOffset-mf.FileFromOffset()), int(u.Size))
	if err != nil {
		return err
	}
	defer sl.Release()
	req, size, err := store.CheckAndDecode(sl.B)
	if err != nil {
		return err
	}
	if req.Blank || size != int(u.Size) || req.Topic != cq.Topic() || req.QueueID != cq.QueueID() || req.CommitLogOffset != u.PhyOffset {
		return fmt.Errorf("message at %d is %s/%d size %d offset %d, unit says %s/%d size %d", u.PhyOffset,
			req.Topic, req.QueueID, size, req.CommitLogOffset, cq.Topic(), cq.QueueID(), u.Size)
	}
	return nil
}

// pacer spreads writes to a rate (bytes per second; <= 0: unpaced). It
// sleeps only once it is at least pacerSlack ahead, so small writes (the
// queue phase's units) cost no timer each.
type pacer struct {
	rate  float64
	start time.Time
	sent  int64
}

const pacerSlack = 2 * time.Millisecond

func newPacer(rate int64) *pacer { return &pacer{rate: float64(rate), start: time.Now()} }

// setRate changes the rate from now on; what was sent before counts at
// the old rate (wait never returns ahead of it).
func (p *pacer) setRate(rate int64, now time.Time) {
	if float64(rate) == p.rate {
		return
	}
	p.rate, p.start, p.sent = float64(rate), now, 0
}

func (p *pacer) wait(ctx context.Context, n int) error {
	if p.rate <= 0 {
		return nil
	}
	p.sent += int64(n)
	d := time.Until(p.start.Add(time.Duration(float64(p.sent) / p.rate * float64(time.Second))))
	if d < pacerSlack {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
