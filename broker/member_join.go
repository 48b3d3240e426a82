package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

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
// catches up. So before it bootstraps, an empty member asks the members
// the name servers route for its brokerName for RAFT_STATUS (every name
// server and every routed member at once, followers as well as the
// routed master, which may be the one that is down): one that
// answers with a log past the bootstrap entry (the group elected a leader
// once) means the group runs, and the member joins as with raftJoin=true.
// With no route (the group's first start) nobody is asked; when the
// routed members hold no more than a bootstrap entry or do not answer
// within joinCheckTimeout (the whole group down or wiped) the member
// bootstraps.

// joinCheckTimeout bounds the join check: the route lookup and the
// RAFT_STATUS asks together. Members that are down refuse the connection
// at once; only an unreachable host makes a start wait this long.
const joinCheckTimeout = 2 * time.Second

// joinCheck is newGroup's look for a running group before a bootstrap:
// it returns why the member joins instead ("" to bootstrap), or the
// configuration error that keeps it from asking, which must fail the
// start before a bootstrap writes the member's own first entry.
type joinCheck func() (string, error)

// runningGroupCheck is the joinCheck of a node with name servers (nil
// without: gossip-only nodes bootstrap as before).
func runningGroupCheck(cfg BrokerConfig, log *zap.Logger) joinCheck {
	if len(cfg.NameServers()) == 0 {
		return nil
	}
	return func() (string, error) {
		cl, err := newMemberClient(cfg, log.Named("joincheck"))
		if err != nil {
			return "", err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), joinCheckTimeout)
		defer cancel()
		p := groupPeers{client: cl, nameServers: cfg.NameServers(), brokerName: cfg.BrokerName}
		why, tried := p.runningLog(ctx, cfg.RemotingAddr(), cfg.Raft.DLegerSelfID)
		if why == "" && len(tried) > 0 {
			log.Info("no routed member of this group holds a log past a bootstrap entry (a first start) or answered; "+
				"bootstrapping from dLegerPeers",
				zap.String("brokerName", cfg.BrokerName), zap.Duration("within", joinCheckTimeout), zap.Strings("asked", tried))
		}
		return why, nil
	}
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
