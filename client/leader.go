package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// defaultLeaderFollowWait bounds how long a call bound to a group's leader
// waits for a new one (an election, or a leader handing off) when its
// context has no deadline of its own (commonConfig.leaderFollowWait).
const defaultLeaderFollowWait = 10 * time.Second

// leaderBackoffMax caps the pause between rounds of a call waiting out an
// election (onLeader); the first pause is electionPoll, then it doubles.
const leaderBackoffMax = 320 * time.Millisecond

// noteFailure records what a failed call to addr of brokerName says about
// the group's leader: a not-leader answer naming a leader worth following
// teaches it (followed); one naming none, or a leader just refuted, marks
// addr down briefly (an election is under way); a lost connection marks it
// down for downFor. retry reports whether the group may answer better
// once its routes catch up; any other failure is the call's own.
func (r *routeManager) noteFailure(brokerName, addr string, err error) (followed, retry bool) {
	var be *BrokerError
	switch {
	case errors.As(err, &be) && r.follow(brokerName, addr, be.LeaderAddr):
		return true, true
	case errors.As(err, &be) && (be.Code == remoting.ResponseServiceNotAvailable || be.Code == remoting.ResponseNotLeaderForQueue):
		r.markDown(brokerName, addr, noLeaderBackoff)
		return false, true
	case errIsConnFailure(err):
		r.markDown(brokerName, addr, r.downFor)
		return false, true
	}
	return false, false
}

// follow learns leader from addr's answer (a not-leader answer, or a
// follower's pull answer) if it is followable and leader has no running
// down mark; it reports whether it did. A leader that failed us (a pull
// that timed out, a refused connection) is not taken back on a follower's
// word while its mark runs: the follower may not see what we saw (a
// stalled pull path, a partition between us and it), and every call would
// go back to wait there. A leader that really came back says so itself,
// with its notice, or the route names it (see store).
func (r *routeManager) follow(brokerName, addr, leader string) bool {
	if !r.followable(brokerName, addr, leader) || r.markedDown(brokerName, leader) {
		return false
	}
	r.learnLeader(brokerName, addr, leader)
	return true
}

// onLeader runs call against brokerName's leader as routes know it, and
// rides out a leader change the way the producer does: a not-leader
// answer naming the leader is followed at once, a member that names none
// or whose connection failed is avoided for a while and the next member
// asked (followers name the leader once one is elected), with a growing
// pause once every member has been tried. failed is told every failure
// (to record it, as noteFailure does, and to ask for route news) and says
// whether another try may succeed. It gives up when ctx ends — or, when
// ctx has no deadline, after followWait (the client's leaderFollowWait) —
// with the last failure. timeout bounds each try.
//
// Only for idempotent calls: a call whose connection closed may have been
// applied, and is sent again.
func onLeader(ctx context.Context, routes *routeManager, brokerName string, timeout, followWait time.Duration,
	failed func(ctx context.Context, addr string, err error) (retry bool),
	call func(ctx context.Context, addr string) error) error {
	ctx, cancel := leaderWait(ctx, followWait)
	defer cancel()
	pause := electionPoll
	hops := 0
	for {
		addr := routes.brokerAddr(brokerName)
		if addr == "" {
			return fmt.Errorf("%w: broker group %q has no known member", ErrNoBroker, brokerName)
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := call(cctx, addr)
		cancel()
		if err == nil {
			routes.markUp(brokerName, addr)
			return nil
		}
		if !failed(ctx, addr, err) || ctx.Err() != nil || !electionAnswer(err) {
			return err
		}
		// Another member, or the leader an answer named, is asked at once
		// a few times; after that (or when the next address is the same)
		// the group is electing: pause before the next round.
		if next := routes.brokerAddr(brokerName); next != addr && hops < maxBrokerHops {
			hops++
			continue
		}
		if !wait(ctx, pause) {
			return err
		}
		hops = 0
		pause = min(2*pause, leaderBackoffMax)
	}
}

// leaderWait gives ctx the deadline wait (the client's leaderFollowWait)
// when it has none, so that an operation of several calls bound to
// leaders (a Commit of many queues) waits that long in all, not that long
// for each call.
func leaderWait(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, wait)
}

// electionAnswer reports whether a failure noteFailure would retry comes
// from the group changing leader rather than from its leader: any failure
// but a SERVICE_NOT_AVAILABLE (14) answer that is not a raftmq not-leader
// one (a full disk, a store shutting down), which a retry would only hide.
func electionAnswer(err error) bool {
	var be *BrokerError
	return !errors.As(err, &be) || be.Code != remoting.ResponseServiceNotAvailable || notLeaderAnswer(err)
}

// notLeaderAnswer reports whether err is a member's answer that the
// request is for its group's leader: SERVICE_NOT_AVAILABLE (14) naming
// the leader or, while none is known, with raftmq's not-leader remark.
func notLeaderAnswer(err error) bool {
	var be *BrokerError
	return errors.As(err, &be) && be.Code == remoting.ResponseServiceNotAvailable &&
		(be.LeaderAddr != "" || wire.IsNotLeaderRemark(be.Remark))
}
