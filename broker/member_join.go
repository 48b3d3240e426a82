package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// A member with no Raft state and no raftJoin bootstraps its log from
// dLegerPeers. That is right at the group's first start and wrong while
// the group runs: a member rebuilt in place (its data wiped) would write
// its own index-1 configuration entry, which differs from the group's
// once dLegerPeers was edited (after a replacement), and the leader,
// finding the same term at index 1, appends after it: a log and a
// CommitLog that differ from the others' from the first frame on.
// RocketMQ's DLedger has no bootstrap step; a wiped member rejoins and
// catches up. So before it bootstraps, an empty member asks two ways at
// once, and joins as with raftJoin=true as soon as either finds the
// group running:
//   - every dLegerPeers member over the Raft transport, with a pre-vote
//     request at term 0. A pre-vote changes no state on the receiver (one
//     with no configuration may even grant it, which binds it to nothing),
//     and every answer carries the receiver's current term: a term past 1
//     means the group elected a leader once (bootstrap writes term 1).
//     This needs no route, so it also works right after a name server
//     restart, before the members re-registered. A member in its own check
//     answers such asks itself (term 0), so the members of a group starting
//     for the first time do not hold each other's checks.
//   - the members the name servers route for its brokerName, for
//     RAFT_STATUS (every name server and every routed member at once,
//     followers as well as the routed master, which may be the one that
//     is down): one with a log past the bootstrap entry. This reaches the
//     members where they are now when dLegerPeers still names old hosts.
// When nobody answers so within joinCheckTimeout (the group's first
// start, or the whole group down or wiped) the member bootstraps.

// joinCheckTimeout bounds the join check: both ways of asking together.
// Members that are down refuse the connection at once; an unreachable
// host makes a start wait this long.
const joinCheckTimeout = 2 * time.Second

// raftAskTimeout bounds the asks over Raft. A running member answers a
// pre-vote at once; a member that is up but has not started its Raft yet
// (recovering its store, or not yet started in-process) takes the ask and
// holds it, so waiting on it long would only delay every first start.
const raftAskTimeout = 500 * time.Millisecond

// joinCheck is newGroup's look for a running group before a bootstrap:
// it returns why the member joins instead ("" to bootstrap), or the
// configuration error that keeps it from asking, which must fail the
// start before a bootstrap writes the member's own first entry.
type joinCheck func() (string, error)

// runningGroupCheck is a node's joinCheck; trans is the Raft transport the
// member will run on (not started yet: only its outgoing side is used).
func runningGroupCheck(cfg BrokerConfig, trans raft.Transport, log *zap.Logger) joinCheck {
	return func() (string, error) {
		conf, err := cfg.Raft.Configuration()
		if err != nil {
			return "", err
		}
		cl, err := newMemberClient(cfg, log.Named("joincheck"))
		if err != nil {
			return "", err
		}
		defer cl.Close()
		self := raft.ServerID(cfg.Raft.DLegerSelfID)
		stopAnswering := answerProbes(trans, self)
		defer stopAnswering()
		ctx, cancel := context.WithTimeout(context.Background(), joinCheckTimeout)
		defer cancel()
		type result struct {
			why   string
			tried []string
		}
		viaRaft := make(chan result, 1)
		go func() {
			rctx, rcancel := context.WithTimeout(ctx, raftAskTimeout)
			defer rcancel()
			why, tried := raftPeersRunning(rctx, trans, conf, self)
			if why != "" {
				cancel()
			}
			viaRaft <- result{why, tried}
		}()
		p := groupPeers{client: cl, nameServers: cfg.NameServers(), brokerName: cfg.BrokerName}
		why, tried := p.runningLog(ctx, cfg.RemotingAddr(), cfg.Raft.DLegerSelfID)
		if why != "" {
			cancel()
		}
		r := <-viaRaft
		switch {
		case why != "":
			return why, nil
		case r.why != "":
			return r.why, nil
		}
		tried = append(tried, r.tried...)
		log.Info("no member of this group answered with a log past a bootstrap entry (a first start) or answered at all; "+
			"bootstrapping from dLegerPeers",
			zap.String("brokerName", cfg.BrokerName), zap.Duration("within", joinCheckTimeout), zap.Strings("asked", tried))
		return "", nil
	}
}

// raftPeersRunning sends every member of conf but self a term-0 pre-vote
// request at once and returns why this member must join once one answers
// with a term past 1; "" when none did within ctx, with what was asked
// and its answer. An ask still waiting when ctx ends finishes on the
// transport's own timeout; its answer is dropped.
func raftPeersRunning(ctx context.Context, trans raft.Transport, conf raft.Configuration, self raft.ServerID) (string, []string) {
	pv, ok := trans.(raft.WithPreVote)
	if !ok {
		return "", nil
	}
	type answer struct{ why, note string }
	answers := make(chan answer, len(conf.Servers))
	header := rpcHeader(trans, self)
	asked := 0
	for _, s := range conf.Servers {
		if s.ID == self {
			continue
		}
		asked++
		go func() {
			var resp raft.RequestPreVoteResponse
			err := pv.RequestPreVote(s.ID, s.Address, &raft.RequestPreVoteRequest{RPCHeader: header}, &resp)
			switch {
			case err != nil:
				answers <- answer{note: fmt.Sprintf("%s at %s over Raft (%v)", s.ID, s.Address, err)}
			case len(resp.ID) > 0 && raft.ServerID(resp.ID) != s.ID:
				// Another process at that address (a dLegerPeers typo, a
				// port reused): its term says nothing about this group.
				answers <- answer{note: fmt.Sprintf("%s at %s over Raft (answered as %s)", s.ID, s.Address, resp.ID)}
			case resp.Term <= 1:
				answers <- answer{note: fmt.Sprintf("%s at %s over Raft (term %d: no election yet)", s.ID, s.Address, resp.Term)}
			default:
				answers <- answer{why: fmt.Sprintf("group member %s at %s is at Raft term %d (the group elected a leader); "+
					"not bootstrapping from dLegerPeers, joining as with raftJoin=true: the leader replicates to this member "+
					"while its id is a member, otherwise add it with `raftmq admin addMember`", s.ID, s.Address, resp.Term)}
			}
		}()
	}
	var tried []string
	for range asked {
		select {
		case a := <-answers:
			if a.why != "" {
				return a.why, nil
			}
			tried = append(tried, a.note)
		case <-ctx.Done():
			return "", append(tried, fmt.Sprintf("%d dLegerPeers member(s) over Raft (no answer in time)", asked-len(tried)))
		}
	}
	return "", tried
}

// runningLog asks every name server at once for this group's route, and
// every member one of them routes (other than this node: selfAddr,
// selfID) for RAFT_STATUS as soon as it is routed. It returns why this
// member must join rather than bootstrap once one answers with a Raft
// log; "" when none did within ctx, with what was asked and its answer.
// No ask waits for another: a name server or member that never answers
// (its host down behind a firewall) costs only its own ask, and a name
// server that lost the route (restarted) hides no member another routes.
func (p groupPeers) runningLog(ctx context.Context, selfAddr, selfID string) (string, []string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct{ why, note string }
	// Drained until every ask returned, so no ask outlives the check.
	answers := make(chan answer)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		asked = map[string]bool{"": true, selfAddr: true}
	)
	ask := func(addr string) {
		mu.Lock()
		defer mu.Unlock()
		if asked[addr] {
			return
		}
		asked[addr] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			why, note := p.judgeLog(ctx, addr, selfID)
			answers <- answer{why, note}
		}()
	}
	for _, ns := range p.nameServers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			route, _ := p.routeFrom(ctx, ns)
			for _, id := range slices.Sorted(maps.Keys(route)) {
				ask(route[id])
			}
		}()
	}
	go func() { wg.Wait(); close(answers) }()
	var why string
	var tried []string
	for a := range answers {
		switch {
		case why != "":
		case a.why != "":
			why = a.why
			cancel()
		default:
			tried = append(tried, a.note)
		}
	}
	if why != "" {
		return why, nil
	}
	return "", tried
}

// judgeLog asks the member at addr for RAFT_STATUS: why this member must
// join when it holds the group's log, else what it answered.
func (p groupPeers) judgeLog(ctx context.Context, addr, selfID string) (why, note string) {
	st, err := p.status(ctx, addr)
	switch {
	case err != nil:
		return "", fmt.Sprintf("%s (%v)", addr, err)
	case st.SelfID == selfID:
		return "", fmt.Sprintf("%s (answers as this member %s)", addr, selfID)
	case st.LastLogIndex <= 1 && st.LastSnapshotIndex == 0:
		// At most a bootstrap entry: a member of a group starting for
		// the first time, which registers as a follower before any
		// election. Every member bootstraps then; a group that ever
		// had a leader holds its no-op entry after it.
		return "", fmt.Sprintf("%s (%s holds no log past its bootstrap entry)", addr, st.SelfID)
	}
	return fmt.Sprintf("group %s's %s %s at %s holds a Raft log up to index %d (term %d); "+
		"not bootstrapping from dLegerPeers, joining as with raftJoin=true: the leader replicates to this member "+
		"while its id is a member, otherwise add it with `raftmq admin addMember`",
		p.brokerName, strings.ToLower(st.State), st.SelfID, addr, max(st.LastLogIndex, st.LastSnapshotIndex), st.LastLogTerm), ""
}

// errJoinCheckRunning answers the Raft RPCs other than pre-vote that reach
// a member during its join check, before its Raft runs: the sender retries.
var errJoinCheckRunning = errors.New("raftmq: member starting (join check), Raft not running yet")

// answerProbes answers, until the returned stop, the RPCs reaching trans
// while this member, which has no Raft state, runs its join check: a peer's
// pre-vote gets term 0 (what this member holds), anything else an error.
// stop returns once nothing reads trans's consumer any more, so Raft can
// take it over.
func answerProbes(trans raft.Transport, self raft.ServerID) (stop func()) {
	header := rpcHeader(trans, self)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case rpc := <-trans.Consumer():
				if _, ok := rpc.Command.(*raft.RequestPreVoteRequest); ok {
					rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: header}, nil)
					continue
				}
				rpc.Respond(emptyResponse(rpc.Command), errJoinCheckRunning)
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// rpcHeader is the header of the RPCs this member sends or answers before
// its Raft runs, as Raft would fill it.
func rpcHeader(trans raft.Transport, self raft.ServerID) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: trans.EncodePeer(self, trans.LocalAddr())}
}
