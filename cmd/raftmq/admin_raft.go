package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// memberStatus is one Raft member as raftStatus prints it. Lag is the
// leader's last log index minus this member's, as both reported them in
// this run (hashicorp/raft does not expose the leader's match index).
type memberStatus struct {
	ID                string `json:"id"`
	RaftAddr          string `json:"raftAddr"`
	RemotingAddr      string `json:"remotingAddr"`
	Suffrage          string `json:"suffrage"`
	State             string `json:"state"`
	Term              uint64 `json:"term"`
	LastLogIndex      uint64 `json:"lastLogIndex"`
	CommitIndex       uint64 `json:"commitIndex"`
	AppliedIndex      uint64 `json:"appliedIndex"`
	Lag               int64  `json:"lag"`
	LastContactMillis int64  `json:"lastContactMillis"`
	// Error says why the member could not be asked (down, not registered).
	Error string `json:"error,omitempty"`
	// LogStopped is the write failure that stopped the member's Raft log
	// (RaftStatus.LogStopped).
	LogStopped string `json:"logStopped,omitempty"`
	// ApplyStopped is why the member's FSM stopped
	// (RaftStatus.ApplyStopped).
	ApplyStopped string `json:"applyStopped,omitempty"`
	// AcksBeforeFsync is true when the member acknowledges and votes
	// before fsync (RaftStatus.AcksBeforeFsync).
	AcksBeforeFsync bool `json:"acksBeforeFsync"`
}

// groupStatus is one broker group (Raft group) as raftStatus prints it.
type groupStatus struct {
	Cluster           string         `json:"cluster"`
	BrokerName        string         `json:"brokerName"`
	LeaderID          string         `json:"leaderId"`
	LeaderAddr        string         `json:"leaderAddr"`
	Term              uint64         `json:"term"`
	PreferredLeaderID string         `json:"preferredLeaderId"`
	Members           []memberStatus `json:"members"`

	statuses map[string]*broker.RaftStatus // by Raft id, members that answered
}

// raftStatusOf asks one broker for RAFT_STATUS.
func (s *adminSession) raftStatusOf(ctx context.Context, addr string) (*broker.RaftStatus, error) {
	resp, err := s.brokerInvoke(ctx, addr, remoting.NewRequest(remoting.RequestRaftStatus, nil, nil))
	if err != nil {
		return nil, err
	}
	var st broker.RaftStatus
	if err := json.Unmarshal(resp.Body, &st); err != nil {
		return nil, fmt.Errorf("raft status from %s: %w", addr, err)
	}
	st.RemotingAddr = addr
	return &st, nil
}

// groupStatuses asks every registered member of the selected groups and
// merges their answers with the Raft configuration, so a member that is
// down still shows (from the others' configuration) with its error.
func (s *adminSession) groupStatuses(ctx context.Context, cluster, brokerName string) ([]*groupStatus, error) {
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []*groupStatus
	for _, m := range clusterMembers(ci, cluster) {
		if brokerName != "" && m.BrokerName != brokerName {
			continue
		}
		if len(out) == 0 || out[len(out)-1].BrokerName != m.BrokerName {
			out = append(out, &groupStatus{Cluster: m.Cluster, BrokerName: m.BrokerName, statuses: map[string]*broker.RaftStatus{}})
		}
	}
	if len(out) == 0 {
		what := "any broker group"
		if brokerName != "" {
			what = fmt.Sprintf("broker group %q", brokerName)
		}
		if cluster != "" {
			what += fmt.Sprintf(" in cluster %q", cluster)
		}
		return nil, fmt.Errorf("%w: the name server knows no %s (see `raftmq admin clusterList`)", errNotFound, what)
	}
	for _, g := range out {
		bd := ci.BrokerAddrTable[g.BrokerName]
		var failed []memberStatus
		for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
			addr := bd.BrokerAddrs[id]
			st, err := s.raftStatusOf(ctx, addr)
			if err != nil {
				failed = append(failed, memberStatus{RemotingAddr: addr, State: "Unreachable", Error: err.Error(), LastContactMillis: -1})
				continue
			}
			g.statuses[st.SelfID] = st
		}
		g.merge(failed)
	}
	return out, nil
}

// merge builds the member rows from the answers.
func (g *groupStatus) merge(failed []memberStatus) {
	var leader *broker.RaftStatus
	conf := map[string]broker.RaftMember{}
	for _, st := range g.statuses {
		if st.Term > g.Term {
			g.Term = st.Term
		}
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
		g.LeaderID, g.LeaderAddr = leader.SelfID, leader.RemotingAddr
		for _, m := range leader.Members { // the leader's configuration wins
			conf[m.ID] = m
		}
	}
	for _, id := range slices.Sorted(maps.Keys(conf)) {
		c := conf[id]
		ms := memberStatus{ID: id, RaftAddr: c.RaftAddr, Suffrage: c.Suffrage, State: "Unknown", LastContactMillis: -1, Lag: -1,
			Error: "no answer: down, or not registered with the name server"}
		if st, ok := g.statuses[id]; ok {
			ms = memberStatus{ID: id, RaftAddr: c.RaftAddr, RemotingAddr: st.RemotingAddr, Suffrage: c.Suffrage, State: st.State,
				Term: st.Term, LastLogIndex: st.LastLogIndex, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
				LastContactMillis: st.LastContactMillis, Lag: -1, LogStopped: st.LogStopped,
				ApplyStopped: st.ApplyStopped, AcksBeforeFsync: st.AcksBeforeFsync}
			if leader != nil {
				ms.Lag = max(int64(leader.LastLogIndex)-int64(st.LastLogIndex), 0)
			}
		}
		g.Members = append(g.Members, ms)
	}
	for _, f := range failed {
		f.Lag = -1
		g.Members = append(g.Members, f)
	}
}

func tableRaftStatus(w *tabwriter.Writer, gs []*groupStatus) {
	row(w, "#Broker Name", "#ID", "#Addr", "#Raft Addr", "#State", "#Term", "#Last Index", "#Commit", "#Applied", "#Lag", "#Last Contact", "#Acks", "#Note")
	for _, g := range gs {
		for _, m := range g.Members {
			lag, contact := "-", "-"
			if m.Lag >= 0 {
				lag = fmt.Sprint(m.Lag)
			}
			if m.LastContactMillis >= 0 {
				contact = (time.Duration(m.LastContactMillis) * time.Millisecond).String()
			}
			note := m.Error
			if note == "" && m.LogStopped != "" {
				note = "log stopped: " + m.LogStopped
			}
			if note == "" && m.ApplyStopped != "" {
				note = "apply stopped: " + m.ApplyStopped
			}
			if note == "" && m.Suffrage != "" && m.Suffrage != "Voter" {
				note = "learner (" + m.Suffrage + "): replicated to, not counted for commits or elections"
			}
			if note == "" && m.ID == g.PreferredLeaderID {
				note = "preferred leader"
			}
			// Loud on purpose: acks before fsync can lose acknowledged
			// messages when a majority crashes at once.
			acks := "-"
			if m.Error == "" {
				acks = "after fsync"
				if m.AcksBeforeFsync {
					acks = "BEFORE FSYNC"
				}
			}
			row(w, g.BrokerName, orDash(m.ID), orDash(m.RemotingAddr), orDash(m.RaftAddr), m.State, m.Term,
				m.LastLogIndex, m.CommitIndex, m.AppliedIndex, lag, contact, acks, orDash(note))
		}
	}
}

// transferResult is what leadershipTransfer prints.
type transferResult struct {
	BrokerName string `json:"brokerName"`
	broker.LeadershipTransferResult
	// Registered is true once the name server routes the new leader as
	// brokerId 0 (waited for up to --timeout).
	Registered bool `json:"registered"`
}

// transfer asks g's leader to hand leadership to target ("" = most
// caught up), follows one not-leader answer, then waits for the name
// server to route the new leader as brokerId 0.
func (s *adminSession) transfer(ctx context.Context, g *groupStatus, target string) (*transferResult, error) {
	if target != "" {
		if _, ok := g.statuses[target]; !ok && !slices.ContainsFunc(g.Members, func(m memberStatus) bool { return m.ID == target }) {
			return nil, fmt.Errorf("%w: %q is not a member of broker group %s (members: %v)", errNotFound, target, g.BrokerName, memberIDs(g))
		}
	}
	addr := g.LeaderAddr
	if addr == "" {
		return nil, fmt.Errorf("%w: broker group %s has no leader right now (election in progress? see raftStatus)", errTransferFailed, g.BrokerName)
	}
	var resp *remoting.RemotingCommand
	for hop := 0; ; hop++ {
		req := remoting.NewRequest(remoting.RequestLeadershipTransfer, &wire.LeadershipTransferRequestHeader{TargetID: target}, nil)
		// A transfer takes up to an election timeout plus the new leader's
		// barrier: give it more than one request timeout.
		cctx, cancel := context.WithTimeout(ctx, 2*s.f.timeout)
		r, err := s.rc.InvokeSync(cctx, addr, req)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: leader %s of %s did not answer the transfer (is it running?): %w", errUnreachable, addr, g.BrokerName, err)
		}
		if r.Code == remoting.ResponseServiceNotAvailable && r.ExtFields[wire.ExtLeaderAddr] != "" && r.ExtFields[wire.ExtLeaderAddr] != addr && hop < 2 {
			addr = r.ExtFields[wire.ExtLeaderAddr]
			continue
		}
		if r.Code != remoting.ResponseSuccess {
			return nil, fmt.Errorf("%w: %s (%s) answered code %d: %s", errTransferFailed, g.BrokerName, addr, r.Code, r.Remark)
		}
		resp = r
		break
	}
	res := &transferResult{BrokerName: g.BrokerName}
	if err := json.Unmarshal(resp.Body, &res.LeadershipTransferResult); err != nil {
		return nil, fmt.Errorf("%w: unreadable answer from %s: %v", errTransferFailed, addr, err)
	}
	if res.NewLeaderAddr == "" {
		return res, nil
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(s.f.timeout)
	for !res.Registered && time.Now().Before(deadline) {
		ci, err := s.a.ClusterInfo(ctx)
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

func memberIDs(g *groupStatus) []string {
	var ids []string
	for _, m := range g.Members {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// runLeadershipTransfer is `raftmq admin leadershipTransfer -n NAMESRV
// -b brokerName [-t nodeId]`.
func runLeadershipTransfer(ctx context.Context, s *adminSession, in flagValues) (*transferResult, error) {
	brokerName, target := in.str("brokerName"), in.str("targetId")
	gs, err := s.groupStatuses(ctx, "", brokerName)
	if err != nil {
		return nil, err
	}
	g := gs[0]
	if target != "" && target == g.LeaderID {
		return nil, fmt.Errorf("%w: %s is already the leader of %s", errAdminUsage, target, brokerName)
	}
	return s.transfer(ctx, g, target)
}

// balanceMove is one group's line of a balanceLeaders plan.
type balanceMove struct {
	BrokerName string `json:"brokerName"`
	From       string `json:"from"`
	To         string `json:"to"`
	Reason     string `json:"reason"`
	Result     string `json:"result"`
}

// planBalance picks, per group, where leadership should be: the
// preferredLeaderId when one is configured (and answered), otherwise a
// member on the host with the fewest leaders when the leader's host has
// at least two more than that host. Groups without a leader are skipped.
func planBalance(gs []*groupStatus) []balanceMove {
	hostOf := func(addr string) string {
		h, _, err := net.SplitHostPort(addr)
		if err != nil {
			return addr
		}
		return h
	}
	load := map[string]int{}
	for _, g := range gs {
		for _, st := range g.statuses {
			load[hostOf(st.RemotingAddr)] += 0
		}
		if g.LeaderAddr != "" {
			load[hostOf(g.LeaderAddr)]++
		}
	}
	var moves []balanceMove
	for _, g := range gs {
		if g.LeaderID == "" {
			moves = append(moves, balanceMove{BrokerName: g.BrokerName, Reason: "no leader (election in progress)", Result: "skipped"})
			continue
		}
		if p := g.PreferredLeaderID; p != "" {
			if p == g.LeaderID {
				continue
			}
			if _, ok := g.statuses[p]; !ok {
				moves = append(moves, balanceMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p,
					Reason: "preferred leader did not answer", Result: "skipped"})
				continue
			}
			load[hostOf(g.LeaderAddr)]--
			load[hostOf(g.statuses[p].RemotingAddr)]++
			moves = append(moves, balanceMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p, Reason: "preferredLeaderId"})
			continue
		}
		cur := hostOf(g.LeaderAddr)
		best, bestLoad := "", load[cur]-1
		for _, id := range slices.Sorted(maps.Keys(g.statuses)) {
			st := g.statuses[id]
			if id == g.LeaderID || st.State == "Shutdown" {
				continue
			}
			if l := load[hostOf(st.RemotingAddr)]; l < bestLoad {
				best, bestLoad = id, l
			}
		}
		if best != "" {
			load[cur]--
			load[hostOf(g.statuses[best].RemotingAddr)]++
			moves = append(moves, balanceMove{BrokerName: g.BrokerName, From: g.LeaderID, To: best,
				Reason: fmt.Sprintf("host %s leads %d groups", cur, load[cur]+1)})
		}
	}
	return moves
}

// runBalanceLeaders is `raftmq admin balanceLeaders -n NAMESRV [-c
// cluster] [--dry-run]`: the plan with each move's outcome, printed even
// when some moves failed.
func runBalanceLeaders(ctx context.Context, s *adminSession, in flagValues) ([]balanceMove, error) {
	gs, err := s.groupStatuses(ctx, in.str("clusterName"), "")
	if err != nil {
		return nil, err
	}
	byName := map[string]*groupStatus{}
	for _, g := range gs {
		byName[g.BrokerName] = g
	}
	moves := planBalance(gs)
	var errs []error
	for i := range moves {
		m := &moves[i]
		if m.Result != "" || in.bool("dry-run") {
			if m.Result == "" {
				m.Result = "planned"
			}
			continue
		}
		res, err := s.transfer(ctx, byName[m.BrokerName], m.To)
		if err != nil {
			m.Result = "failed: " + err.Error()
			errs = append(errs, err)
			continue
		}
		m.Result = fmt.Sprintf("moved in %s", time.Duration(res.TookMillis)*time.Millisecond)
	}
	if moves == nil {
		moves = []balanceMove{}
	}
	if err := errors.Join(errs...); err != nil {
		return moves, partialFailure{err}
	}
	return moves, nil
}

func tableBalance(w *tabwriter.Writer, moves []balanceMove) {
	if len(moves) == 0 {
		fmt.Fprintln(w, "leaders already balanced; nothing to move")
		return
	}
	columns([]any{"#Broker Name", "#From", "#To", "#Reason", "#Result"}, func(m balanceMove) []any {
		return []any{m.BrokerName, orDash(m.From), orDash(m.To), m.Reason, m.Result}
	})(w, moves)
}
