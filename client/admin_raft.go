package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// ErrNotMember is a Raft id that is not a member of the broker group it
// was named for.
var ErrNotMember = errors.New("client: not a member of the broker group")

// RaftGroup is one broker group (Raft group) as its registered members
// report it: their RAFT_STATUS answers merged with the Raft configuration,
// so a member that is down still shows (from the others' configuration)
// with its error.
type RaftGroup struct {
	Cluster    string `json:"cluster"`
	BrokerName string `json:"brokerName"`
	// LeaderID and LeaderAddr are the leader of the highest term any
	// member reported ("" while there is none).
	LeaderID   string `json:"leaderId"`
	LeaderAddr string `json:"leaderAddr"`
	Term       uint64 `json:"term"`
	// RoutedLeader is the address the name servers route as brokerId 0.
	RoutedLeader      string            `json:"routedLeader"`
	PreferredLeaderID string            `json:"preferredLeaderId"`
	Members           []RaftGroupMember `json:"members"`
	// Statuses are the answers, by Raft id, of the members that answered.
	Statuses map[string]*wire.RaftStatus `json:"-"`
}

// RaftGroupMember is one Raft member of a RaftGroup. Lag is the leader's
// last log index minus this member's, as both reported them in this call
// (hashicorp/raft does not expose the leader's match index).
type RaftGroupMember struct {
	ID           string `json:"id"`
	RaftAddr     string `json:"raftAddr"`
	RemotingAddr string `json:"remotingAddr"`
	// BrokerID is the id the member registered with (0 = routed leader),
	// -1 when it is not registered with the name servers.
	BrokerID int64 `json:"brokerId"`
	// Suffrage is Voter, Nonvoter (a learner) or Staging as the leader's
	// configuration has it; SuffrageRemoved for a member that answered
	// but is not in it.
	Suffrage string `json:"suffrage"`
	// State is Leader, Follower, Candidate, Shutdown; Refused when the
	// member answered RAFT_STATUS with NO_PERMISSION (ACL), Unreachable
	// when it did not answer or answered another error (a member shutting
	// down), Unknown when the configuration names it but no answer came
	// (down, or not registered).
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	LastLogIndex uint64 `json:"lastLogIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	// Lag is -1 when unknown (no leader, or no answer).
	Lag int64 `json:"lag"`
	// LastContactMillis is how long ago the member heard from a leader (0
	// on the leader, -1 never or unknown).
	LastContactMillis int64 `json:"lastContactMillis"`
	// Error says why the member could not be asked.
	Error string `json:"error,omitempty"`
	// LogStopped, ApplyStopped and AcksBeforeFsync are the member's
	// RaftStatus fields of those names.
	LogStopped      string `json:"logStopped,omitempty"`
	ApplyStopped    string `json:"applyStopped,omitempty"`
	AcksBeforeFsync bool   `json:"acksBeforeFsync"`
	// Catchup is the member's full-data catch-up (RaftStatus.Catchup).
	Catchup *wire.CatchupStatus `json:"catchup,omitempty"`
	// Promotion is the leader's wait to promote this learner, if any
	// (the leader's RaftStatus.Promotions).
	Promotion *wire.PromotionStatus `json:"promotion,omitempty"`
}

// SuffrageRemoved is the Suffrage of a member that answered RAFT_STATUS
// although the leader's configuration lacks it: removed while it was down
// or cut off, it runs on the stale configuration it kept, which still
// names it a voter, until its removal watch reaches the routed leader and
// stops it. It is no member: not in MemberIDs, never a transfer target.
const SuffrageRemoved = "Removed"

// RaftStatus asks the broker at addr for its RAFT_STATUS (30001), with
// RemotingAddr set to addr.
func (a *Admin) RaftStatus(ctx context.Context, addr string) (*wire.RaftStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
	defer cancel()
	resp, err := invokeOK(cctx, a.rc, "", addr, remoting.NewRequest(remoting.RequestRaftStatus, nil, nil))
	if err != nil {
		return nil, err
	}
	var st wire.RaftStatus
	if err := json.Unmarshal(resp.Body, &st); err != nil {
		return nil, fmt.Errorf("unreadable RAFT_STATUS answer from %s: %w", addr, err)
	}
	st.RemotingAddr = addr
	return &st, nil
}

// RaftGroups asks every registered member of the selected broker groups
// for RAFT_STATUS at once and merges the answers. ci is the name servers'
// cluster table (nil: asked here); cluster and brokerName select ("" =
// all). Groups come sorted by cluster, then name; none selected is an
// empty result, not an error. A member that does not answer is a row with
// its error, never a failure of the call.
func (a *Admin) RaftGroups(ctx context.Context, ci *wire.ClusterInfo, cluster, brokerName string) ([]*RaftGroup, error) {
	if ci == nil {
		var err error
		if ci, err = a.ClusterInfo(ctx); err != nil {
			return nil, err
		}
	}
	type ask struct {
		g    *RaftGroup
		id   int64
		addr string
		st   *wire.RaftStatus
		err  error
	}
	var out []*RaftGroup
	var asks []*ask
	for _, c := range slices.Sorted(maps.Keys(ci.ClusterAddrTable)) {
		if cluster != "" && c != cluster {
			continue
		}
		for _, name := range slices.Sorted(slices.Values(ci.ClusterAddrTable[c])) {
			bd, ok := ci.BrokerAddrTable[name]
			if !ok || (brokerName != "" && name != brokerName) {
				continue
			}
			g := &RaftGroup{Cluster: c, BrokerName: name, RoutedLeader: bd.BrokerAddrs[wire.MasterID],
				Statuses: map[string]*wire.RaftStatus{}, Members: []RaftGroupMember{}}
			out = append(out, g)
			for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
				asks = append(asks, &ask{g: g, id: id, addr: bd.BrokerAddrs[id]})
			}
		}
	}
	var wg sync.WaitGroup
	for _, q := range asks {
		wg.Go(func() { q.st, q.err = a.RaftStatus(ctx, q.addr) })
	}
	wg.Wait()
	failed := map[*RaftGroup][]RaftGroupMember{}
	registered := map[string]int64{}
	for _, q := range asks {
		registered[q.addr] = q.id
		if q.err != nil {
			failed[q.g] = append(failed[q.g], RaftGroupMember{RemotingAddr: q.addr, BrokerID: q.id, State: failedState(q.err),
				Error: q.err.Error(), LastContactMillis: -1, Lag: -1})
			continue
		}
		q.g.Statuses[q.st.SelfID] = q.st
	}
	for _, g := range out {
		g.merge(failed[g], registered)
	}
	return out, nil
}

// failedState is the row state of a member whose RAFT_STATUS failed: an
// ACL refusal is Refused (the caller lacks rights: the command fails);
// anything else, a member shutting down included, is Unreachable.
func failedState(err error) string {
	if be := (*BrokerError)(nil); errors.As(err, &be) && be.Code == remoting.ResponseNoPermission {
		return "Refused"
	}
	return "Unreachable"
}

// merge builds the member rows from the answers. Once a leader answered
// with its configuration, that configuration decides who is a member: a
// member that answered from outside it is a SuffrageRemoved row, and an id
// only a stale configuration names (silent, not in the leader's) is no
// row. Without one, the rows are every configuration's members.
func (g *RaftGroup) merge(failed []RaftGroupMember, registered map[string]int64) {
	var leader *wire.RaftStatus
	conf := map[string]wire.RaftMember{}
	for _, id := range slices.Sorted(maps.Keys(g.Statuses)) {
		st := g.Statuses[id]
		g.Term = max(g.Term, st.Term)
		if st.State == "Leader" && (leader == nil || st.Term > leader.Term) {
			leader = st
		}
		if g.PreferredLeaderID == "" {
			g.PreferredLeaderID = st.PreferredLeaderID
		}
		for _, m := range st.Members {
			conf[m.ID] = m
		}
	}
	if leader != nil {
		// A member outside the leader's configuration may campaign at ever
		// higher terms and name a preferred leader the group dropped; the
		// leader's preferredLeaderId is the one its transfer loop follows.
		g.LeaderID, g.LeaderAddr = leader.SelfID, leader.RemotingAddr
		g.Term, g.PreferredLeaderID = leader.Term, leader.PreferredLeaderID
		if len(leader.Members) > 0 {
			// Every id so far comes from some member's configuration; the
			// leader's own members are put back right after.
			for id := range conf {
				if _, answered := g.Statuses[id]; !answered {
					delete(conf, id)
				} else {
					conf[id] = wire.RaftMember{ID: id, RaftAddr: conf[id].RaftAddr, Suffrage: SuffrageRemoved}
				}
			}
		}
		for _, m := range leader.Members {
			conf[m.ID] = m
		}
	}
	for _, id := range slices.Sorted(maps.Keys(conf)) {
		cm := conf[id]
		m := RaftGroupMember{ID: id, RaftAddr: cm.RaftAddr, Suffrage: cm.Suffrage, State: "Unknown", BrokerID: -1,
			LastContactMillis: -1, Lag: -1, Error: "no answer: down, or not registered with the name server"}
		if st, ok := g.Statuses[id]; ok {
			bid, ok := registered[st.RemotingAddr]
			if !ok {
				bid = -1
			}
			m = RaftGroupMember{ID: id, RaftAddr: cm.RaftAddr, RemotingAddr: st.RemotingAddr, BrokerID: bid,
				Suffrage: cm.Suffrage, State: st.State, Term: st.Term, LastLogIndex: st.LastLogIndex, CommitIndex: st.CommitIndex,
				AppliedIndex: st.AppliedIndex, Lag: -1, LastContactMillis: st.LastContactMillis,
				AcksBeforeFsync: st.AcksBeforeFsync, LogStopped: st.LogStopped, ApplyStopped: st.ApplyStopped, Catchup: st.Catchup}
			if leader != nil {
				m.Lag = max(int64(leader.LastLogIndex)-int64(st.LastLogIndex), 0)
			}
		}
		if leader != nil {
			for i := range leader.Promotions {
				if leader.Promotions[i].ID == id {
					m.Promotion = &leader.Promotions[i]
				}
			}
		}
		g.Members = append(g.Members, m)
	}
	g.Members = append(g.Members, g.foldFailed(failed, leader)...)
}

// foldFailed moves each row of a registered address that did not answer
// into the row of the member registered there, when the configuration
// row got no answer either, and returns the rows it could not place: a
// member down while its registration lingers (a hung host, whose
// connection stays open until it expires) would otherwise show twice, as
// its Raft id (Unknown) and as its address (Unreachable). A member
// registers as brokerId 0 while it leads, otherwise as its slot in the
// Raft configuration (position + 1): a slot names the id at that position
// of the leader's configuration (else of the answering member with the
// longest log), and brokerId 0 the leader the answering members follow.
// Only rows without an answer are filled, so a slot gone stale with a
// membership change never hides a member that answered.
func (g *RaftGroup) foldFailed(failed []RaftGroupMember, leader *wire.RaftStatus) []RaftGroupMember {
	var order []wire.RaftMember
	if leader != nil && len(leader.Members) > 0 {
		order = leader.Members
	} else {
		var newest *wire.RaftStatus
		for _, id := range slices.Sorted(maps.Keys(g.Statuses)) {
			if st := g.Statuses[id]; len(st.Members) > 0 && (newest == nil || st.LastLogIndex > newest.LastLogIndex) {
				newest = st
			}
		}
		if newest != nil {
			order = newest.Members
		}
	}
	var followed *wire.RaftStatus
	for _, id := range slices.Sorted(maps.Keys(g.Statuses)) {
		if st := g.Statuses[id]; st.LeaderID != "" && (followed == nil || st.Term > followed.Term) {
			followed = st
		}
	}
	var rest []RaftGroupMember
	for _, f := range failed {
		var id string
		switch {
		case f.BrokerID == wire.MasterID && followed != nil:
			id = followed.LeaderID
		case f.BrokerID > 0 && f.BrokerID <= int64(len(order)):
			id = order[f.BrokerID-1].ID
		}
		i := slices.IndexFunc(g.Members, func(m RaftGroupMember) bool { return id != "" && m.ID == id })
		if i < 0 || g.Members[i].State != "Unknown" || g.Members[i].RemotingAddr != "" {
			rest = append(rest, f)
			continue
		}
		m := &g.Members[i]
		m.RemotingAddr, m.BrokerID, m.State, m.Error = f.RemotingAddr, f.BrokerID, f.State, f.Error
	}
	return rest
}

// MemberIDs lists the Raft ids of g's members (not a SuffrageRemoved
// row's).
func (g *RaftGroup) MemberIDs() []string {
	var ids []string
	for _, m := range g.Members {
		if m.ID != "" && m.Suffrage != SuffrageRemoved {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// leaderConfigured says whether id is in the group's Raft configuration as
// its leader reports it, and whether as a voter: only a voter there can
// win the election a transfer starts. A member removed while it was down
// or cut off answers with its own stale configuration, naming itself a
// voter, until it learns; the leader's word is the one that counts. ok is
// false when no leader answered with its configuration; member and voter
// then come from the merged rows.
func (g *RaftGroup) leaderConfigured(id string) (member, voter, ok bool) {
	st := g.Statuses[g.LeaderID]
	if g.LeaderID == "" || st == nil || len(st.Members) == 0 {
		i := slices.IndexFunc(g.Members, func(m RaftGroupMember) bool { return m.ID == id })
		if i < 0 {
			_, answered := g.Statuses[id]
			return answered, answered, false
		}
		return true, g.Members[i].Suffrage == "" || g.Members[i].Suffrage == "Voter", false
	}
	for _, m := range st.Members {
		if m.ID == id {
			return true, m.Suffrage == "" || m.Suffrage == "Voter", true
		}
	}
	return false, false, true
}

// LeadershipTransfer is the outcome of Admin.TransferLeadership.
type LeadershipTransfer struct {
	BrokerName string `json:"brokerName"`
	wire.LeadershipTransferResult
	// Registered is true once the name servers route the new leader as
	// brokerId 0 (waited for up to the call's routeWait).
	Registered bool `json:"registered"`
}

// TransferLeadership asks g's leader for LEADERSHIP_TRANSFER (30002) to
// target ("" lets the leader pick the most caught-up follower), following
// not-leader answers, then waits up to routeWait for the name servers to
// route the new leader as brokerId 0. A target outside g is ErrNotMember;
// a group without a leader is ErrNoBroker.
func (a *Admin) TransferLeadership(ctx context.Context, g *RaftGroup, target string, routeWait time.Duration) (*LeadershipTransfer, error) {
	if member, _, _ := g.leaderConfigured(target); target != "" && !member {
		return nil, fmt.Errorf("%w: %q is not a member of broker group %s (members: %v)", ErrNotMember, target, g.BrokerName, g.MemberIDs())
	}
	if g.LeaderAddr == "" {
		return nil, fmt.Errorf("%w: broker group %s has no leader right now (election in progress?)", ErrNoBroker, g.BrokerName)
	}
	// A transfer takes up to an election timeout plus the new leader's
	// barrier: give each hop more than one request timeout.
	resp, err := a.hopCall(ctx, 2*a.cfg.requestTimeout, g.BrokerName, g.LeaderAddr, func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestLeadershipTransfer, &wire.LeadershipTransferRequestHeader{TargetID: target}, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("leadership transfer of %s: %w", g.BrokerName, err)
	}
	res := &LeadershipTransfer{BrokerName: g.BrokerName}
	if err := json.Unmarshal(resp.Body, &res.LeadershipTransferResult); err != nil {
		return nil, fmt.Errorf("unreadable LEADERSHIP_TRANSFER answer for %s: %w", g.BrokerName, err)
	}
	if res.NewLeaderAddr == "" {
		return res, nil
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for deadline := time.Now().Add(routeWait); time.Now().Before(deadline); {
		ci, err := a.ClusterInfo(ctx)
		if err == nil && ci.BrokerAddrTable[g.BrokerName].BrokerAddrs[wire.MasterID] == res.NewLeaderAddr {
			res.Registered = true
			break
		}
		select {
		case <-ctx.Done():
			return res, nil
		case <-t.C:
		}
	}
	return res, nil
}

// LeaderMove is one group's line of a leader-balance plan.
type LeaderMove struct {
	BrokerName string `json:"brokerName"`
	From       string `json:"from"`
	To         string `json:"to"`
	Reason     string `json:"reason"`
	// Result is set by the planner for a skipped group; the caller sets
	// it to planned (dry run), "moved in …" or "failed: …".
	Result string `json:"result"`
}

// PlanLeaderBalance picks, per group, where leadership should be: the
// preferredLeaderId when one is configured (and answered), otherwise a
// member on the host with the fewest leaders when the leader's host has
// at least two more than that host. Groups without a leader are skipped
// with a reason; balanced groups have no move.
func PlanLeaderBalance(gs []*RaftGroup) []LeaderMove {
	hostOf := func(addr string) string {
		if h, _, err := net.SplitHostPort(addr); err == nil {
			return h
		}
		return addr
	}
	load := map[string]int{}
	for _, g := range gs {
		for _, st := range g.Statuses {
			load[hostOf(st.RemotingAddr)] += 0
		}
		if g.LeaderAddr != "" {
			load[hostOf(g.LeaderAddr)]++
		}
	}
	moves := []LeaderMove{}
	for _, g := range gs {
		if g.LeaderID == "" {
			moves = append(moves, LeaderMove{BrokerName: g.BrokerName, Reason: "no leader (election in progress)", Result: "skipped"})
			continue
		}
		// Only a voter of the leader's configuration can win the election
		// a transfer starts: not a nonvoter (a member being added), not a
		// removed member that still answers (and may still be registered)
		// with the stale configuration it kept.
		voter := func(id string) bool {
			_, v, _ := g.leaderConfigured(id)
			return v
		}
		if p := g.PreferredLeaderID; p != "" {
			if p == g.LeaderID {
				continue
			}
			member, _, _ := g.leaderConfigured(p)
			st, ok := g.Statuses[p]
			if !member {
				// Removed or replaced since the confs named it: no
				// wait or restart brings it back.
				moves = append(moves, LeaderMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p,
					Reason: "preferred leader is not a member of the group (set preferredLeaderId to a member)", Result: "skipped"})
				continue
			}
			if !ok {
				moves = append(moves, LeaderMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p,
					Reason: "preferred leader did not answer", Result: "skipped"})
				continue
			}
			if !voter(p) {
				moves = append(moves, LeaderMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p,
					Reason: "preferred leader is not a voter", Result: "skipped"})
				continue
			}
			load[hostOf(g.LeaderAddr)]--
			load[hostOf(st.RemotingAddr)]++
			moves = append(moves, LeaderMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p, Reason: "preferredLeaderId"})
			continue
		}
		cur := hostOf(g.LeaderAddr)
		best, bestLoad := "", load[cur]-1
		for _, id := range slices.Sorted(maps.Keys(g.Statuses)) {
			st := g.Statuses[id]
			if id == g.LeaderID || st.State == "Shutdown" || !voter(id) {
				continue
			}
			if l := load[hostOf(st.RemotingAddr)]; l < bestLoad {
				best, bestLoad = id, l
			}
		}
		if best != "" {
			load[cur]--
			load[hostOf(g.Statuses[best].RemotingAddr)]++
			moves = append(moves, LeaderMove{BrokerName: g.BrokerName, From: g.LeaderID, To: best,
				Reason: fmt.Sprintf("host %s leads %d groups", cur, load[cur]+1)})
		}
	}
	return moves
}

// BalanceLeaders carries out a plan from PlanLeaderBalance over gs: each
// move without a Result is transferred (or marked planned when dryRun),
// its Result set to the outcome. It returns the failed transfers' errors
// joined; the plan is complete either way.
func (a *Admin) BalanceLeaders(ctx context.Context, gs []*RaftGroup, moves []LeaderMove, dryRun bool, routeWait time.Duration) error {
	byName := map[string]*RaftGroup{}
	for _, g := range gs {
		byName[g.BrokerName] = g
	}
	var errs []error
	for i := range moves {
		m := &moves[i]
		if m.Result != "" {
			continue
		}
		if dryRun {
			m.Result = "planned"
			continue
		}
		res, err := a.TransferLeadership(ctx, byName[m.BrokerName], m.To, routeWait)
		if err != nil {
			m.Result = "failed: " + err.Error()
			errs = append(errs, err)
			continue
		}
		m.Result = fmt.Sprintf("moved in %s", time.Duration(res.TookMillis)*time.Millisecond)
	}
	return errors.Join(errs...)
}
