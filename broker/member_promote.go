package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/wire"
)

// Promotion waits for the learner's full-data catch-up.
//
// A learner that joined through InstallSnapshot holds no message before the
// snapshot until its catch-up (catchup.go) has fetched the retained
// CommitLog and queue units; its Raft log tail is current long before that.
// Promoting it on the Raft lag alone would count it as a copy of messages
// it lacks. So AddMember promotes only when, besides the Raft lag, the
// learner itself says its catch-up is not pending.
//
// The leader asks the learner (pull) rather than waiting for the learner to
// report (push): the pending flag is the learner's backfill record, written
// before it acknowledges the snapshot install, so a question asked after
// the Raft lag check reads the truth at the moment of the decision. A push
// would need a new request code, leader-side state a new leader has to
// rebuild, and a rule for reports that are lost or overtaken by a second
// snapshot install. The question is RAFT_STATUS, which every member answers
// already (its "catchup" field); the learner's remoting address comes from
// the replicated member table, gossip, or the name servers' cluster info
// under its brokerId slot (a learner registers as soon as it is in the
// configuration), and the answer must carry the learner's Raft id. A
// learner the leader cannot ask is not promoted: the wait fails closed and
// its timeout says why.

// learnerStatus is what a learner reports about itself.
type learnerStatus struct {
	catchup CatchupStatus
	// segmentSize is its mappedFileSizeCommitLog (0: not reported).
	segmentSize int64
}

// learnerProbe returns learner id's status as the learner reports it.
type learnerProbe func(ctx context.Context, id string) (learnerStatus, error)

// learnerProbeTimeout bounds one question to a learner.
const learnerProbeTimeout = 2 * time.Second

// PromotionStatus is the leader's view of a learner it waits to promote
// (RAFT_STATUS "promotions").
type PromotionStatus = wire.PromotionStatus

// promoteState is the leader's promotion bookkeeping.
type promoteState struct {
	probe atomic.Pointer[learnerProbe]

	mu      sync.Mutex
	waiting map[string]*promotionWait // guarded by mu
}

type promotionWait struct {
	since time.Time
	st    PromotionStatus
}

// setLearnerProbe gives the group its way to ask a learner (the
// Controller's RAFT_STATUS call; the in-process harness in tests).
func (g *Group) setLearnerProbe(p learnerProbe) { g.promote.probe.Store(&p) }

// Promotions returns the learners this leader waits to promote, by id.
func (g *Group) Promotions() []PromotionStatus {
	g.promote.mu.Lock()
	defer g.promote.mu.Unlock()
	out := make([]PromotionStatus, 0, len(g.promote.waiting))
	for _, id := range slices.Sorted(maps.Keys(g.promote.waiting)) {
		w := g.promote.waiting[id]
		st := w.st
		st.WaitedMillis = time.Since(w.since).Milliseconds()
		out = append(out, st)
	}
	return out
}

func (g *Group) notePromotion(id string, since time.Time, f func(*PromotionStatus)) {
	g.promote.mu.Lock()
	defer g.promote.mu.Unlock()
	if g.promote.waiting == nil {
		g.promote.waiting = map[string]*promotionWait{}
	}
	w := g.promote.waiting[id]
	if w == nil {
		w = &promotionWait{since: since, st: PromotionStatus{ID: id}}
		g.promote.waiting[id] = w
	}
	f(&w.st)
}

func (g *Group) endPromotion(id string) {
	g.promote.mu.Lock()
	delete(g.promote.waiting, id)
	g.promote.mu.Unlock()
}

// learnerReady asks learner id whether its catch-up is done. It returns
// why not ("" when ready) and records the answer for Promotions; conflict
// is set when the learner can never be promoted: its CommitLog segment
// size differs from this member's, so the same log lies at other positions
// on it (the offset msgIds producers hold would not resolve there, and a
// catch-up from or to it would fetch bytes for positions not its own).
func (g *Group) learnerReady(ctx context.Context, id string, since time.Time) (why string, conflict error) {
	pp := g.promote.probe.Load()
	var ls learnerStatus
	err := errors.New("this member has no way to ask a learner for its catch-up status")
	if pp != nil {
		cctx, cancel := context.WithTimeout(ctx, learnerProbeTimeout)
		ls, err = (*pp)(cctx, id)
		cancel()
	}
	if own := g.SegmentSize(); err == nil && ls.segmentSize != 0 && ls.segmentSize != own {
		return "", fmt.Errorf("%w: learner %s runs with mappedFileSizeCommitLog=%d, this group with %d; CommitLog positions "+
			"and offset msgIds depend on it, so it must be equal on every member: %s is not promoted; removeMember it, set "+
			"mappedFileSizeCommitLog=%d in its conf, wipe its data directory and add it again",
			ErrMembershipConflict, id, ls.segmentSize, own, id, own)
	}
	cs := ls.catchup
	g.notePromotion(id, since, func(st *PromotionStatus) {
		switch {
		case err != nil:
			st.Waiting, st.Error = "status", err.Error()
			why = fmt.Sprintf("its catch-up status is unknown (%v)", err)
		case cs.Pending:
			st.Waiting, st.Error, st.Catchup = "catchup", "", &cs
			why = fmt.Sprintf("its full-data catch-up is pending (%s)", catchupProgress(cs))
		default:
			st.Error, st.Catchup = "", &cs
		}
	})
	return why, nil
}

// SegmentSize is this member's CommitLog segment size
// (mappedFileSizeCommitLog).
func (g *Group) SegmentSize() int64 { return int64(g.cfg.Store.MappedFileSizeCommitLog) }

// catchupProgress renders a pending catch-up for errors and logs.
func catchupProgress(cs CatchupStatus) string {
	s := "phase " + cs.Phase
	if cs.Phase == "" {
		s = "not started"
	}
	if cs.BytesTotal > 0 {
		s += fmt.Sprintf(", %.1f of %.1f MB fetched", float64(cs.BytesDone)/1e6, float64(cs.BytesTotal)/1e6)
	}
	if cs.LastError != "" {
		s += ", last error: " + cs.LastError
	}
	return s
}

// raftStatusProbe is the Controller's learnerProbe: RAFT_STATUS from the
// learner's remoting address. The candidates are the replicated member
// table (members that once led; stale for a host rebuilt elsewhere under
// its old id), gossip, and, when neither answers as the learner, the name
// servers' route under its brokerId slot. Each question gets
// followerLagTimeout, and all of them end with ctx: the caller's budget
// (a transfer asking its candidates, a planned stop's hand-off) holds
// however many addresses and name servers do not answer.
func (c *Controller) raftStatusProbe(f *followerLag) learnerProbe {
	return func(ctx context.Context, id string) (learnerStatus, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(c.ctx, cancel)() // the controller stopping
		var tried []string
		var errs []error
		ask := func(addr string) (*RaftStatus, bool) {
			if addr == "" || slices.Contains(tried, addr) || ctx.Err() != nil {
				return nil, false
			}
			tried = append(tried, addr)
			st, err := f.statusWithin(ctx, addr)
			if err == nil && st.SelfID != id {
				err = fmt.Errorf("%s answers as %q", addr, st.SelfID)
			}
			if err != nil {
				errs = append(errs, err)
				return nil, false
			}
			return st, true
		}
		addrs := []string{f.memberAddr(id)}
		if c.gossip != nil {
			for _, m := range c.gossip.LiveMembers() {
				if m.Meta.BrokerName == c.cfg.BrokerName && m.Meta.RaftID == id {
					addrs = append(addrs, m.Meta.RemotingAddr)
				}
			}
		}
		for _, a := range addrs {
			if st, ok := ask(a); ok {
				return learnerStatus{catchup: catchupOf(st), segmentSize: st.SegmentSize}, nil
			}
		}
		if ctx.Err() == nil {
			if st, ok := ask(f.registeredAddr(f.c.peers.route(ctx, followerLagTimeout), id)); ok {
				return learnerStatus{catchup: catchupOf(st), segmentSize: st.SegmentSize}, nil
			}
		}
		if err := ctx.Err(); err != nil {
			return learnerStatus{}, errors.Join(append(errs, fmt.Errorf("asking %s: %w", id, err))...)
		}
		if len(tried) == 0 {
			return learnerStatus{}, fmt.Errorf("no remoting address known for %s (not in the member table, gossip or the name servers' route yet)", id)
		}
		return learnerStatus{}, errors.Join(errs...)
	}
}

func catchupOf(st *RaftStatus) CatchupStatus {
	if st.Catchup == nil {
		return CatchupStatus{}
	}
	return *st.Catchup
}

// startLearnerProbe gives a Group replica the RAFT_STATUS probe.
func (c *Controller) startLearnerProbe() {
	if g, ok := c.rep.(*Group); ok {
		g.setLearnerProbe(c.raftStatusProbe(&followerLag{c: c}))
	}
}

var (
	promotionWaitDesc = prometheus.NewDesc(metricsNamespace+"_raft_promotion_waiting",
		"Leader only: 1 per learner an addMember waits to promote, labelled with what it waits for: "+
			"log (Raft lag), catchup (the learner's full-data catch-up is pending) or status (the learner could not be asked).",
		[]string{"learner", "waiting"}, nil)
	promotionBytesLeftDesc = prometheus.NewDesc(metricsNamespace+"_raft_learner_catchup_bytes_left",
		"Leader only: CommitLog bytes a learner waiting for promotion still has to fetch, as of its last answer.",
		[]string{"learner"}, nil)
	catchupPendingDesc = prometheus.NewDesc(metricsNamespace+"_catchup_pending",
		"1 while this member lacks retained data from before a snapshot install (it does not stand for election, and a learner is not promoted).",
		nil, nil)
	catchupBytesLeftDesc = prometheus.NewDesc(metricsNamespace+"_catchup_bytes_left",
		"CommitLog bytes this member's running catch-up still has to fetch.", nil, nil)
	catchupPaceDesc = prometheus.NewDesc(metricsNamespace+"_catchup_pace_bytes_per_second",
		"The catch-up pace now: what this member fetches at, or, leading with the adaptive pace, what it asks a catching-up member for (0: no catch-up).", nil, nil)
)

// promotionCollector exports the promotion waits and this member's own
// catch-up.
type promotionCollector struct{ g *Group }

// Describe implements prometheus.Collector.
func (p promotionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- promotionWaitDesc
	ch <- promotionBytesLeftDesc
	ch <- catchupPendingDesc
	ch <- catchupBytesLeftDesc
	ch <- catchupPaceDesc
}

// Collect implements prometheus.Collector.
func (p promotionCollector) Collect(ch chan<- prometheus.Metric) {
	cs := p.g.CatchupStatus()
	ch <- prometheus.MustNewConstMetric(catchupPendingDesc, prometheus.GaugeValue, b2f(cs.Pending))
	left := 0.0
	if cs.Pending {
		left = float64(max(cs.BytesTotal-cs.BytesDone, 0))
	}
	ch <- prometheus.MustNewConstMetric(catchupBytesLeftDesc, prometheus.GaugeValue, left)
	ch <- prometheus.MustNewConstMetric(catchupPaceDesc, prometheus.GaugeValue, float64(cs.PaceBytesPerSecond))
	if p.g.raft.State() != raft.Leader {
		return
	}
	for _, st := range p.g.Promotions() {
		ch <- prometheus.MustNewConstMetric(promotionWaitDesc, prometheus.GaugeValue, 1, st.ID, st.Waiting)
		ch <- prometheus.MustNewConstMetric(promotionBytesLeftDesc, prometheus.GaugeValue, float64(st.BytesLeft()), st.ID)
	}
}
